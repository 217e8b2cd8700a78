"""GET /api/realtime through the real app: authentication, channels that follow membership,
events equal to what REST answered, resume, reset, slow readers and shutdown."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient

from app.config import Settings
from app.main import create_app
from app.passwords import Passwords
from app.resources import HUB, POOL
from app.views import realtime as realtime_views
from realtime.channels import channel_names, conversation_channel, group_channel
from realtime.events import NewEvent
from realtime.websocket import SLOW_READER_CLOSE_CODE
from storage.batch import Lookups
from storage.events import append_events, last_event_id
from tests.app.views.conversations_support import say, start
from tests.app.views.realtime_support import (
    basic_headers,
    names,
    next_event,
    next_events,
    next_frame,
    open_socket,
    read_until_closed,
)
from tests.conftest import QueryLog
from tests.support import Member, World

_names = itertools.count(1)
UPGRADE = {
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version": "13",
}


async def chat_group(owner: Member, *members: Member, permission: str = "public") -> int:
    resp = await owner.api.post("/api/groups", json={"group": {
        "name": f"Chat {next(_names)}", "chat": True,
        "permission_mode": permission}})
    assert resp.status == 201, resp.text
    group_id: int = resp.json["group"]["id"]
    for member in members:
        added = await owner.api.post(f"/api/groups/{group_id}/memberships",
                                     json={"group_membership": {"user_id": member.id}})
        assert added.status in (200, 201), added.text
    return group_id


async def chat(member: Member, group_id: int, body: str) -> dict[str, Any]:
    resp = await member.api.post(f"/api/groups/{group_id}/chat_messages",
                                 json={"chat_message": {"body": body}})
    assert resp.status == 201, resp.text
    message: dict[str, Any] = resp.json["chat_message"]
    return message


async def test_welcome_frame(world: World) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    await start(ann, bob)  # a few events exist already
    committed = await last_event_id(world.pool, ann.community.id)
    assert committed > 0
    ws, welcome = await open_socket(bob)
    assert welcome == {"type": "welcome", "user_id": bob.id, "last_event_id": str(committed)}
    await ws.send_json({"type": "ping"})
    assert await next_frame(ws) == {"type": "pong"}


async def test_the_view_is_the_route_handler_itself(world: World) -> None:
    """aiohttp takes the realtime view as it is (no wrapper of its own, no deprecation
    warning): the view returns the socket's one coroutine, so an idle socket keeps no frame
    of the view or of a wrapper (issue 13, RSS per idle websocket)."""
    [route] = [r for r in world.client.app.router.routes()
               if r.method == "GET" and r.resource is not None
               and r.resource.canonical.startswith("/api/realtime{")]
    assert route.handler is realtime_views.realtime
    assert asyncio.iscoroutinefunction(route.handler)


async def test_a_socket_holds_its_user_online_until_it_closes(world: World) -> None:
    """The socket holds its user in the process's presence registry (one refresher per
    process, no task per socket) from its welcome until it closes; a second socket of the same
    user keeps the hold when the first goes."""
    from app.resources import PRESENCE

    presence = world.client.app[PRESENCE]
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    key = (ann.community.id, bob.id)
    first, _ = await open_socket(bob)
    second, _ = await open_socket(bob)
    assert presence._held[key] == 2  # type: ignore[attr-defined]
    assert await presence.online(ann.community.id, [bob.id, ann.id]) == {bob.id}
    await first.close()
    for _ in range(100):
        if presence._held.get(key) == 1:  # type: ignore[attr-defined]
            break
        await asyncio.sleep(0.01)
    assert presence._held[key] == 1  # type: ignore[attr-defined]
    await second.close()
    for _ in range(100):
        if key not in presence._held:  # type: ignore[attr-defined]
            break
        await asyncio.sleep(0.01)
    assert key not in presence._held  # type: ignore[attr-defined]
    assert presence._refresher is None  # type: ignore[attr-defined]  # went with the last hold


async def test_remark_reaches_members_with_the_rest_activity(world: World) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    cat = await world.user(ann, "Cat")  # same community, not a member
    conversation = await start(ann, bob)
    marker_conversation = await start(ann, cat)
    other = await world.community("Globex")  # another community altogether
    olga = await world.user(other, "Olga")
    other_conversation = await start(other, olga)

    sockets = {m.id: (await open_socket(m))[0] for m in (ann, bob, cat, olga)}
    activity = await say(bob, conversation["id"], "Hello, *everyone*")
    for member in (ann, bob):
        frame = await next_event(sockets[member.id])
        assert frame["channel"] == conversation_channel(conversation["id"])
        assert frame["event"] == "remark.created"
        assert frame["data"] == activity  # the very JSON the REST API answered
    # the stored event has the same id for every member
    ann_again = await say(ann, conversation["id"], "again")
    ids = [await next_event(sockets[m.id]) for m in (ann, bob)]
    assert ids[0] == ids[1] and ids[0]["data"] == ann_again

    # Neither the non-member nor the other community saw any of that: the next event each
    # receives is one posted afterwards where they do belong.
    marker = await say(ann, marker_conversation["id"], "marker")
    assert (await next_event(sockets[cat.id]))["data"] == marker
    other_marker = await say(other, other_conversation["id"], "marker")
    frame = await next_event(sockets[olga.id])
    assert frame["data"] == other_marker
    assert int(frame["id"]) <= 10  # ids are counted per community


async def test_chat_messages_reach_group_members(world: World) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    cat = await world.user(ann, "Cat")
    group_id = await chat_group(ann, bob)
    marker_conversation = await start(ann, cat)
    sockets = {m.id: (await open_socket(m))[0] for m in (ann, bob, cat)}

    message = await chat(bob, group_id, "Hi cats")
    for member in (ann, bob):
        frame = await next_event(sockets[member.id])
        assert (frame["channel"], frame["event"]) == (group_channel(group_id),
                                                      "chat_message.created")
        assert frame["data"] == message
    marker = await say(ann, marker_conversation["id"], "marker")
    assert (await next_event(sockets[cat.id]))["data"] == marker


async def test_subscriptions_follow_conversation_membership(world: World) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    cat = await world.user(ann, "Cat")
    dan = await world.user(ann, "Dan")
    conversation = await start(ann, bob, cat)  # shared: three members
    cid = conversation["id"]
    channel = conversation_channel(cid)
    marker_conversation = await start(ann, dan)
    ws, _ = await open_socket(dan)  # before he belongs to it

    await say(bob, cid, "before dan")
    added = await ann.api.post(f"/api/conversations/{cid}/members",
                               json={"members_emails": dan.email})
    assert added.status in (200, 201), added.text
    frame = await next_event(ws)  # no reconnect: his socket subscribed live
    assert (frame["channel"], frame["event"]) == (channel, "conversation.member_added")
    assert [u["id"] for u in frame["data"]["users"]] == [dan.id]
    remark = await say(bob, cid, "welcome dan")
    assert (await next_event(ws))["data"] == remark

    left = await dan.api.delete(f"/api/conversations/{cid}/members/me")
    assert left.status in (200, 204), left.text
    frame = await next_event(ws)  # he still sees his own removal...
    assert (frame["channel"], frame["event"]) == (channel, "conversation.member_removed")
    await say(bob, cid, "after dan left")  # ...and nothing after it
    marker = await say(ann, marker_conversation["id"], "marker")
    assert (await next_event(ws))["data"] == marker


async def test_subscriptions_follow_group_membership(world: World) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    group_id = await chat_group(ann)  # public, chat on; bob is not in it
    marker_conversation = await start(ann, bob)
    ws, _ = await open_socket(bob)
    channel = group_channel(group_id)

    await chat(ann, group_id, "before bob")
    joined = await bob.api.post(f"/api/groups/{group_id}/join")
    assert joined.status in (200, 201), joined.text
    message = await chat(ann, group_id, "hi bob")
    frame = await next_event(ws)
    assert (frame["channel"], frame["data"]) == (channel, message)

    left = await bob.api.post(f"/api/groups/{group_id}/leave")
    assert left.status in (200, 201), left.text
    await chat(ann, group_id, "bob left")
    marker = await say(ann, marker_conversation["id"], "marker 1")
    assert (await next_event(ws))["data"] == marker

    # Added and removed by the group's admin: the same, and a notification of the addition.
    added = await ann.api.post(f"/api/groups/{group_id}/memberships",
                               json={"group_membership": {"user_id": bob.id}})
    assert added.status in (200, 201), added.text
    message = await chat(ann, group_id, "back again")
    frames = await next_events(ws, 2)
    assert names(frames) == [(f"user:{bob.id}", "notification.created"),
                             (channel, "chat_message.created")]
    assert frames[1]["data"] == message
    removed = await ann.api.delete(f"/api/groups/{group_id}/memberships",
                                   params={"user_id": str(bob.id)})
    assert removed.status in (200, 204), removed.text
    await chat(ann, group_id, "removed")
    marker = await say(ann, marker_conversation["id"], "marker 2")
    assert (await next_event(ws))["data"] == marker


async def test_chat_turned_on_later_reaches_existing_members(world: World) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    resp = await ann.api.post("/api/groups", json={"group": {"name": "Quiet", "chat": False}})
    group_id = resp.json["group"]["id"]
    joined = await bob.api.post(f"/api/groups/{group_id}/join")
    assert joined.status in (200, 201), joined.text
    ws, _ = await open_socket(bob)  # subscribed although the group has no chat yet
    updated = await ann.api.put(f"/api/groups/{group_id}", json={"group": {"chat": True}})
    assert updated.status == 200, updated.text
    message = await chat(ann, group_id, "chat is on")
    assert (await next_event(ws))["data"] == message


async def test_resume_with_since_replays_missed_events_in_order(world: World) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    conversation = await start(ann, bob)
    cid = conversation["id"]
    ws, _ = await open_socket(bob)
    first = await say(ann, cid, "one")
    seen = await next_event(ws)
    assert seen["data"] == first
    await ws.close()

    missed = [await say(ann, cid, f"missed {n}") for n in range(5)]
    resumed, welcome = await open_socket(bob, since=seen["id"])
    assert int(welcome["last_event_id"]) >= int(seen["id"])
    replayed = await next_events(resumed, 5)
    assert [f["data"] for f in replayed] == missed
    ids = [int(f["id"]) for f in replayed]
    assert ids == sorted(ids) and ids[0] > int(seen["id"])
    live = await say(ann, cid, "live")
    frame = await next_event(resumed)  # then live, with nothing replayed twice
    assert frame["data"] == live and int(frame["id"]) > ids[-1]

    # The same with the Last-Event-ID header (what EventSource-style clients send).
    again, _ = await open_socket(bob, headers={"Last-Event-ID": str(ids[2])})
    assert [f["data"] for f in await next_events(again, 3)] == [*missed[3:], live]


async def test_reset_when_the_events_were_pruned(world: World) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    conversation = await start(ann, bob)
    for n in range(3):
        await say(ann, conversation["id"], f"old {n}")
    await world.pool.execute("DELETE FROM realtime_events WHERE community_id = $1",
                             ann.community.id)
    ws, welcome = await open_socket(bob, since=1)
    assert welcome["last_event_id"] == str(await last_event_id(world.pool, ann.community.id))
    assert await next_frame(ws) == {"type": "reset"}
    live = await say(ann, conversation["id"], "new")
    assert (await next_event(ws))["data"] == live


async def test_reset_when_the_gap_is_too_long(world: World) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    conversation = await start(ann, bob)
    since = await last_event_id(world.pool, ann.community.id)
    # More missed events on his channel than a resume replays (1000): appended as 1001
    # remarks would append them, in one go.
    channel = conversation_channel(conversation["id"])
    async with world.pool.acquire() as conn, conn.transaction():
        await append_events(conn, ann.community.id,
                            [NewEvent(channel, "remark.created", {"n": n}) for n in range(1001)])
    ws, _ = await open_socket(bob, since=since)
    assert await next_frame(ws) == {"type": "reset"}
    # a since beyond anything committed is a reset too
    ahead, _ = await open_socket(bob, since=since + 5000)
    assert await next_frame(ahead) == {"type": "reset"}


async def test_slow_reader_is_disconnected_then_resumes(
    aiohttp_client: Any, settings: Settings
) -> None:
    app = create_app(dataclasses.replace(settings, realtime_queue_frames=4))
    client: TestClient = await aiohttp_client(app)
    world = World(app[POOL], Passwords(settings.argon2), client)
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    conversation = await start(ann, bob)
    ws = await client.ws_connect("/api/realtime", headers=basic_headers(bob),
                                 max_msg_size=0)
    assert (await next_frame(ws))["type"] == "welcome"
    # Bob's client stops reading.

    text = "x" * 19_000
    posted: list[dict[str, Any]] = []
    async with asyncio.timeout(60):
        while len(posted) < 400 and _live_socket_of(app[HUB], bob.id):
            posted.append(await say(ann, conversation["id"], f"{len(posted)} {text}"))
    assert not _live_socket_of(app[HUB], bob.id), "the server never gave up on the reader"
    # Reading again (the server flushes what it had written for up to 5 s).
    frames, closing = await read_until_closed(ws)
    assert closing.type is aiohttp.WSMsgType.CLOSE, closing
    assert closing.data == SLOW_READER_CLOSE_CODE
    assert len(frames) < len(posted)
    assert [f["data"] for f in frames] == posted[: len(frames)]  # a prefix, in order
    # He reconnects with since and gets exactly the rest.
    last = frames[-1]["id"] if frames else "0"
    resumed, _ = await open_socket(bob, since=last, client=client)
    rest = await next_events(resumed, len(posted) - len(frames))
    assert [f["data"] for f in rest] == posted[len(frames):]


def _live_socket_of(hub: Any, user_id: int) -> bool:
    """Whether the hub still has a socket of `user_id` that is not being closed."""
    return any(
        sub.user_id == user_id and not sub.closing
        for stream in hub._streams.values()
        for sub in stream.subscribers
    )


async def test_session_cookie_authenticates_the_websocket(world: World) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    conversation = await start(ann, bob)
    login = await bob.api.anonymous().post(
        "/api/authentication", json={"email": bob.email, "password": "correct horse battery"}
    )
    assert login.status == 200, login.text
    cookie = login.headers["Set-Cookie"].split(";", 1)[0]
    assert cookie.startswith("commons_session=")
    world.client.session.cookie_jar.clear()  # only the header below carries it
    ws = await world.client.ws_connect(
        "/api/realtime", headers={"Host": ann.community.domain, "Cookie": cookie}
    )
    welcome = await next_frame(ws)
    assert welcome["type"] == "welcome" and welcome["user_id"] == bob.id
    remark = await say(ann, conversation["id"], "hello browser")
    assert (await next_event(ws))["data"] == remark
    # The cookie is good for this community only.
    other = await world.community("Globex")
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await world.client.ws_connect(
            "/api/realtime", headers={"Host": other.community.domain, "Cookie": cookie}
        )
    assert refused.value.status == 401


async def test_refusals_before_the_upgrade(world: World) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    host = {"Host": ann.community.domain}
    with pytest.raises(aiohttp.WSServerHandshakeError) as anonymous:
        await world.client.ws_connect("/api/realtime", headers=host)
    assert anonymous.value.status == 401
    resp = await bob.api.anonymous().get("/api/realtime", headers=UPGRADE)
    assert resp.status == 401 and resp.json["code"] == "unauthorized"
    assert resp.headers["WWW-Authenticate"].startswith("Basic")
    wrong = await bob.api.as_user(bob.email, "wrong").get("/api/realtime", headers=UPGRADE)
    assert wrong.status == 401

    plain = await bob.api.get("/api/realtime")  # authenticated, but not a websocket
    assert plain.status == 400 and plain.json["code"] == "bad_request"
    for bad in ("abc", "-1", "1.5", str(2**63)):
        resp = await bob.api.get("/api/realtime", params={"since": bad}, headers=UPGRADE)
        assert resp.status == 400, (bad, resp.text)
        assert resp.json["code"] == "bad_request"
    header = await bob.api.get("/api/realtime", headers={**UPGRADE, "Last-Event-ID": "x"})
    assert header.status == 400
    with pytest.raises(aiohttp.WSServerHandshakeError) as bad_since:
        await world.client.ws_connect("/api/realtime?since=nope", headers=basic_headers(bob))
    assert bad_since.value.status == 400


async def test_rate_limit_applies_before_the_upgrade(
    aiohttp_client: Any, settings: Settings
) -> None:
    app = create_app(dataclasses.replace(settings, rate_limit_requests=2))
    client: TestClient = await aiohttp_client(app)
    world = World(app[POOL], Passwords(settings.argon2), client)
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    first, _ = await open_socket(bob, client=client)
    second, _ = await open_socket(bob, client=client)
    with pytest.raises(aiohttp.WSServerHandshakeError) as limited:
        await client.ws_connect("/api/realtime", headers=basic_headers(bob))
    assert limited.value.status == 429
    # the open sockets are not affected by the limit
    await first.send_json({"type": "ping"})
    assert await next_frame(first) == {"type": "pong"}
    assert not second.closed


async def test_shutdown_closes_open_sockets_at_once(
    aiohttp_client: Any, settings: Settings
) -> None:
    app = create_app(settings)
    client: TestClient = await aiohttp_client(app)
    world = World(app[POOL], Passwords(settings.argon2), client)
    ann = await world.community("Acme")
    sockets = [(await open_socket(ann, client=client))[0] for _ in range(3)]
    assert app[HUB].stats()["subscribers"] == 3
    began = time.monotonic()
    closing = asyncio.ensure_future(client.server.close())
    for ws in sockets:
        message = await ws.receive(timeout=5)
        assert message.type is aiohttp.WSMsgType.CLOSE
        assert message.data == 1001  # going away: reconnect elsewhere with since
    await asyncio.wait_for(closing, 10)
    assert time.monotonic() - began < 5


async def channels_when_attaching(world: World, community_id: int, user_id: int
                                  ) -> list[str] | None:
    """What the socket's channel loader reads (app/views/realtime.py): None when the user is
    not an active user of the community."""
    ids = await Lookups(world.pool).channel_ids_if_active(community_id, user_id)
    return None if ids is None else channel_names(ids)


async def test_channels_of_user_in_one_query(world: World, query_log: Any) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    cat = await world.user(ann, "Cat")
    stays = await start(ann, bob, cat)
    dan = await world.user(ann, "Dan")
    leaves = await start(ann, bob, dan, text=None, name="Leaves")
    await start(ann, cat)  # not bob's
    gone = await bob.api.delete(f"/api/conversations/{leaves['id']}/members/me")
    assert gone.status in (200, 204)
    with_chat = await chat_group(ann, bob)
    without = await ann.api.post("/api/groups", json={"group": {"name": "No chat"}})
    joined = await bob.api.post(f"/api/groups/{without.json['group']['id']}/join")
    assert joined.status in (200, 201)
    await chat_group(ann, cat)  # not bob's
    other = await world.community("Globex")
    await chat_group(other)

    query_log.reset()
    channels = await channels_when_attaching(world, ann.community.id, bob.id)
    assert channels is not None and len(query_log) == 1
    assert sorted(channels) == sorted([
        conversation_channel(stays["id"]),
        group_channel(with_chat),
        group_channel(without.json["group"]["id"]),
    ])
    # another community's id finds nothing of bob's
    assert await channels_when_attaching(world, other.community.id, bob.id) is None


# --- deactivation and password changes close the user's sockets (issue 8, defect 3) --------


async def test_deactivation_closes_the_users_sockets_on_every_process(
    world: World, aiohttp_client: Any, settings: Settings
) -> None:
    """A socket on another app process (same PostgreSQL and Redis) closes too: the close
    travels as a control event through the hub."""
    other_app = create_app(settings)
    other: TestClient = await aiohttp_client(other_app)
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    cat = await world.user(ann, "Cat")
    conversation = await start(ann, bob, cat)
    here, _ = await open_socket(bob)
    there, _ = await open_socket(bob, client=other)
    cats, _ = await open_socket(cat)
    gone = await ann.api.delete(f"/api/users/{bob.id}")
    assert gone.status == 200
    for ws in (here, there):
        frames, closing = await read_until_closed(ws, within=5)
        assert closing.type is aiohttp.WSMsgType.CLOSE, closing
        assert closing.data == 4003
        assert not any(f.get("type") == "event" for f in frames)
    # nothing of later events reaches them; others go on
    remark = await say(ann, conversation["id"], "after bob left")
    assert (await next_event(cats))["data"] == remark
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await open_socket(bob)
    assert refused.value.status == 401


async def test_a_socket_set_up_while_its_user_is_deactivated_is_closed(world: World) -> None:
    """Authenticated before the deactivation committed, attached after: the channel loader
    (run after the socket has its stream position) sees the user is no longer active."""
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    group_id = await chat_group(ann, bob)
    assert await channels_when_attaching(world, ann.community.id, bob.id) == [
        group_channel(group_id)]
    async with world.pool.acquire() as conn:
        await conn.execute("UPDATE users SET state = 'inactive' WHERE id = $1", bob.id)
    assert await channels_when_attaching(world, ann.community.id, bob.id) is None
    other = await world.community("Globex")
    assert await channels_when_attaching(world, other.community.id, bob.id) is None


async def test_password_change_closes_the_users_sockets_with_4001(world: World) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    cat = await world.user(ann, "Cat")
    ws, _ = await open_socket(bob)
    cats, _ = await open_socket(cat)
    changed = await bob.api.put(f"/api/users/{bob.id}", json={"user": {
        "password": "a new secret", "current_password": "correct horse battery"}})
    assert changed.status == 200, changed.text
    _, closing = await read_until_closed(ws, within=5)
    assert closing.type is aiohttp.WSMsgType.CLOSE and closing.data == 4001
    await cats.send_json({"type": "ping"})
    assert await next_frame(cats) == {"type": "pong"}


async def test_sockets_resuming_together_share_one_read_and_keep_their_own_channels(
    world: World, query_log: QueryLog
) -> None:
    """A reconnect storm: the sockets resuming from the same since read the community's events
    once (realtime/hub.py `replay`), and each gets only what its channels carried."""
    ann = await world.community("Acme")
    bob, cat = await world.user(ann, "Bob"), await world.user(ann, "Cat")
    with_bob = (await start(ann, bob))["id"]
    with_cat = (await start(ann, cat))["id"]
    since = await last_event_id(world.pool, ann.community.id)
    to_bob = [await say(ann, with_bob, f"to bob {n}") for n in range(3)]
    to_cat = [await say(ann, with_cat, f"to cat {n}") for n in range(2)]
    query_log.reset()
    (bob_ws, _), (cat_ws, _), (bob_again, _) = await asyncio.gather(
        open_socket(bob, since=since), open_socket(cat, since=since),
        open_socket(bob, since=since))
    for ws, expected in ((bob_ws, to_bob), (cat_ws, to_cat), (bob_again, to_bob)):
        frames = await next_events(ws, len(expected))
        assert [f["data"] for f in frames] == expected
        assert {f["channel"] for f in frames} == {
            conversation_channel(with_bob if expected is to_bob else with_cat)}
    reads = [q for q in query_log if "FROM realtime_events" in q and "id > $" in q]
    assert len(reads) == 1, reads
    # a later socket of the same storm reads nothing at all
    query_log.reset()
    late, _ = await open_socket(cat, since=since)
    assert [f["data"] for f in await next_events(late, 2)] == to_cat
    assert not [q for q in query_log if "FROM realtime_events" in q and "id > $" in q]
