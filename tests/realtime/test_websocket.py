"""Realtime websockets end to end: real aiohttp sockets, PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import base64
import gc
import os
import socket
import weakref
from typing import Any

import aiohttp
import asyncpg
import pytest
import redis.asyncio as aioredis
from aiohttp import web
from aiohttp.test_utils import TestClient, make_mocked_request

from realtime.events import NewEvent, control_event
from realtime.hub import RedisHub
from realtime.websocket import SLOW_READER_CLOSE_CODE, RealtimeSettings, parse_since


def ev(channel: str, n: int = 0, name: str = "remark.created") -> NewEvent:
    return NewEvent(channel, name, {"n": n})


async def receive(ws: aiohttp.ClientWebSocketResponse) -> Any:
    message = await ws.receive(timeout=5)
    assert message.type is aiohttp.WSMsgType.TEXT, message
    return message.json()


async def receive_ids(ws: aiohttp.ClientWebSocketResponse, count: int) -> list[int]:
    ids = []
    for _ in range(count):
        frame = await receive(ws)
        assert frame["type"] == "event", frame
        ids.append(int(frame["id"]))
    return ids


async def assert_quiet(ws: aiohttp.ClientWebSocketResponse, marker_id: int) -> None:
    """The next frame is the event `marker_id`: nothing else came before it."""
    frame = await receive(ws)
    assert (frame["type"], frame.get("id")) == ("event", str(marker_id)), frame


async def connect(client: TestClient, query: str, **kwargs: Any) -> Any:
    ws = await client.ws_connect(f"/rt?{query}", **kwargs)
    welcome = await receive(ws)
    assert welcome["type"] == "welcome", welcome
    return ws, welcome


async def test_welcome(
    aiohttp_client: Any, make_app: Any, make_hub: Any, rt_pool: asyncpg.Pool, commit: Any
) -> None:
    hub = await make_hub()
    app, _ = make_app(hub, rt_pool)
    client = await aiohttp_client(app)
    ws, welcome = await connect(client, "user=7&channel=conversation:1")
    assert welcome == {"type": "welcome", "user_id": 7, "last_event_id": "0"}
    await ws.close()
    await commit(hub, 1, ev("conversation:1"), ev("conversation:2"))
    _, welcome = await connect(client, "user=7&channel=conversation:1")
    assert welcome["last_event_id"] == "2"


async def test_events_reach_sockets_on_another_process(
    aiohttp_client: Any, make_app: Any, make_hub: Any, rt_pool: asyncpg.Pool, commit: Any
) -> None:
    one, two = await make_hub(), await make_hub()
    client_one = await aiohttp_client(make_app(one, rt_pool)[0])
    client_two = await aiohttp_client(make_app(two, rt_pool)[0])
    ws_one, _ = await connect(client_one, "user=7&channel=conversation:12")
    ws_two, _ = await connect(client_two, "user=8&channel=conversation:12")
    await commit(two, 1, NewEvent("conversation:12", "remark.created", {"id": 5, "body": "hi"}))
    expected = {
        "type": "event",
        "id": "1",
        "channel": "conversation:12",
        "event": "remark.created",
        "data": {"id": 5, "body": "hi"},
    }
    assert await receive(ws_one) == expected
    assert await receive(ws_two) == expected


async def test_isolation_between_channels_users_and_communities(
    aiohttp_client: Any, make_app: Any, make_hub: Any, rt_pool: asyncpg.Pool, commit: Any
) -> None:
    one, two = await make_hub(), await make_hub()
    client = await aiohttp_client(make_app(one, rt_pool)[0])
    ws, _ = await connect(client, "user=7&community=1&channel=conversation:1")
    await commit(two, 1, ev("conversation:2"))  # id 1: a channel it does not follow
    await commit(two, 1, ev("user:8", name="notification.created"))  # id 2: another user
    await commit(two, 2, ev("conversation:1"), ev("user:7"))  # another community, same names
    await commit(two, 1, ev("conversation:1"))  # id 3
    await assert_quiet(ws, 3)
    await commit(two, 1, ev("user:7", name="notification.created"))  # its own user channel
    await assert_quiet(ws, 4)


async def test_control_events_change_subscriptions_live(
    aiohttp_client: Any, make_app: Any, make_hub: Any, rt_pool: asyncpg.Pool, commit: Any
) -> None:
    one, two = await make_hub(), await make_hub()
    client = await aiohttp_client(make_app(one, rt_pool)[0])
    ws, _ = await connect(client, "user=7")
    # Joining: the control goes first in its batch, so the join's own event arrives too.
    await commit(two, 1, control_event(7, subscribe=["conversation:9"]), ev("conversation:9"))
    await assert_quiet(ws, 2)  # the control itself (1) is never sent
    await commit(two, 1, control_event(8, unsubscribe=["conversation:9"]))  # 3: someone else
    # Leaving: the removal is seen, what follows it is not.
    await commit(
        two,
        1,
        ev("conversation:9", name="conversation.member_removed"),  # 4
        control_event(7, unsubscribe=["conversation:9"]),  # 5
        ev("conversation:9"),  # 6
    )
    await assert_quiet(ws, 4)
    await commit(two, 1, ev("user:7", name="notification.created"))  # 7
    await assert_quiet(ws, 7)


async def test_resume_replays_in_order_then_goes_live(
    aiohttp_client: Any, make_app: Any, make_hub: Any, rt_pool: asyncpg.Pool, commit: Any
) -> None:
    hub = await make_hub()
    client = await aiohttp_client(make_app(hub, rt_pool)[0])
    for i in range(6):  # 1..6 alternate between conversation:1 and conversation:2
        await commit(hub, 1, ev(f"conversation:{i % 2 + 1}", i))
    ws, welcome = await connect(client, "user=7&channel=conversation:1&since=2")
    assert welcome["last_event_id"] == "6"
    assert await receive_ids(ws, 2) == [3, 5]
    await commit(hub, 1, ev("conversation:2"), ev("conversation:1"))
    await assert_quiet(ws, 8)


async def test_resume_with_events_committed_during_setup(
    aiohttp_client: Any, make_app: Any, make_hub: Any, rt_pool: asyncpg.Pool, commit: Any
) -> None:
    """Events and a subscription change that commit while the socket is loading its channels
    and replaying arrive after the replay, once each, in order."""
    hub, writer = await make_hub(), await make_hub()

    async def during_load() -> None:
        await commit(writer, 1, ev("conversation:1"))  # 4
        # joined after the channel list was read: the control brings conversation:3 in
        await commit(writer, 1, control_event(7, subscribe=["conversation:3"]))  # 5
        await commit(writer, 1, ev("conversation:3"), ev("conversation:1"))  # 6, 7
        await asyncio.sleep(0.1)  # let them reach the hub before the channels are returned

    app, _ = make_app(hub, rt_pool, on_load=during_load)
    client = await aiohttp_client(app)
    await commit(hub, 1, ev("conversation:1"), ev("conversation:1"), ev("conversation:2"))
    ws, welcome = await connect(client, "user=7&channel=conversation:1&since=1")
    assert welcome["last_event_id"] == "3"
    assert await receive_ids(ws, 4) == [2, 4, 6, 7]
    await commit(writer, 1, ev("conversation:3"))
    await assert_quiet(ws, 8)


async def test_since_from_a_process_ahead_of_this_one_skips_what_it_saw(
    aiohttp_client: Any, make_app: Any, make_hub: Any, rt_pool: asyncpg.Pool, commit: Any
) -> None:
    hub = await make_hub("local")
    client = await aiohttp_client(make_app(hub, rt_pool)[0])
    ws, _ = await connect(client, "user=7&channel=c")  # this hub's stream is at 0
    await commit(None, 1, ev("c"), ev("c"))  # committed, not yet published here
    late, welcome = await connect(client, "user=7&channel=c&since=2")
    assert welcome["last_event_id"] == "2"
    await commit(hub, 1, ev("c"))  # reveals the hole: 1 and 2 come from SQL, then 3
    assert await receive_ids(ws, 3) == [1, 2, 3]
    await assert_quiet(late, 3)


async def test_last_event_id_header(
    aiohttp_client: Any, make_app: Any, make_hub: Any, rt_pool: asyncpg.Pool, commit: Any
) -> None:
    hub = await make_hub()
    client = await aiohttp_client(make_app(hub, rt_pool)[0])
    await commit(hub, 1, ev("c"), ev("c"))
    ws, _ = await connect(client, "user=7&channel=c", headers={"Last-Event-ID": "1"})
    assert await receive_ids(ws, 1) == [2]


@pytest.mark.parametrize("case", ["pruned", "too_many", "ahead_of_database"])
async def test_reset_when_the_gap_cannot_be_replayed(
    case: str,
    aiohttp_client: Any,
    make_app: Any,
    make_hub: Any,
    rt_pool: asyncpg.Pool,
    commit: Any,
) -> None:
    hub = await make_hub()
    app, _ = make_app(hub, rt_pool, RealtimeSettings(replay_limit=3))
    client = await aiohttp_client(app)
    for _ in range(5):
        await commit(hub, 1, ev("c"))
    since = {"pruned": 1, "too_many": 0, "ahead_of_database": 9}[case]
    if case == "pruned":
        await rt_pool.execute("DELETE FROM realtime_events WHERE id <= 2")
    ws, welcome = await connect(client, f"user=7&channel=c&since={since}")
    assert welcome["last_event_id"] == "5"  # after a reset: from the present
    assert await receive(ws) == {"type": "reset"}
    await commit(hub, 1, ev("c"))
    await assert_quiet(ws, 6)


async def test_replay_within_limits_is_not_a_reset(
    aiohttp_client: Any, make_app: Any, make_hub: Any, rt_pool: asyncpg.Pool, commit: Any
) -> None:
    hub = await make_hub()
    app, _ = make_app(hub, rt_pool, RealtimeSettings(replay_limit=3))
    client = await aiohttp_client(app)
    for _ in range(5):
        await commit(hub, 1, ev("c"))
    await rt_pool.execute("DELETE FROM realtime_events WHERE id <= 2")
    ws, _ = await connect(client, "user=7&channel=c&since=2")
    assert await receive_ids(ws, 3) == [3, 4, 5]


async def test_ping_pong(
    aiohttp_client: Any, make_app: Any, make_hub: Any, rt_pool: asyncpg.Pool
) -> None:
    hub = await make_hub()
    client = await aiohttp_client(make_app(hub, rt_pool)[0])
    ws, _ = await connect(client, "user=7")
    await ws.send_str("not json")
    await ws.send_json({"type": "ping"})
    assert await receive(ws) == {"type": "pong"}


async def test_slow_reader_is_disconnected_and_resumes(
    aiohttp_client: Any, make_app: Any, make_hub: Any, rt_pool: asyncpg.Pool, commit: Any
) -> None:
    hub = await make_hub("local")

    async def small_buffers(request: web.Request) -> None:
        # so that a client that stops reading backs up into our queue after a few frames
        transport = request.transport
        assert isinstance(transport, asyncio.WriteTransport)
        transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        transport.set_write_buffer_limits(high=4096)

    settings = RealtimeSettings(max_queue_frames=8, max_queue_bytes=64 * 1024)
    app, connections = make_app(hub, rt_pool, settings, before=small_buffers)
    client = await aiohttp_client(app)
    ws = await client.ws_connect("/rt-conn?user=7&channel=c")
    assert (await receive(ws))["type"] == "welcome"

    payload = "x" * 16_000
    published = 0
    async with asyncio.timeout(30):
        while not connections[0].closing:  # the client reads nothing meanwhile
            await commit(hub, 1, NewEvent("c", "remark.created", {"body": payload}))
            published += 1
            await asyncio.sleep(0.001)
    assert published < 500
    seen = []
    while True:
        message = await ws.receive(timeout=5)
        if message.type is not aiohttp.WSMsgType.TEXT:
            break
        seen.append(int(message.json()["id"]))
    assert message.type is aiohttp.WSMsgType.CLOSE
    assert message.data == SLOW_READER_CLOSE_CODE
    assert seen == list(range(1, len(seen) + 1))  # a prefix, in order
    assert len(seen) < published
    # It comes back with since and gets the rest.
    again = await client.ws_connect(f"/rt?user=7&channel=c&since={seen[-1]}")
    assert (await receive(again))["type"] == "welcome"
    assert await receive_ids(again, published - len(seen)) == list(
        range(len(seen) + 1, published + 1)
    )


async def never_reading_client(
    port: int, path: str, headers: dict[str, str] | None = None
) -> socket.socket:
    """A websocket client that completes the handshake and then never reads again, with a
    small receive buffer of its own (so what piles up does so on the server's side)."""
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.setblocking(False)
    await loop.sock_connect(sock, ("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    head = "".join(f"{name}: {value}\r\n"
                   for name, value in {"Host": "localhost", **(headers or {})}.items())
    await loop.sock_sendall(sock, (
        f"GET {path} HTTP/1.1\r\n{head}Upgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += await loop.sock_recv(sock, 1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


async def test_a_peer_gone_without_a_close_frame_is_freed_at_once(
    aiohttp_client: Any, make_app: Any, make_hub: Any, rt_pool: asyncpg.Pool
) -> None:
    """A socket whose peer vanished (a TCP reset, no close frame: a phone losing its network)
    is freed by reference counting as soon as it ends: none of it waits for a full pass of the
    cyclic collector, which a reconnect storm would pay for (issue 13, docs/reconnect.md)."""
    served: list[weakref.ref[web.Request]] = []

    async def keep(request: web.Request) -> None:
        served.append(weakref.ref(request))  # what the socket's response holds to the end

    hub = await make_hub("local")
    client = await aiohttp_client(make_app(hub, rt_pool, before=keep)[0])
    peer, _ = await connect(client, "user=7&channel=c")
    gc.collect()
    gc.disable()  # from here on only reference counting frees anything
    try:
        peer._conn.transport.abort()  # a reset, no close frame
        async with asyncio.timeout(5):
            while served[0]() is not None:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
    finally:
        gc.enable()


async def test_a_reader_that_never_reads_is_cut_after_about_the_bound(
    aiohttp_client: Any, make_app: Any, make_hub: Any, rt_pool: asyncpg.Pool, commit: Any
) -> None:
    """The bound counts bytes waiting in the process, and the kernel's send buffer in front of
    the socket is capped: a client that never reads is cut after about the bound, not after
    the megabytes an autotuned send buffer would swallow first (issue 8, defect 14)."""
    hub = await make_hub("local")
    bound = 256 * 1024
    settings = RealtimeSettings(max_queue_frames=1_000_000, max_queue_bytes=bound)
    app, connections = make_app(hub, rt_pool, settings)
    client = await aiohttp_client(app)
    assert client.port is not None
    sock = await never_reading_client(client.port, "/rt-conn?user=7&channel=c")
    try:
        for _ in range(1000):  # until the socket is live
            if connections and set(connections[0].channels) == {"c", "user:7"}:
                break
            await asyncio.sleep(0.01)
        payload = "x" * 16_000
        published = 0
        async with asyncio.timeout(60):
            while not connections[0].closing:
                await commit(hub, 1, NewEvent("c", "remark.created", {"body": payload}))
                published += len(payload)
                await asyncio.sleep(0.001)
        # the bound, plus the kernel's capped buffers on both ends and asyncio's write buffer
        assert published < bound + 640 * 1024, published
    finally:
        sock.close()


async def test_redis_connection_killed_socket_misses_nothing(
    aiohttp_client: Any,
    make_app: Any,
    make_hub: Any,
    rt_pool: asyncpg.Pool,
    commit: Any,
    rt_redis_url: str,
) -> None:
    hub = await make_hub(reconnect_min=0.3, reconnect_max=0.3, degraded_poll_interval=60)
    writer = await make_hub()
    assert isinstance(hub, RedisHub)
    client = await aiohttp_client(make_app(hub, rt_pool)[0])
    ws, _ = await connect(client, "user=7&channel=c")
    await commit(writer, 1, ev("c"))
    assert await receive_ids(ws, 1) == [1]

    admin = aioredis.Redis.from_url(rt_redis_url)
    try:
        ours = [c for c in await admin.client_list(_type="pubsub") if c["name"] == hub.client_name]
        assert len(ours) == 1
        await admin.execute_command("CLIENT", "KILL", "ID", ours[0]["id"])
    finally:
        await admin.aclose()
    async with asyncio.timeout(5):
        while hub.connected:  # noqa: ASYNC110 - polling state that has no event
            await asyncio.sleep(0.01)
    for _ in range(5):  # published while this process is not subscribed: Redis drops them
        await commit(writer, 1, ev("c"))
    assert await receive_ids(ws, 5) == [2, 3, 4, 5, 6]
    await commit(writer, 1, ev("c"))
    await assert_quiet(ws, 7)


async def test_hub_close_closes_sockets_going_away(
    aiohttp_client: Any, make_app: Any, make_hub: Any, rt_pool: asyncpg.Pool
) -> None:
    hub = await make_hub()
    client = await aiohttp_client(make_app(hub, rt_pool)[0])
    ws, _ = await connect(client, "user=7")
    await hub.close()
    message = await ws.receive(timeout=5)
    assert message.type is aiohttp.WSMsgType.CLOSE
    assert message.data == 1001


def test_parse_since() -> None:
    assert parse_since(make_mocked_request("GET", "/rt")) is None
    assert parse_since(make_mocked_request("GET", "/rt?since=12")) == 12
    header = make_mocked_request("GET", "/rt", headers={"Last-Event-ID": "5"})
    assert parse_since(header) == 5
    both = make_mocked_request("GET", "/rt?since=7", headers={"Last-Event-ID": "5"})
    assert parse_since(both) == 7
    for bad in ("/rt?since=abc", "/rt?since=-1"):
        with pytest.raises(ValueError):
            parse_since(make_mocked_request("GET", bad))


def test_replay_leaves_out_what_a_channel_carried_before_joining_it() -> None:
    """Added to a one-to-one conversation while away: its earlier remarks are not replayed."""
    from realtime.events import CONTROL_EVENT, Event
    from realtime.websocket import joined_only

    def ev(i: int, channel: str, name: str = "remark.created", **data: object) -> Event:
        return Event(i, 1, channel, name, dict(data))

    replay = [
        ev(1, "conversation:5", text="just us"),
        ev(2, "user:7", name="notification.created"),
        ev(3, "user:7", name=CONTROL_EVENT, subscribe=["conversation:5"], unsubscribe=[]),
        ev(4, "conversation:5", name="conversation.member_added"),
        ev(5, "conversation:9", text="an old channel of theirs"),
    ]
    assert [e.id for e in joined_only(replay, "user:7")] == [2, 3, 4, 5]
    assert joined_only(replay[:2], "user:7") == replay[:2]


async def test_one_heartbeat_per_process_pings_and_drops_silent_sockets(
    aiohttp_client: Any, make_app: Any, make_hub: Any, rt_pool: asyncpg.Pool
) -> None:
    """aiohttp's heartbeat is off (a timer per socket); one task per process pings every
    socket: a client that answers PINGs (aiohttp's autoping) stays, one that never answers is
    dropped about 1.5 to 2 heartbeats later; the server answers the client's own PINGs."""
    from realtime import websocket

    hub = await make_hub("local")
    app, _ = make_app(hub, rt_pool, RealtimeSettings(heartbeat=0.2))
    client = await aiohttp_client(app)
    assert client.port is not None
    alive, _ = await connect(client, "user=7&channel=c")
    watcher, _ = await connect(client, "user=9&channel=c", autoping=False)
    silent = await never_reading_client(client.port, "/rt?user=8&channel=c")
    frames: list[Any] = []

    async def read_alive() -> None:  # aiohttp's client answers PINGs while it reads
        async for message in alive:
            frames.append(message.json())

    loop = asyncio.get_running_loop()
    reading = loop.create_task(read_alive())
    try:
        mine = [k for k in websocket._HEARTBEATS if k[0] is loop]
        assert mine == [(loop, 0.2)]  # one for the three sockets
        assert len(websocket._HEARTBEATS[mine[0]].sockets) == 3
        # the watcher sees the server's PINGs, and its own PING answered
        async with asyncio.timeout(5):
            while (await watcher.receive()).type is not aiohttp.WSMsgType.PING:
                pass
        await watcher.pong()
        await watcher.ping(b"are you there")
        async with asyncio.timeout(5):
            while (answer := await watcher.receive()).type is not aiohttp.WSMsgType.PONG:
                pass
        assert answer.data == b"are you there"
        began = loop.time()
        async with asyncio.timeout(5):
            while True:
                # a peer that never answers: dropped (EOF or a reset on our side)
                try:
                    if not await loop.sock_recv(silent, 65536):
                        break
                except ConnectionResetError:
                    break
        assert loop.time() - began < 1.0
        await asyncio.sleep(0.5)  # more than two heartbeats
        await alive.send_json({"type": "ping"})
        async with asyncio.timeout(5):
            while not frames:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        assert frames == [{"type": "pong"}]  # answered PINGs: still open
        assert not alive.closed
    finally:
        reading.cancel()
        silent.close()
        await alive.close()
        await watcher.close()
    async with asyncio.timeout(5):
        while (loop, 0.2) in websocket._HEARTBEATS:  # noqa: ASYNC110 - the last socket ends it
            await asyncio.sleep(0.01)
