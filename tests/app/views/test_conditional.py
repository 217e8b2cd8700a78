"""Conditional GET on the lists clients poll (issue 13, docs/polling.md): a strong ETag on every
200, a 304 with no body for a matching If-None-Match while nothing the viewer would see has
changed, a 200 with the new content as soon as anything has, and never another viewer's
validator."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.app.views.conversations_support import say, start
from tests.app.views.feed_support import comment, message_ids, post, stream_id
from tests.app.views.test_chat_messages import chat_group
from tests.app.views.test_chat_messages import post as chat
from tests.app.views.test_external_systems import make_system
from tests.conftest import QueryLog
from tests.support import PASSWORD, Member, Response, World


async def tagged(member: Member, path: str, **kwargs: Any) -> Response:
    """A 200 with an ETag."""
    resp = await member.api.get(path, **kwargs)
    assert resp.status == 200, resp.text
    tag = resp.headers["ETag"]
    assert tag.startswith('"') and tag.endswith('"') and len(tag) > 8  # strong
    assert resp.headers["Cache-Control"] == "private, no-cache"
    return resp


async def not_modified(
    member: Member, path: str, tag: str, header: str | None = None, **kwargs: Any
) -> None:
    """A 304 carrying the ETag and no body (If-None-Match: `header`, else `tag`)."""
    resp = await member.api.get(path, headers={"If-None-Match": header or tag}, **kwargs)
    assert resp.status == 304, resp.text
    assert resp.raw == b""
    assert resp.headers["ETag"] == tag


async def modified(member: Member, path: str, tag: str, **kwargs: Any) -> Response:
    """A 200 with the current content and a new ETag, although `tag` was sent."""
    resp = await member.api.get(path, headers={"If-None-Match": tag}, **kwargs)
    assert resp.status == 200, resp.text
    assert resp.headers["ETag"] != tag
    return resp


class Scene:
    """One community with two members, a group with chat, a conversation, a notification and
    an external system's message: something on every polled list."""

    admin: Member
    ann: Member
    bob: Member
    group_id: int
    message: dict[str, Any]
    conversation: dict[str, Any]
    system_id: int
    badge_id: int
    topic_id: int


async def scene(world: World) -> Scene:
    s = Scene()
    s.admin = await world.community()
    s.ann = await world.user(s.admin, "Ann")
    s.bob = await world.user(s.admin, "Bob")
    s.group_id = await chat_group(s.ann, s.bob)
    await chat(s.bob, s.group_id, "hello chat")
    s.message = await post(s.bob, f"Hi @{s.ann.username} #polling", group_id=s.group_id)
    s.conversation = await start(s.bob, s.ann, text="Hello Ann")
    system = await make_system(s.admin)
    s.system_id = system["id"]
    s.badge_id = await world.pool.fetchval(
        "SELECT id FROM badges WHERE community_id = $1 ORDER BY position LIMIT 1",
        s.admin.community.id)
    s.topic_id = await world.pool.fetchval(
        "SELECT id FROM topics WHERE community_id = $1", s.admin.community.id)
    return s


def lists(s: Scene, home: int) -> list[str]:
    return [
        "/api/messages",
        "/api/messages.json?per_page=5",
        f"/api/streams/{home}/messages",
        f"/api/groups/{s.group_id}/messages",
        f"/api/users/{s.bob.id}/messages",
        f"/api/external_systems/{s.system_id}/messages",
        "/api/messages/search?q=Hi",
        "/api/notifications",
        "/api/notifications/at_mentions",
        "/api/conversations",
        f"/api/groups/{s.group_id}/chat_messages",
        "/api/userinfo",
        f"/api/badges/{s.badge_id}/messages",
        f"/api/users/{s.bob.id}/badges/{s.badge_id}/messages",
        f"/api/topics/{s.topic_id}",
    ]


