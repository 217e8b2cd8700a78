"""The number of SQL statements PostgreSQL runs for the write requests clients make most and
for Home's first page (issue 13): a fixed bound each, so that none can grow back unnoticed.
BEGIN and COMMIT count."""

from __future__ import annotations

from typing import Any

import pytest

from app.actions import users as user_actions
from app.render import page_messages
from tests.app.views.conversations_support import start
from tests.app.views.feed_support import comment, make_group, post
from tests.conftest import QueryLog
from tests.support import World

# Each bound is today's count, the authentication's read of the viewer included.
# POST /api/messages, a plain message (issue 13 asks for at most 8; 14 before): the viewer,
# BEGIN, the blocked words, the message, the content version's bump (docs/polling.md: it
# rides on the staged events' insert, alone when a write has no event), COMMIT.
PLAIN_MESSAGE_STATEMENTS = 6
# What bench/rest.py posts (a #tag and an @mention; 24 in the issue, 12 then 8 before): the
# viewer, BEGIN, the blocked words with the mentioned names, the message with its topics, the
# notification with its sender, the event with the notification's push jobs (the unit of work's
# last statement writes both), COMMIT; rendering reads nothing.
BENCH_MESSAGE_STATEMENTS = 7
# ... into a group, with a mention, a tag and a link (29, then 16 and 12 before): + the group,
# the resource, and rendering's group and resource.
FULL_MESSAGE_STATEMENTS = 11
# POST remark (12, then 7 and 6 before): the viewer, BEGIN, the conversation's lock with the
# membership under it and the remark with its conversation's bookkeeping (one statement), the
# event with its push jobs, COMMIT.
REMARK_STATEMENTS = 5
# POST comment (21, then 10 before): the viewer, BEGIN, the message, the blocked words with the
# mentioned names, the comment with its message's bump, recipients and topics, the thread's
# participants, the notifications with their sender, the event with their push jobs, COMMIT;
# rendering reads nothing (but a link's resource).
COMMENT_STATEMENTS = 9
LIKE_STATEMENTS = 8


async def stamps_of(world: World, column: str, value: int) -> list[Any]:
    """(m, r): the message's last_interacted_at beside each recipient and topic row's where
    `column` (of the message `m` or the row `x`) is `value`."""
    return await world.pool.fetch(
        "SELECT m.last_interacted_at AS m, x.last_interacted_at AS r FROM messages m "
        f"JOIN message_recipients x ON x.message_id = m.id WHERE {column} = $1 "
        "UNION ALL SELECT m.last_interacted_at, x.last_interacted_at FROM messages m "
        f"JOIN message_topics x ON x.message_id = m.id WHERE {column} = $1", value)


def show(query_log: QueryLog) -> str:
    return "\n".join(f"{i}: {' '.join(q.split())[:200]}" for i, q in enumerate(query_log, 1))


async def test_post_message_statements(world: World, query_log: QueryLog) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    group_id = await make_group(world, admin, "Team", members=[bob])
    await post(bob, "warm the credentials cache")
    query_log.reset()
    resp = await bob.api.post("/api/messages", json={"message": {"body": "plain"}})
    assert resp.status == 201, resp.text
    assert resp.json["message"]["body"] == "plain"
    assert len(query_log) <= PLAIN_MESSAGE_STATEMENTS, show(query_log)
    query_log.reset()
    resp = await bob.api.post("/api/messages", json={"message": {
        "body": f"Shipping the #release today, thanks @{admin.username}!"}})
    assert resp.status == 201, resp.text
    assert len(query_log) <= BENCH_MESSAGE_STATEMENTS, show(query_log)
    created = resp.json["message"]
    assert [t["name"] for t in created["tags"]] == ["release"]
    assert [r["id"] for r in created["recipients"]] == [admin.id]
    # rendered from what the posting read, as a later read renders it
    read = (await bob.api.get(f"/api/messages/{created['id']}")).json["message"]
    assert created["recipients"] == read["recipients"] and created["tags"] == read["tags"]
    query_log.reset()
    resp = await bob.api.post("/api/messages", json={"message": {
        "body": f"hi @{admin.username} #tag https://example.com/x", "group_id": group_id}})
    assert resp.status == 201, resp.text
    message = resp.json["message"]
    assert message["group"]["id"] == group_id and message["tags"][0]["name"] == "tag"
    assert [r["id"] for r in message["recipients"]] == [group_id, admin.id]
    assert len(query_log) <= FULL_MESSAGE_STATEMENTS, show(query_log)
    # the mentioned user is rendered from the row the mention's resolution read, as a read of
    # the message renders it
    shown = (await bob.api.get(f"/api/messages/{message['id']}")).json["message"]
    assert message["recipients"] == shown["recipients"]
    assert message["user"] == shown["user"]
    # the recipient and topic rows written by the same statement carry the message's
    # last_interacted_at (what @Mentions, Home and the tag filter walk, docs/feed.md)
    stamps = await stamps_of(world, "m.id", message["id"])
    assert len(stamps) == 3 and all(row["r"] == row["m"] for row in stamps)


