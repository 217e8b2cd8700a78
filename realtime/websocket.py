"""One realtime websocket: welcome, resume, live events, ping/pong, slow-reader policy.

The lead's handler authenticates, decides which channels the user may read and calls
`serve_realtime`. Everything after the upgrade lives here:

1. `hub.attach` registers the socket in its community's stream and returns the position P
   every later event is measured against. Until step 4 the socket receives *every* event of
   the community into a setup buffer, so nothing can fall between the steps that await.
2. `load_channels()` is called only now (after P), so a membership change committed before it
   is in its result, and one committed after it arrives as a control event in the buffer.
3. welcome (`last_event_id` = max(P, since)), then, with `since`, a replay of
   since < id <= P on the channels from PostgreSQL, or `{"type":"reset"}` when that range is
   pruned, beyond the counter, or longer than `replay_limit`.
4. Synchronously: subscribe the channels, stop the catch-all, run the buffer through the same
   path as live events (controls applied in order; ids <= the welcome's skipped), go live.

Live frames are the shared bytes made once per process; a socket keeps a plain list of them and
a writer task that exists only while there is something to write, so an idle socket costs its
slots, a small set, one suspended coroutine (`RealtimeConnection.run`) and aiohttp's own state:
no task or timer of its own (one `_Heartbeat` per process pings every socket; presence is
refreshed by one task per process, app/presence.py). When the queue passes `max_queue_frames` or
`max_queue_bytes` the socket is closed with SLOW_READER_CLOSE_CODE instead of buffering more;
the client reconnects with `since` and replays what it missed. Frames are never compressed:
per-socket deflate would be per-socket work (and 100+ KiB of zlib state per socket).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson
from aiohttp import WSCloseCode, WSMsgType, web

from app import metrics
from realtime.channels import user_channel
from realtime.events import (
    CONTROL_EVENT,
    PONG_FRAME,
    RESET_FRAME,
    EncodedEvent,
    Event,
    encode_frame,
    websocket_text_frame,
    welcome_frame,
)
from realtime.hub import Hub
from storage.events import MAX_ID

log = logging.getLogger(__name__)

SLOW_READER_CLOSE_CODE = 4008
SLOW_READER_REASON = "too slow; reconnect with since"

ChannelLoader = Callable[[], Awaitable[Iterable[str]]]

# what ends `async for message in ws` (aiohttp's WebSocketResponse.__anext__)
_ENDED = frozenset((WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED))


class Refused(Exception):
    """Raised by a ChannelLoader: the user may no longer have this socket (e.g. deactivated
    while it was being set up); it closes with `code`."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RealtimeSettings:
    heartbeat: float = 30.0
    """A socket that has sent nothing for about `heartbeat` s gets a websocket PING; no answer
    within half of it closes the socket. One timer per process ticks every heartbeat / 2 for
    every socket (`_Heartbeat`), not a timer per socket."""
    max_queue_frames: int = 1024
    max_queue_bytes: int = 1 << 20
    """Frames waiting for a socket beyond either bound close it. Bytes count what waits in this
    process: the queue and asyncio's write buffer of the socket."""
    send_buffer_bytes: int = 64 * 1024
    """SO_SNDBUF of each websocket: the kernel's buffer in front of a reader is this (Linux
    doubles it), not the up to 4 MiB its autotuning grows to, which a reader that never reads
    would otherwise fill before any bound here sees a byte."""
    replay_limit: int = 1000
    """More events than this to replay on resume: reset instead."""
    close_timeout: float = 5.0
    max_message_bytes: int = 4096
    """Largest frame a client may send (it only ever sends pings)."""


def joined_only(replay: list[Event], own_channel: str) -> list[Event]:
    """The replay without what a channel carried before the user was subscribed to it in the
    replayed range (their latest subscription counts): someone added to a conversation while
    away gets none of its earlier events, such as a one-to-one conversation's past
    (decisions.md); REST shows them what they may see."""
    joined: dict[str, int] = {}
    for event in replay:
        if event.name == CONTROL_EVENT and event.channel == own_channel:
            for channel in event.data.get("subscribe", ()):
                joined[channel] = event.id
    if not joined:
        return replay
    return [e for e in replay if e.id > joined.get(e.channel, 0)]