async def test_every_polled_list_answers_304_while_unchanged(world: World) -> None:
    s = await scene(world)
    home = await stream_id(s.ann, "Home")
    for path in lists(s, home):
        first = await tagged(s.ann, path)
        await not_modified(s.ann, path, first.headers["ETag"])
        # a list of validators, weak or strong, naming it: still a match
        tag = first.headers["ETag"]
        await not_modified(s.ann, path, tag, f'"nope", W/{tag}')
        again = await tagged(s.ann, path)
        assert again.headers["ETag"] == first.headers["ETag"] and again.raw == first.raw
        # not a match: the full answer
        assert (await s.ann.api.get(path, headers={"If-None-Match": '"nope"'})).status == 200
        assert (await s.ann.api.get(path, headers={"If-None-Match": "*"})).status == 200


async def test_a_304_runs_no_page_query(world: World, query_log: QueryLog) -> None:
    s = await scene(world)
    tag = (await tagged(s.ann, "/api/messages")).headers["ETag"]
    query_log.reset()
    await not_modified(s.ann, "/api/messages", tag)
    # the login's user row, which carries the versions: nothing else
    assert len(query_log) == 1, query_log
    assert "content_versions" in query_log[0] and "users u" in query_log[0]
    query_log.reset()
    await tagged(s.ann, "/api/messages")
    # the 200 runs the page, after reading the versions (so its ETag can only be older than
    # what it shows, never newer): the login, Home marked read, the page (whose messages are
    # all kept: no comment, like or user read)
    assert len(query_log) == 3, query_log
    versions = [i for i, q in enumerate(query_log) if "content_versions" in q]
    pages = [i for i, q in enumerate(query_log)
             if "FROM messages" in q and "content_versions" not in q]
    assert len(versions) == 1 and pages and versions[0] < min(pages)


async def test_no_viewer_ever_gets_another_viewers_validator(world: World) -> None:
    s = await scene(world)
    home_ann = await stream_id(s.ann, "Home")
    for path in lists(s, home_ann):
        if path.startswith("/api/streams/"):
            continue  # a stream id is its owner's: another viewer's is a 404
        ann = await tagged(s.ann, path)
        bob = await modified(s.bob, path, ann.headers["ETag"])
        assert bob.headers["ETag"] != ann.headers["ETag"]
    other = await world.community()
    member = await world.user(other, "Olga")
    tag = (await tagged(s.ann, "/api/userinfo")).headers["ETag"]
    assert (await modified(member, "/api/userinfo", tag)).json["user"]["id"] == member.id


async def test_the_etag_differs_by_format_and_query(world: World) -> None:
    s = await scene(world)
    json_tag = (await tagged(s.ann, "/api/messages.json")).headers["ETag"]
    plain_json = (await tagged(s.ann, "/api/messages")).headers["ETag"]
    xml = await modified(s.ann, "/api/messages.xml", json_tag)
    assert xml.headers["Content-Type"].startswith("application/xml")
    await not_modified(s.ann, "/api/messages.xml", xml.headers["ETag"])
    accept = await s.ann.api.get("/api/messages",
                                 headers={"If-None-Match": json_tag, "Accept": "application/xml"})
    assert accept.status == 200 and accept.headers["ETag"] not in (json_tag, plain_json)
    assert accept.headers["Content-Type"].startswith("application/xml")
    plain = (await tagged(s.ann, "/api/messages")).headers["ETag"]
    paged = await modified(s.ann, "/api/messages?per_page=1", plain)
    assert len(paged.json["messages"]) == 1


