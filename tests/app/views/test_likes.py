"""Likes of messages and comments: create (idempotent), the Like JSON, lists of likers,
show, remove (only your own), own content, archived groups, tenancy, concurrency, and the fixed
query count of the likers list."""

from __future__ import annotations

import asyncio

from tests.app.views.feed_support import comment, make_group, post
from tests.conftest import QueryLog
from tests.support import World

LIKE_KEYS = ["id", "user", "created_at", "unlikable"]
FULL_USER_KEYS_START = ["contact_info", "manager", "custom_fields", "followable"]


async def test_like_a_message_twice_makes_one_like(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    message = await post(admin, "Like me")
    path = f"/api/messages/{message['id']}/likes"
    first = await bob.api.post(path)
    assert first.status == 201, first.text
    assert list(first.json) == ["like"]
    like = first.json["like"]
    assert list(like) == [*LIKE_KEYS, "parent_likes_count"]
    base = f"https://{admin.community.domain}"
    assert like["user"] == {"id": bob.id, "name": "Bob " + bob.row["last_name"],
                            "url": f"{base}/users/{bob.id}-{bob.username.lower()}"}
    assert like["unlikable"] is True and like["parent_likes_count"] == 1
    assert like["created_at"].endswith("+00:00")
    again = await bob.api.post(path)
    assert again.status == 200 and again.json["like"]["id"] == like["id"]
    assert again.json["like"]["parent_likes_count"] == 1
    shown = (await admin.api.get(f"/api/messages/{message['id']}")).json["message"]
    assert shown["likes_count"] == 1
    (listed,) = shown["likes"]
    assert list(listed) == LIKE_KEYS
    assert listed["unlikable"] is False  # the admin did not make it
    assert shown["likable"] is False  # the admin's own message


async def test_liking_your_own_message_or_comment_is_403(world: World) -> None:
    admin = await world.community()
    message = await post(admin, "Mine")
    c = await comment(admin, message["id"])
    assert (await admin.api.post(f"/api/messages/{message['id']}/likes")).status == 403
    assert (await admin.api.post(
        f"/api/messages/{message['id']}/comments/{c['id']}/likes")).status == 403
    assert (await admin.api.get(f"/api/messages/{message['id']}")).json["message"][
        "likes_count"] == 0


async def test_likers_list_show_and_remove(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    message = await post(admin, "Popular")
    path = f"/api/messages/{message['id']}/likes"
    bob_like = (await bob.api.post(path)).json["like"]
    carol_like = (await carol.api.post(path)).json["like"]
    likers = await admin.api.get(path)
    assert likers.status == 200 and list(likers.json) == ["users"]
    assert [u["id"] for u in likers.json["users"]] == [bob.id, carol.id]
    assert list(likers.json["users"][0])[:4] == FULL_USER_KEYS_START
    paged = await admin.api.get(path, params={"per_page": 1, "page": 2})
    assert [u["id"] for u in paged.json["users"]] == [carol.id]
    shown = await carol.api.get(f"{path}/{bob_like['id']}")
    assert shown.status == 200 and list(shown.json["like"]) == LIKE_KEYS
    assert shown.json["like"]["unlikable"] is False
    assert (await bob.api.get(f"{path}/{bob_like['id']}")).json["like"]["unlikable"] is True
    assert (await carol.api.delete(f"{path}/{bob_like['id']}")).status == 403
    assert (await admin.api.delete(f"{path}/{bob_like['id']}")).status == 403
    removed = await bob.api.delete(f"{path}/{bob_like['id']}")
    assert removed.status == 204 and removed.text == ""
    assert (await bob.api.get(f"{path}/{bob_like['id']}")).status == 404
    assert [u["id"] for u in (await admin.api.get(path)).json["users"]] == [carol.id]
    assert (await admin.api.get(f"/api/messages/{message['id']}")).json["message"][
        "likes_count"] == 1
    # a like id of another message is not found here
    other = await post(admin, "Other")
    assert (await carol.api.get(f"/api/messages/{other['id']}/likes/"
                                f"{carol_like['id']}")).status == 404


async def test_comment_likes(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    message = await post(admin, "Thread")
    c = await comment(bob, message["id"], "good point")
    path = f"/api/messages/{message['id']}/comments/{c['id']}/likes"
    created = await admin.api.post(path)
    assert created.status == 201 and created.json["like"]["parent_likes_count"] == 1
    assert (await admin.api.post(path)).status == 200
    assert [u["id"] for u in (await bob.api.get(path)).json["users"]] == [admin.id]
    like_id = created.json["like"]["id"]
    shown = await bob.api.get(f"{path}/{like_id}")
    assert shown.status == 200 and shown.json["like"]["unlikable"] is False
    # the comment like is not a like of the message
    assert (await bob.api.get(f"/api/messages/{message['id']}/likes/{like_id}")).status == 404
    thread = (await bob.api.get(f"/api/messages/{message['id']}")).json["message"]
    assert thread["likes_count"] == 0
    assert thread["comments"][0]["likes_count"] == 1
    assert thread["comments"][0]["likes"][0]["user"]["id"] == admin.id
    assert thread["comments"][0]["likable"] is False  # bob's own comment
    # a comment of another message
    other = await post(admin, "Other")
    assert (await admin.api.post(
        f"/api/messages/{other['id']}/comments/{c['id']}/likes")).status == 404
    assert (await admin.api.delete(f"{path}/{like_id}")).status == 204
    assert (await bob.api.get(path)).json["users"] == []


async def test_concurrent_likes_by_one_user_make_one_like(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    message = await post(admin, "Click click click")
    path = f"/api/messages/{message['id']}/likes"
    results = await asyncio.gather(*(bob.api.post(path) for _ in range(8)))
    assert sorted(r.status for r in results) == [200] * 7 + [201]
    assert len({r.json["like"]["id"] for r in results}) == 1
    count = await world.pool.fetchval("SELECT count(*) FROM likes WHERE message_id = $1",
                                      message["id"])
    assert count == 1


async def test_likes_in_private_groups_archived_groups_and_other_communities(
    world: World,
) -> None:
    admin = await world.community("Acme")
    bob = await world.user(admin, "Bob")
    private = await make_group(world, admin, "Board", permission="private")
    secret = await post(admin, "secret", group_id=private)
    other = await world.community("Other")
    for member in (bob, other):
        assert (await member.api.post(f"/api/messages/{secret['id']}/likes")).status == 404
        assert (await member.api.get(f"/api/messages/{secret['id']}/likes")).status == 404
    archived = await make_group(world, admin, "Old", members=[bob])
    old = await post(admin, "old news", group_id=archived)
    await world.pool.execute("UPDATE groups SET state = 'archived' WHERE id = $1", archived)
    assert (await bob.api.post(f"/api/messages/{old['id']}/likes")).status == 403
    public = await post(admin, "visible")
    like = (await bob.api.post(f"/api/messages/{public['id']}/likes")).json["like"]
    assert (await other.api.get(f"/api/messages/{public['id']}/likes/{like['id']}")).status \
        == 404
    assert (await other.api.delete(f"/api/messages/{public['id']}/likes/{like['id']}")).status \
        == 404


async def test_likers_query_count_is_fixed(world: World, query_log: QueryLog) -> None:
    admin = await world.community()
    people = await world.many_users(admin, 12)
    message = await post(admin, "Everyone likes this")
    for person in people:
        assert (await person.api.post(f"/api/messages/{message['id']}/likes")).status == 201
    path = f"/api/messages/{message['id']}/likes"
    await admin.api.get(path)
    query_log.reset()
    one = await admin.api.get(path, params={"per_page": 1})
    small = len(query_log)
    query_log.reset()
    many = await admin.api.get(path, params={"per_page": 500})
    assert len(query_log) == small
    assert len(one.json["users"]) == 1 and len(many.json["users"]) == 12