class UnknownSince(ValueError):
    """`since` is an integer no event id of this server can reach."""


def parse_since(request: web.BaseRequest) -> int | None:
    """`?since=<id>` or the `Last-Event-ID` header; ValueError when present but not an id
    (UnknownSince when beyond any id)."""
    raw = request.query.get("since") or request.headers.get("Last-Event-ID")
    if raw is None or raw == "":
        return None
    value = int(raw)
    if value < 0:
        raise ValueError("since must be a non-negative event id")
    if value > MAX_ID:
        raise UnknownSince("since is beyond every event id")
    return value


def websocket_response(settings: RealtimeSettings) -> web.WebSocketResponse:
    # No heartbeat or autoping of aiohttp's (a timer and its callbacks per socket): the
    # connection answers PINGs and `_Heartbeat` pings every socket of the process.
    return web.WebSocketResponse(
        heartbeat=None,
        autoping=False,
        compress=False,
        max_msg_size=settings.max_message_bytes,
        timeout=settings.close_timeout,
    )


def serve_realtime(
    request: web.BaseRequest,
    *,
    hub: Hub,
    pool: asyncpg.Pool,
    community_id: int,
    user_id: int,
    load_channels: ChannelLoader,
    since: int | None,
    settings: RealtimeSettings,
    on_close: Callable[[], None] | None = None,
) -> Coroutine[Any, Any, web.WebSocketResponse]:
    """Upgrade `request` and run the socket until it closes (then call `on_close`, however
    it ended); await it from the handler, or return it from a handler that is no coroutine
    itself, and return the response it gives. (Not a coroutine itself: the one it returns
    does the whole socket, so an idle socket holds one frame here instead of a chain.)"""
    connection = RealtimeConnection(
        websocket_response(settings),
        community_id=community_id,
        user_id=user_id,
        hub=hub,
        pool=pool,
        settings=settings,
        transport=request.transport,
        heartbeat=True,
    )
    return connection.run(load_channels, since, upgrade=request, on_close=on_close)


def _drop_tracebacks(error: BaseException | None) -> None:
    """Forget the tracebacks of the error that ended a socket, and of the errors it arose
    from. aiohttp keeps that error on the response (ws.exception()); its traceback holds the
    frames of ws.close and ws.receive, whose `self` is the response, which holds it again: a
    cycle of about 50 objects per peer that went away without a close frame (a phone losing
    its network), which only a full pass of the cyclic collector frees. In a reconnect storm
    those passes walked every dropped socket of the storm before (issue 13, docs/reconnect.md).
    """
    for _ in range(8):  # a short chain; never loop on a pathological one
        if error is None:
            return
        error.__traceback__ = None
        error = error.__context__


PING_WIRE = b"\x89\x00"  # a whole unmasked PING frame with no payload (RFC 6455 5.5.2)


class _Heartbeat:
    """The PINGs of every socket of one event loop with the same interval: one task ticking
    every interval / 2. A socket silent for two ticks (its last message between interval / 2
    and interval ago) gets a PING; still silent at the next tick (interval / 2 later), it is
    dropped as dead, as aiohttp's per-socket heartbeat does."""

    def __init__(self, key: tuple[asyncio.AbstractEventLoop, float]) -> None:
        self._key = key
        self.sockets: set[RealtimeConnection] = set()
        self._task = key[0].create_task(self._run(key[1] / 2))

    async def _run(self, tick: float) -> None:
        try:
            while self.sockets:
                await asyncio.sleep(tick)
                for connection in list(self.sockets):
                    connection.heartbeat_tick()
        finally:
            if _HEARTBEATS.get(self._key) is self:
                del _HEARTBEATS[self._key]

    @staticmethod
    def join(connection: RealtimeConnection, interval: float) -> None:
        key = (asyncio.get_running_loop(), interval)
        beat = _HEARTBEATS.get(key)
        if beat is None:
            beat = _HEARTBEATS[key] = _Heartbeat(key)
        beat.sockets.add(connection)

    @staticmethod
    def leave(connection: RealtimeConnection, interval: float) -> None:
        key = (asyncio.get_running_loop(), interval)
        beat = _HEARTBEATS.get(key)
        if beat is not None:
            beat.sockets.discard(connection)
            if not beat.sockets:
                del _HEARTBEATS[key]
                beat._task.cancel()


