"""Group chat: posting, listing, marking read, who may use it, and its events."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.app.views.conversations_support import events_of
from tests.support import Member, World

CHAT_KEYS = ["id", "body", "html_body", "user", "group_id", "attachments", "created_at"]


async def chat_group(owner: Member, *members: Member, chat: bool = True,
                     permission: str = "public", name: str = "Cats") -> int:
    resp = await owner.api.post("/api/groups", json={"group": {
        "name": name, "chat": chat, "permission_mode": permission}})
    assert resp.status == 201, resp.text
    group_id: int = resp.json["group"]["id"]
    for member in members:
        joined = await owner.api.post(f"/api/groups/{group_id}/memberships",
                                      json={"group_membership": {"user_id": member.id}})
        assert joined.status in (200, 201), joined.text
    return group_id


async def post(member: Member, group_id: int, body: str) -> dict[str, Any]:
    resp = await member.api.post(f"/api/groups/{group_id}/chat_messages",
                                 json={"chat_message": {"body": body}})
    assert resp.status == 201, resp.text
    message: dict[str, Any] = resp.json["chat_message"]
    return message


async def test_post_and_list(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann", "Lee")
    bob = await world.user(admin, "Bob", "Ray")
    gid = await chat_group(ann, bob)
    resp = await bob.api.post(f"/api/groups/{gid}/chat_messages.json",
                              data={"chat_message[body]": "Hello *cats*"})
    assert resp.status == 201, resp.text
    msg = resp.json["chat_message"]
    assert list(msg) == CHAT_KEYS
    assert msg["body"] == "Hello *cats*"
    assert msg["html_body"] == '<div class="markdown-body"><p>Hello <em>cats</em></p></div>'
    assert msg["user"]["id"] == bob.id and msg["user"]["name"] == "Bob Ray"
    assert msg["group_id"] == gid
    assert msg["attachments"] == []
    assert msg["created_at"].endswith("+00:00")
    await post(ann, gid, "two")
    await post(bob, gid, "three")
    listed = await ann.api.get(f"/api/groups/{gid}/chat_messages")
    assert listed.status == 200
    assert [m["body"] for m in listed.json["chat_messages"]] == ["three", "two", "Hello *cats*"]
    assert listed.json["chat_messages"][2] == msg
    paged = await ann.api.get(f"/api/groups/{gid}/chat_messages",
                              params={"per_page": "2", "page": "2"})
    assert [m["body"] for m in paged.json["chat_messages"]] == ["Hello *cats*"]
    before = await ann.api.get(f"/api/groups/{gid}/chat_messages",
                               params={"before": str(listed.json["chat_messages"][0]["id"])})
    assert [m["body"] for m in before.json["chat_messages"]] == ["two", "Hello *cats*"]
    future = await ann.api.get(f"/api/groups/{gid}/chat_messages",
                               params={"since": "4102444800"})
    assert future.json == {"chat_messages": []}
    past = await ann.api.get(f"/api/groups/{gid}/chat_messages", params={"since": "0"})
    assert len(past.json["chat_messages"]) == 3
    assert (await ann.api.get(f"/api/groups/{gid}/chat_messages",
                              params={"since": "soon"})).status == 400


async def test_a_chat_message_needs_a_body(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    gid = await chat_group(ann)
    blank = await ann.api.post(f"/api/groups/{gid}/chat_messages",
                               json={"chat_message": {"body": "  "}})
    assert blank.status == 422
    assert blank.json["fields"] == {"chat_message[body]": ["can't be blank"]}
    # a request that names no field at all says so (decisions.md: never a silent write)
    empty = await ann.api.post(f"/api/groups/{gid}/chat_messages", json={})
    assert empty.status == 422
    assert empty.json["fields"] == {"chat_message": ["names no known field"]}
    assert (await ann.api.get(f"/api/groups/{gid}/chat_messages")).json == {
        "chat_messages": []}


async def test_who_may_use_a_chat(world: World) -> None:
    admin = await world.community()
    ann, bob, eve = [await world.user(admin, n) for n in ("Ann", "Bob", "Eve")]
    public = await chat_group(ann, bob, name="Public")
    secret = await chat_group(ann, bob, permission="private", name="Secret")
    quiet = await chat_group(ann, bob, chat=False, name="Quiet")
    await post(bob, public, "members only")
    path = "/api/groups/{}/chat_messages"
    # a visible group Eve is not in: 403
    for method in ("GET", "POST", "PATCH"):
        resp = await eve.api.request(method, path.format(public),
                                     json={"chat_message": {"body": "x"}})
        assert resp.status == 403, (method, resp.status)
        # a private group she can't see: 404
        hidden = await eve.api.request(method, path.format(secret),
                                       json={"chat_message": {"body": "x"}})
        assert hidden.status == 404, (method, hidden.status)
        # no chat: 422
        off = await bob.api.request(method, path.format(quiet),
                                    json={"chat_message": {"body": "x"}})
        assert off.status == 422, (method, off.status)
    # an unknown group is a 404
    assert (await bob.api.get(path.format(999_999))).status == 404
    listed = await bob.api.get(path.format(public))
    assert [m["body"] for m in listed.json["chat_messages"]] == ["members only"]


async def test_archived_group_chat_is_read_only(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    gid = await chat_group(ann, bob)
    await post(bob, gid, "before")
    assert (await ann.api.delete(f"/api/groups/{gid}/archive")).status == 200
    resp = await bob.api.post(f"/api/groups/{gid}/chat_messages",
                              json={"chat_message": {"body": "after"}})
    assert resp.status == 403
    listed = await bob.api.get(f"/api/groups/{gid}/chat_messages")
    assert [m["body"] for m in listed.json["chat_messages"]] == ["before"]


async def test_another_communitys_group_chat_is_404(world: World) -> None:
    acme = await world.community("Acme")
    ann = await world.user(acme, "Ann")
    gid = await chat_group(ann)
    await post(ann, gid, "ours")
    other = await world.community("Other")
    stranger = await world.user(other, "Stranger")
    for member in (stranger, other):
        for method in ("GET", "POST", "PATCH"):
            resp = await member.api.request(method, f"/api/groups/{gid}/chat_messages",
                                            json={"chat_message": {"body": "x"}})
            assert resp.status == 404, (method, resp.status)
    listed = await ann.api.get(f"/api/groups/{gid}/chat_messages")
    assert [m["body"] for m in listed.json["chat_messages"]] == ["ours"]


async def test_unread_chats_in_the_group_json(world: World) -> None:
    admin = await world.community()
    ann, bob, cy = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy")]
    gid = await chat_group(ann, bob, cy)

    async def state(member: Member) -> tuple[int, int]:
        group = (await member.api.get(f"/api/groups/{gid}")).json["group"]
        return group["unread_chats_count"], group["chats_last_viewed_at"]

    assert await state(bob) == (0, 0)
    await post(ann, gid, "one")
    await post(ann, gid, "two")
    await post(bob, gid, "three")
    ann_unread, ann_viewed = await state(ann)
    bob_unread, bob_viewed = await state(bob)
    cy_unread, cy_viewed = await state(cy)
    assert (ann_unread, bob_unread, cy_unread) == (1, 0, 3)
    # posting counts as viewing for the author; Cy never viewed
    assert ann_viewed > 0 and bob_viewed > 0 and cy_viewed == 0
    read = await cy.api.patch(f"/api/groups/{gid}/chat_messages")
    assert read.status == 204
    cy_unread, cy_viewed = await state(cy)
    assert cy_unread == 0 and cy_viewed >= bob_viewed
    assert (await state(ann))[0] == 1
    await post(bob, gid, "four")
    assert (await state(cy))[0] == 1 and (await state(ann))[0] == 2


async def test_chat_list_queries_do_not_grow(world: World, query_log: Any) -> None:
    admin = await world.community()
    members = [await world.user(admin, f"U{i}") for i in range(4)]
    gid = await chat_group(members[0], *members[1:])
    for i in range(12):
        await post(members[i % 4], gid, f"m{i}")
    counts = []
    for per_page in ("1", "500"):
        query_log.reset()
        resp = await members[0].api.get(f"/api/groups/{gid}/chat_messages",
                                        params={"per_page": per_page})
        assert len(resp.json["chat_messages"]) == (1 if per_page == "1" else 12)
        counts.append(len(query_log))
    assert counts[0] == counts[1], counts


async def test_chat_message_event(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    gid = await chat_group(ann, bob)
    before = len(await events_of(world, admin.community.id))
    msg = await post(bob, gid, "live")
    events = (await events_of(world, admin.community.id))[before:]
    assert events == [(f"group:{gid}", "chat_message.created", msg)]
    # reading and refused posts append nothing
    await ann.api.patch(f"/api/groups/{gid}/chat_messages")
    await ann.api.get(f"/api/groups/{gid}/chat_messages")
    await ann.api.post(f"/api/groups/{gid}/chat_messages", json={})
    assert len(await events_of(world, admin.community.id)) == before + 1


async def test_chat_message_with_attachments(world: World) -> None:
    admin = await world.community()
    ann, bob, eve = [await world.user(admin, n) for n in ("Ann", "Bob", "Eve")]
    gid = await chat_group(ann, bob)
    form = aiohttp.FormData()
    form.add_field("attachment", b"minutes", filename="minutes.txt", content_type="text/plain")
    upload = await bob.api.post("/api/attachments", data=form)
    assert upload.status == 201, upload.text
    att_id = upload.json["attachment"]["id"]
    resp = await bob.api.post(f"/api/groups/{gid}/chat_messages",
                              json={"chat_message": {"attachment_ids": [att_id]}})
    assert resp.status == 201, resp.text
    msg = resp.json["chat_message"]
    assert msg["body"] == "" and [a["id"] for a in msg["attachments"]] == [att_id]
    assert msg["attachments"][0]["filename"] == f"{att_id}-minutes.txt"
    listed = await ann.api.get(f"/api/groups/{gid}/chat_messages")
    assert listed.json["chat_messages"] == [msg]
    # group members read the file, others don't
    assert (await ann.api.get(f"/api/attachments/{att_id}",
                              allow_redirects=False)).status == 302
    assert (await eve.api.get(f"/api/attachments/{att_id}",
                              allow_redirects=False)).status == 404
    # an attachment can't be claimed twice
    again = await ann.api.post(f"/api/groups/{gid}/chat_messages",
                               json={"chat_message": {"body": "x", "attachment_ids": [att_id]}})
    assert again.status == 422
    assert len((await ann.api.get(f"/api/groups/{gid}/chat_messages")).json["chat_messages"]) == 1