async def test_post_remark_comment_like_statements(world: World, query_log: QueryLog) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    conversation = await start(admin, bob)
    message = await post(bob, "a message")
    await comment(admin, message["id"], "warm")
    query_log.reset()
    resp = await bob.api.post(f"/api/conversations/{conversation['id']}/remarks",
                              json={"remark": {"text": "hello"}})
    assert resp.status == 201, resp.text
    assert len(query_log) <= REMARK_STATEMENTS, show(query_log)
    query_log.reset()
    resp = await admin.api.post(f"/api/messages/{message['id']}/comments",
                                json={"comment": {"text": "nice"}})
    assert resp.status == 201, resp.text
    assert len(query_log) <= COMMENT_STATEMENTS, show(query_log)
    # rendered from what the posting wrote and read, as a later read renders it
    resp = await admin.api.post(f"/api/messages/{message['id']}/comments", json={"comment": {
        "text": f"thanks @{bob.username} #shipped https://example.com/notes"}})
    assert resp.status == 201, resp.text
    created = resp.json["comment"]
    assert [t["name"] for t in created["tags"]] == ["shipped"]
    assert [r["id"] for r in created["recipients"]] == [bob.id]
    read = await admin.api.get(f"/api/messages/{message['id']}/comments/{created['id']}")
    assert read.status == 200, read.text
    assert created == read.json["comment"]
    query_log.reset()
    resp = await admin.api.post(f"/api/messages/{message['id']}/likes")
    assert resp.status == 201, resp.text
    assert len(query_log) <= LIKE_STATEMENTS, show(query_log)
    # its recipient and topic rows carry the thread's bumped last_interacted_at (docs/feed.md)
    stamps = await stamps_of(world, "x.comment_id", created["id"])
    assert len(stamps) == 2 and all(row["r"] == row["m"] for row in stamps)


# GET /api/messages, Home's first page with comments, likes, tags, mentions, links and a group
# (17, then 12 before): the viewer, the marking of Home read that also answers the viewer's
# group count (one statement in autocommit, app.actions.work.write_one, on the page's
# connection), the page with its messages' extras (recipients, tags, poll, attachments?) and
# groups, then its comments (with their recipients, tags and whether they have attachments),
# likes, users and links. No attachment, no poll, no group but the messages' own: no query for
# them.
HOME_PAGE_STATEMENTS = 7
# ... when its messages are kept (app.render.page_messages): the viewer, Home marked read, the
# page; no comment, like, user or link is read.
KEPT_HOME_PAGE_STATEMENTS = 3
# A stream's or a group's first page (12 before): the viewer, the stream (or group) found and
# marked read by one statement, then the page and its reads as Home's.
STREAM_PAGE_STATEMENTS = 7


async def test_get_messages_statements(
    world: World, query_log: QueryLog, monkeypatch: pytest.MonkeyPatch,
) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    group_id = await make_group(world, admin, "Team", members=[bob])
    for i in range(3):
        message = await post(bob, f"#tag{i} hi @{admin.username} https://example.com/{i}",
                             group_id=group_id if i % 2 else None)
        await comment(admin, message["id"], f"#c{i} thanks @{bob.username}")
        resp = await admin.api.post(f"/api/messages/{message['id']}/likes")
        assert resp.status == 201, resp.text
    await admin.api.get("/api/messages")
    monkeypatch.setattr(page_messages, "_KEPT", page_messages.Store())
    query_log.reset()
    resp = await admin.api.get("/api/messages")
    assert resp.status == 200, resp.text
    assert len(resp.json["messages"]) == 3
    assert len(query_log) <= HOME_PAGE_STATEMENTS, show(query_log)
    query_log.reset()
    kept = await admin.api.get("/api/messages")
    assert kept.json == resp.json
    assert len(query_log) == KEPT_HOME_PAGE_STATEMENTS, show(query_log)
    streams = (await admin.api.get("/api/streams")).json["streams"]
    team = next(s["id"] for s in streams if s["name"] == "Team")
    for path in (f"/api/streams/{team}/messages", f"/api/groups/{group_id}/messages",
                 f"/api/messages?stream_id={team}"):
        await admin.api.get(path)
        query_log.reset()
        resp = await admin.api.get(path)
        assert resp.status == 200, resp.text
        assert len(resp.json["messages"]) == 1
        assert len(query_log) <= STREAM_PAGE_STATEMENTS, f"{path}\n{show(query_log)}"


# GET /api/users (issue 13): the viewer, the page's keys (storage.users.KEYS), and the rows of
# the users whose forms are not kept; when all are kept (app.actions.users.listed_users), the
# keys only.
USERS_PAGE_STATEMENTS = 3
KEPT_USERS_PAGE_STATEMENTS = 2


async def test_get_users_statements(
    world: World, query_log: QueryLog, monkeypatch: pytest.MonkeyPatch,
) -> None:
    admin = await world.community()
    for name in ("Bob", "Carol"):
        await world.user(admin, name)
    await admin.api.get("/api/userinfo")  # the credentials cache warm
    monkeypatch.setattr(user_actions, "_LISTED_FORMS", {})
    query_log.reset()
    resp = await admin.api.get("/api/users")
    assert resp.status == 200, resp.text
    assert len(resp.json["users"]) == 3
    assert len(query_log) == USERS_PAGE_STATEMENTS, show(query_log)
    query_log.reset()
    kept = await admin.api.get("/api/users")
    assert kept.json == resp.json
    assert len(query_log) == KEPT_USERS_PAGE_STATEMENTS, show(query_log)