_HEARTBEATS: dict[tuple[asyncio.AbstractEventLoop, float], _Heartbeat] = {}


def cap_send_buffer(transport: asyncio.BaseTransport | None, size: int) -> None:
    """Fix the socket's kernel send buffer at `size` bytes (turning off its autotuning)."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or size <= 0:
        return
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)


class RealtimeConnection:
    """One prepared websocket and its subscriptions (a `realtime.hub.Subscriber`)."""

    __slots__ = (
        "_closer",
        "_closing",
        "_floor",
        "_hub",
        "_pool",
        "_queue",
        "_queued_bytes",
        "_queued_frames",
        "_settings",
        "_setup",
        "_silent",
        "_transport",
        "_writer",
        "_ws",
        "channels",
        "community_id",
        "user_id",
    )

    def __init__(
        self,
        ws: web.WebSocketResponse,
        *,
        community_id: int,
        user_id: int,
        hub: Hub,
        pool: asyncpg.Pool,
        settings: RealtimeSettings,
        transport: asyncio.BaseTransport | None = None,
        heartbeat: bool = False,
    ) -> None:
        """`heartbeat`: PING the client through `_Heartbeat` (`ws` was made by
        `websocket_response`: aiohttp's own heartbeat and autoping are off)."""
        self.community_id = community_id
        self.user_id = user_id
        self.channels: tuple[str, ...] = ()  # maintained by the hub
        self._ws = ws
        self._hub = hub
        self._pool = pool
        self._settings = settings
        self._transport = transport
        cap_send_buffer(transport, settings.send_buffer_bytes)
        self._queue: list[bytes] | None = None  # made when a frame must wait
        self._queued_frames = 0
        self._queued_bytes = 0
        self._writer: asyncio.Task[None] | None = None
        self._closer: asyncio.Task[None] | None = None
        self._closing = False
        self._floor = 0  # events with an id <= this were replayed or predate the socket
        self._setup: list[EncodedEvent] | None = []  # catch-all buffer until live
        # heartbeat ticks since the client last sent anything; -1: no heartbeat of ours
        self._silent = 0 if heartbeat and settings.heartbeat > 0 else -1

    @property
    def closing(self) -> bool:
        """True once the socket is being closed (slow reader, shutdown, peer gone)."""
        return self._closing

    async def run(
        self, load_channels: ChannelLoader, since: int | None,
        upgrade: web.BaseRequest | None = None, on_close: Callable[[], None] | None = None,
    ) -> web.WebSocketResponse:
        """Serve the socket until it closes (first upgrading `upgrade` when given); always
        detaches from the hub, then calls `on_close`. One coroutine from the upgrade to the
        close: every frame suspended for the socket's lifetime is memory an idle socket
        keeps."""
        try:
            ws = self._ws
            if upgrade is not None:
                await ws.prepare(upgrade)
                del upgrade  # (aiohttp keeps the request; this frame need not)
            metrics.WEBSOCKETS_OPENED.inc()
            metrics.WEBSOCKETS.inc()
            beating = self._silent >= 0
            if beating:
                _Heartbeat.join(self, self._settings.heartbeat)
            try:
                try:
                    position = await self._hub.attach(self)
                except Exception:
                    log.exception("realtime: cannot attach user %s", self.user_id)
                    with contextlib.suppress(Exception):
                        await ws.close(code=WSCloseCode.INTERNAL_ERROR, message=b"unavailable")
                    return ws
                try:
                    await self._start(load_channels, since, position)
                    del load_channels
                    # The read loop (clients only ever send pings), `async for` unrolled: one
                    # coroutine less suspended per idle socket.
                    while True:
                        message = await ws.receive()
                        kind = message.type
                        if self._silent > 0:
                            self._silent = 0  # anything from the client shows it is there
                        if kind is WSMsgType.TEXT:
                            self._on_text(message.data)
                        elif kind is WSMsgType.PING and beating:
                            # what aiohttp's autoping did (off: see websocket_response)
                            await ws.pong(message.data)
                        elif kind in _ENDED:
                            break
                except ConnectionError:
                    pass  # the peer went away mid-setup
                except Refused as refused:
                    self.terminate(refused.code, refused.reason)
                except Exception:
                    log.exception("realtime: socket of user %s failed", self.user_id)
                    self.terminate(WSCloseCode.INTERNAL_ERROR, "internal error")
                finally:
                    self._hub.detach(self)
                    self._closing = True
                    self._setup = None
                    if self._writer is not None:
                        self._writer.cancel()
                    if self._closer is not None:
                        with contextlib.suppress(Exception):
                            await self._closer
                    if not ws.closed:
                        with contextlib.suppress(Exception):
                            await ws.close()
            finally:
                if beating:
                    _Heartbeat.leave(self, self._settings.heartbeat)
                metrics.WEBSOCKETS.dec()
                _drop_tracebacks(ws.exception())
            return ws
        finally:
            if on_close is not None:
                on_close()

    def heartbeat_tick(self) -> None:
        """From `_Heartbeat`, every heartbeat / 2 s: PING a client silent for two ticks; drop
        one still silent a tick after its PING (the connection is gone without a word)."""
        silent = self._silent = self._silent + 1
        transport = self._transport
        if silent < 2 or self._closing or transport is None or transport.is_closing():
            return
        if silent == 2:
            # whole frames only ever reach the transport, so this never splits another one
            transport.write(PING_WIRE)  # type: ignore[attr-defined]
        else:
            log.debug("realtime: no answer to PING from user %s's socket", self.user_id)
            self._closing = True
            # the read loop ends and the socket is cleaned up as usual
            transport.abort()  # type: ignore[attr-defined]

    # -- setup -----------------------------------------------------------------------------

    async def _start(self, load_channels: ChannelLoader, since: int | None, position: int) -> None:
        channels = set(await load_channels())
        channels.add(user_channel(self.user_id))
        start, reset, replay, frames = position, False, list[Event](), dict[int, bytes]()
        if since is not None and since != position:
            resumable, replay, frames = await self._hub.replay(
                self.community_id, channels, since, position, self._settings.replay_limit
            )
            if resumable:
                start = max(since, position)
            else:
                reset = True  # and go on from this process's position
        # The welcome, a reset and the replay go out in one write (one system call, where a
        # frame each was a quarter of a resuming storm's CPU): whole frames, as every write to
        # this transport is. A replay is at most replay_limit events, which bounds what the
        # transport holds for a slow client. Controls in this range are already in `channels`.
        wire = [websocket_text_frame(welcome_frame(self.user_id, start))]
        if reset:
            wire.append(websocket_text_frame(RESET_FRAME))
        for event in joined_only(replay, user_channel(self.user_id)):
            if event.name != CONTROL_EVENT:
                wire.append(websocket_text_frame(frames.get(event.id) or encode_frame(event)))
        transport = self._transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("the client went away before its welcome")
        transport.write(b"".join(wire))  # type: ignore[attr-defined]
        self._floor = start
        if not self._closing:
            self._go_live(channels)

    def _go_live(self, channels: set[str]) -> None:
        """Subscribe and replay the setup buffer, in one synchronous step."""
        self._hub.focus(self, channels)
        buffered, self._setup = self._setup or [], None
        for event in buffered:
            # Controls are applied again in order; each sets a channel's final state, so
            # re-applying a suffix of them to the loaded channels gives the right result.
            if event.channel in self.channels:
                self.deliver(event)

    # -- hub side (synchronous, hot) -------------------------------------------------------

    def deliver(self, event: EncodedEvent) -> None:
        if self._closing:
            return
        setup = self._setup
        if setup is not None:
            setup.append(event)
            if len(setup) > self._settings.max_queue_frames:
                self.terminate(SLOW_READER_CLOSE_CODE, SLOW_READER_REASON)
            return
        if event.id <= self._floor:
            return
        if event.name == CONTROL_EVENT:
            self._apply_control(event)
            return
        transport = self._transport
        if (
            self._writer is None
            and not self._queue
            and not self._closing
            and event.wire
            and transport is not None
            and not transport.is_closing()
            and not transport.get_write_buffer_size()  # type: ignore[attr-defined]
        ):
            # Fast path, most deliveries: nothing is waiting for this socket, so the finished
            # frame goes straight to the transport (no task, no coroutine per socket). aiohttp
            # writes its own frames (pings, close) to the same transport whole, so frames
            # never interleave.
            transport.write(event.wire)  # type: ignore[attr-defined]
            return
        self._push(event.frame)

    def _apply_control(self, event: EncodedEvent) -> None:
        close = event.close_code()
        if close is not None:
            self.terminate(*close)  # the user was deactivated or changed their password
            return
        subscribe, unsubscribe = event.control()
        own = user_channel(self.user_id)
        self._hub.unsubscribe(self, [c for c in unsubscribe if c != own])
        self._hub.subscribe(self, subscribe)

    def _push(self, frame: bytes) -> None:
        queue = self._queue
        if queue is None:
            self._queue = queue = []
        queue.append(frame)
        self._queued_frames += 1
        self._queued_bytes += len(frame)
        settings = self._settings
        transport = self._transport
        # what asyncio holds for the socket counts too: the fast path writes there directly
        buffered = transport.get_write_buffer_size() if isinstance(
            transport, asyncio.WriteTransport) else 0
        if (
            self._queued_frames > settings.max_queue_frames
            or self._queued_bytes + buffered > settings.max_queue_bytes
        ):
            self.terminate(SLOW_READER_CLOSE_CODE, SLOW_READER_REASON)
        elif self._writer is None and self._setup is None:
            self._writer = asyncio.get_running_loop().create_task(self._write())

    def terminate(self, code: int, message: str) -> None:
        """Close soon with `code` (slow reader, shutdown); drops whatever was queued."""
        if self._closing:
            return
        self._closing = True
        if code == SLOW_READER_CLOSE_CODE:
            metrics.SLOW_READERS.inc()
        if self._queued_frames:
            metrics.HUB_DROPS.inc(self._queued_frames)  # the client replays them with `since`
        self._queue = None
        self._queued_frames = self._queued_bytes = 0
        self._closer = asyncio.get_running_loop().create_task(self._close(code, message))

    # -- socket side -----------------------------------------------------------------------

    async def _write(self) -> None:
        ws = self._ws
        try:
            while self._queue and not self._closing:
                frames, self._queue = self._queue, None
                for frame in frames:
                    await ws.send_frame(frame, WSMsgType.TEXT)
                    self._queued_frames -= 1
                    self._queued_bytes -= len(frame)
        except ConnectionError:
            self._closing = True  # the peer is gone; the read loop ends on its own
        finally:
            self._writer = None

    def _on_text(self, text: str) -> None:
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError:
            return
        if isinstance(data, dict) and data.get("type") == "ping" and not self._closing:
            self._push(PONG_FRAME)

    async def _close(self, code: int, message: str) -> None:
        if self._writer is not None:
            self._writer.cancel()
        try:
            async with asyncio.timeout(self._settings.close_timeout):
                await self._ws.close(code=code, message=message.encode(), drain=False)
        except (TimeoutError, ConnectionError):
            pass
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.close()
        if isinstance(transport, asyncio.WriteTransport) and transport.get_write_buffer_size():
            # A reader that stopped reading keeps its unsent bytes; don't keep them for it.
            asyncio.get_running_loop().call_later(self._settings.close_timeout, transport.abort)