async def test_messages_change_with_every_kind_of_change(world: World) -> None:
    s = await scene(world)
    path = "/api/messages"
    group_path = f"/api/groups/{s.group_id}/messages"

    async def changed() -> dict[str, Any]:
        """The first message of ann's Home after a change: a 200 for the old ETag."""
        resp = await modified(s.ann, path, tag)
        return resp.json  # type: ignore[no-any-return]

    async def current() -> str:
        resp = await tagged(s.ann, path)
        await not_modified(s.ann, path, resp.headers["ETag"])
        return resp.headers["ETag"]  # type: ignore[no-any-return]

    tag = await current()
    group_tag = (await tagged(s.ann, group_path)).headers["ETag"]
    new = await post(s.bob, "A new one", group_id=s.group_id)
    assert message_ids(Response(200, await changed(), {}, ""))[0] == new["id"]
    assert (await modified(s.ann, group_path, group_tag)).json["messages"][0]["id"] == new["id"]

    tag = await current()
    edited = await s.bob.api.put(f"/api/messages/{new['id']}",
                                 json={"message": {"body": "An edited one"}})
    assert edited.status == 200, edited.text
    assert (await changed())["messages"][0]["body"] == "An edited one"

    tag = await current()
    made = await comment(s.bob, new["id"], "A comment")
    assert [c["id"] for c in (await changed())["messages"][0]["comments"]] == [made["id"]]

    tag = await current()
    liked = await s.admin.api.post(f"/api/messages/{new['id']}/likes")
    assert liked.status == 201, liked.text
    assert (await changed())["messages"][0]["likes_count"] == 1

    tag = await current()
    mine = await s.ann.api.post(f"/api/messages/{new['id']}/likes")  # a like by the viewer
    assert mine.status == 201, mine.text
    first = (await changed())["messages"][0]
    assert first["likes_count"] == 2
    assert [lk["unlikable"] for lk in first["likes"] if lk["user"]["id"] == s.ann.id] == [True]

    tag = await current()
    flagged = await s.ann.api.post(f"/api/messages/{new['id']}/flags")  # a bookmark
    assert flagged.status in (200, 201), flagged.text
    assert (await changed())["messages"][0]["flag"] is not None

    tag = await current()
    deleted = await s.bob.api.delete(f"/api/messages/{new['id']}")
    assert deleted.status in (200, 204), deleted.text
    assert new["id"] not in message_ids(Response(200, await changed(), {}, ""))


async def test_membership_changes_what_a_group_stream_shows(world: World) -> None:
    s = await scene(world)
    carol = await world.user(s.admin, "Carol")
    group = await world.group(s.ann, "Secret", permission_mode="private")
    said = await post(s.ann, "members only", group_id=group["id"])
    company = await stream_id(carol, "Company")
    path = f"/api/streams/{company}/messages"
    tag = (await tagged(carol, path)).headers["ETag"]
    assert said["id"] not in message_ids(await carol.api.get(path))
    added = await s.ann.api.post(f"/api/groups/{group['id']}/memberships",
                                 json={"group_membership": {"user_id": carol.id}})
    assert added.status in (200, 201), added.text
    resp = await modified(carol, f"/api/groups/{group['id']}/messages", tag)
    assert message_ids(resp) == [said["id"]]
    await modified(carol, path, tag)


async def test_a_viewers_own_change_leaves_other_viewers_304(world: World) -> None:
    """Bookmarks and read state are the viewer's: they change the viewer's ETags only."""
    s = await scene(world)
    bob_tag = (await tagged(s.bob, "/api/messages")).headers["ETag"]
    bob_notes = (await tagged(s.bob, "/api/notifications")).headers["ETag"]
    ann_tag = (await tagged(s.ann, "/api/messages")).headers["ETag"]
    flagged = await s.ann.api.post(f"/api/messages/{s.message['id']}/flags")
    assert flagged.status in (200, 201), flagged.text
    await modified(s.ann, "/api/messages", ann_tag)
    await not_modified(s.bob, "/api/messages", bob_tag)
    notes = await tagged(s.ann, "/api/notifications")
    unread = [n for n in notes.json["notifications"] if not n["read"]]
    assert unread
    read = await s.ann.api.post(f"/api/notifications/{unread[0]['id']}/read")
    assert read.status in (200, 204), read.text
    after = await modified(s.ann, "/api/notifications", notes.headers["ETag"])
    assert after.json["unread_notifications_count"] == notes.json["unread_notifications_count"] - 1
    await not_modified(s.bob, "/api/notifications", bob_notes)


async def test_notifications_change_when_made_and_when_all_read(world: World) -> None:
    s = await scene(world)
    path = "/api/notifications"
    before = await tagged(s.ann, path)
    await comment(s.bob, s.message["id"], f"ping @{s.ann.username}")
    made = await modified(s.ann, path, before.headers["ETag"])
    assert made.json["notifications_count"] > before.json["notifications_count"]
    all_read = await s.ann.api.put("/api/notifications/mark_all_read")
    assert all_read.status == 204, all_read.text
    after = await modified(s.ann, path, made.headers["ETag"])
    assert after.json["unread_notifications_count"] == 0


async def test_chat_messages_change_with_a_chat_message(world: World) -> None:
    s = await scene(world)
    path = f"/api/groups/{s.group_id}/chat_messages"
    tag = (await tagged(s.ann, path)).headers["ETag"]
    sent = await chat(s.bob, s.group_id, "news")
    resp = await modified(s.ann, path, tag)
    assert resp.json["chat_messages"][0]["id"] == sent["id"]
    await not_modified(s.ann, path, resp.headers["ETag"])


async def test_conversations_change_with_a_remark_and_an_acknowledgement(world: World) -> None:
    s = await scene(world)
    path = "/api/conversations"
    tag = (await tagged(s.ann, path)).headers["ETag"]
    bob_tag = (await tagged(s.bob, path)).headers["ETag"]
    await say(s.bob, s.conversation["id"], "Are you there?")
    resp = await modified(s.ann, path, tag)
    (listed,) = resp.json["conversations"]
    assert listed["unread"] is True
    bob_tag = (await modified(s.bob, path, bob_tag)).headers["ETag"]
    acked = await s.ann.api.post(f"/api/conversations/{s.conversation['id']}/acknowledge")
    assert acked.status in (200, 204), acked.text
    resp = await modified(s.ann, path, resp.headers["ETag"])
    assert resp.json["conversations"][0]["unread"] is False
    await not_modified(s.bob, path, bob_tag)  # ann's read state is hers


async def test_userinfo_changes_with_the_user(world: World) -> None:
    s = await scene(world)
    tag = (await tagged(s.ann, "/api/userinfo")).headers["ETag"]
    renamed = await s.ann.api.put(f"/api/users/{s.ann.id}", json={"user": {"first_name": "Anna"}})
    assert renamed.status == 200, renamed.text
    resp = await modified(s.ann, "/api/userinfo", tag)
    assert resp.json["user"]["first_name"] == "Anna"
    # another member following ann changes her followers count
    tag = resp.headers["ETag"]
    followed = await s.bob.api.post(f"/api/users/{s.ann.id}/followers")
    assert followed.status in (200, 201, 204), followed.text
    await modified(s.ann, "/api/userinfo", tag)


async def test_an_announcement_that_stops_being_sticky_changes_the_etag(world: World) -> None:
    """Stickiness ends with time, with no write: the ETag still follows it."""
    s = await scene(world)
    made = await post(s.admin, "Office closed", message_type="broadcast_message",
                      days_of_stickiness=3)
    newer = await post(s.bob, "newer chatter", group_id=s.group_id)
    home = await tagged(s.ann, "/api/messages")
    assert message_ids(home)[:2] == [made["id"], newer["id"]]
    await not_modified(s.ann, "/api/messages", home.headers["ETag"])
    # time passes (no unit of work): the announcement's sticky period is over
    await world.pool.execute(
        "UPDATE messages SET sticky_until = now() - interval '1 second' WHERE id = $1", made["id"])
    resp = await modified(s.ann, "/api/messages", home.headers["ETag"])
    assert message_ids(resp)[:2] == [newer["id"], made["id"]]


@pytest.mark.parametrize("header", ['"a"', 'W/"a"', '"b", "a"', ' W/"b" ,W/"a" '])
def test_if_none_match_names_a_tag_in_any_form(header: str) -> None:
    from app.views.conditional import matches

    assert matches(header, '"a"')
    assert not matches(header, '"c"')
    assert not matches("", '"a"') and not matches(None, '"a"') and not matches("*", '"a"')


async def test_a_session_cookie_polls_with_304s_too(world: World, query_log: QueryLog) -> None:
    s = await scene(world)
    anon = replace(s.ann, api=s.ann.api.anonymous())
    signed_in = await anon.api.post("/api/authentication",
                                    json={"email": s.ann.email, "password": PASSWORD})
    assert signed_in.status == 200, signed_in.text
    resp = await tagged(anon, "/api/notifications")  # the cookie, no Basic header
    # the same viewer: the same ETag as with Basic
    assert resp.headers["ETag"] == (await tagged(s.ann, "/api/notifications")).headers["ETag"]
    query_log.reset()
    await not_modified(anon, "/api/notifications", resp.headers["ETag"])
    assert len(query_log) == 1, query_log  # the session's user row, with the versions
    await comment(s.bob, s.message["id"], f"ping @{s.ann.username}")
    await modified(anon, "/api/notifications", resp.headers["ETag"])


async def test_reading_changes_no_version(world: World) -> None:
    """A GET that bumped a version would turn every poll into a 200: every GET route without
    an id, and the polled lists, leave the versions as they were."""
    from app.routes import ROUTES
    from storage import versions

    s = await scene(world)
    home = await stream_id(s.ann, "Home")
    cid = s.ann.community.id
    before = await versions.read(world.pool, cid, s.ann.id, True)
    paths = [r.path for r in ROUTES if r.method == "GET" and ":" not in r.path]
    assert "/api/streams" in paths and len(paths) > 20
    conversation = s.conversation["id"]
    paths += [f"/api/messages/{s.message['id']}", f"/api/groups/{s.group_id}",
              f"/api/users/{s.bob.id}", f"/api/conversations/{conversation}",
              f"/api/conversations/{conversation}/activities", f"/api/streams/{home}/messages",
              f"/api/messages?stream_id={home}", f"/api/groups/{s.group_id}/messages"]
    for path in [*paths, *lists(s, home)]:
        resp = await s.ann.api.get(path)
        assert resp.status < 500, (path, resp.text)
        assert await versions.read(world.pool, cid, s.ann.id, True) == before, path


async def test_a_polling_client_never_keeps_a_stale_page(world: World) -> None:
    """A client polling (keeping the last 200's body and ETag, reusing the body on a 304) while
    another member posts: once a post has committed, the client's next poll shows it."""
    import asyncio

    s = await scene(world)
    path = f"/api/groups/{s.group_id}/messages"
    cached = await tagged(s.ann, path)
    state = {"tag": cached.headers["ETag"], "body": cached.json}

    async def poll() -> list[int]:
        resp = await s.ann.api.get(path, headers={"If-None-Match": state["tag"]})
        assert resp.status in (200, 304), resp.text
        if resp.status == 200:
            state["tag"], state["body"] = resp.headers["ETag"], resp.json
        return [m["id"] for m in state["body"]["messages"]]

    done = asyncio.Event()

    async def keep_polling() -> None:
        while not done.is_set():
            await poll()

    poller = asyncio.create_task(keep_polling())
    try:
        for n in range(15):
            made = await post(s.bob, f"news {n}", group_id=s.group_id)
            # committed (the POST answered): the very next poll shows it
            assert (await poll())[0] == made["id"]
    finally:
        done.set()
        await poller


async def test_the_openapi_document_lists_if_none_match_and_304(world: World) -> None:
    admin = await world.community()
    doc = (await admin.api.get("/api/openapi.json")).json
    listed = doc["paths"]["/api/notifications"]["get"]
    assert "304" in listed["responses"]
    assert {"name": "If-None-Match", "in": "header", "required": False,
            "schema": {"type": "string"}} in listed["parameters"]
    assert "304" not in doc["paths"]["/api/groups"]["get"]["responses"]
