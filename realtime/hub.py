"""The per-process hub: committed events in, in id order, out to the local sockets.

Why it is shaped this way:

* One stream per community. Event ids are gap-free and in commit order per community
  (storage/events.py), so a hub that receives every event of a community can deliver them in
  id order and *notice* a missing one: id 7 arriving while 5 was the last delivered means 6 is
  late or lost. It waits `gap_timeout` for the straggler (two writers may publish in the other
  order than they committed), then reads the hole from PostgreSQL. Redis is only the fast
  path; nothing depends on it delivering everything.
* Hence one Redis channel per community (`<prefix><community_id>`), subscribed on one pub/sub
  connection per process while the process has sockets in that community (plus `linger`
  seconds, so reconnect storms don't churn SUBSCRIBE/UNSUBSCRIBE). Per-conversation Redis
  channels would lose the ability to see holes; a single pattern subscription would make every
  process receive every community's traffic and makes Redis match patterns on every PUBLISH.
* Tenancy: the community id is in the Redis channel name and keys the stream; a socket is
  registered in exactly one stream, so communities never cross.
* Subscription changes are events too (realtime/events.py `control_event`), stored in the
  membership transaction, so applying them in id order is exact: the events after a join
  reach the new member, the events after a leave don't.
* When the Redis connection drops the hub reconnects with backoff; every SUBSCRIBE confirmed on
  the new connection makes that community's stream compare its position with the counter in
  PostgreSQL and read what it missed, once per process rather than once per socket. While Redis
  is unreachable the hub polls those counters every `degraded_poll_interval`, so sockets keep
  getting events, only later.
* The fan-out loop does no JSON and no allocation per socket: `Subscriber.deliver` gets the
  shared `EncodedEvent` whose frame bytes were made once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import sys
import uuid
from collections import deque
from collections.abc import Collection, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from app import metrics
from realtime.events import (
    CONTROL_EVENT,
    EncodedEvent,
    Event,
    encode,
    encode_frame,
    from_wire,
    to_wire,
)
from storage import events as store
from storage.availability import DatabaseUnavailable
from storage.redis import DEFAULT_TIMEOUT, REDIS_FAILURES, RedisHealth, redis_client

log = logging.getLogger(__name__)

GOING_AWAY = 1001
UNPUBLISHED_KEPT = 10_000


class Subscriber(Protocol):
    """One local socket as the hub sees it (realtime/websocket.py RealtimeConnection)."""

    @property
    def community_id(self) -> int: ...

    # The channels this subscriber is registered on; maintained by the hub only. A tuple: an
    # idle socket's memory (issue 13), where a set of a few names costs four times as much;
    # the hub alone looks names up in it, at (un)subscription, and finds a socket's events
    # through its own index.
    channels: tuple[str, ...]

    def deliver(self, event: EncodedEvent) -> None:
        """Take one event, synchronously and cheaply; never call detach() from here."""

    def terminate(self, code: int, message: str) -> None:
        """Close the socket soon (shutdown); must not block."""


@dataclass(frozen=True, slots=True)
class HubSettings:
    gap_timeout: float = 0.25
    """How long a hole in the ids may wait for a late publish before it is read from SQL."""
    catch_up_page: int = 500
    max_pending: int = 10_000
    """Out-of-order events kept per community while a hole is open (beyond: read from SQL)."""
    resync_interval: float = 30.0
    """How often every stream compares its position with PostgreSQL anyway."""
    degraded_poll_interval: float = 1.0
    """The same, while the Redis connection is down."""
    linger: float = 30.0
    """How long a community's stream outlives its last local socket."""
    maintenance_tick: float = 1.0
    reconnect_min: float = 0.1
    reconnect_max: float = 5.0
    redis_ping_interval: float = 10.0
    """An idle pub/sub connection is pinged this often; 3 silent intervals mean it is dead."""
    subscribe_timeout: float = 2.0
    channel_prefix: str = "commons:rt:"
    redis_timeout: float = DEFAULT_TIMEOUT
    """A publish gives up after this (a hung Redis must not hold the request that published)."""


class _Stream:
    """One community on this process: its position and its local subscribers."""

    __slots__ = (
        "by_channel",
        "catch_all",
        "catch_up",
        "community_id",
        "idle_since",
        "pending",
        "position",
        "ready",
        "subscribers",
        "target",
    )

    def __init__(self, community_id: int, ready: asyncio.Future[None]) -> None:
        self.community_id = community_id
        self.position = 0  # every event with id <= position has been dispatched
        self.target = 0  # an event with this id is known to be committed
        self.pending: dict[int, EncodedEvent] = {}  # arrived early, waiting for a hole
        # a channel's subscribers: one alone as itself (a user's own channel has one socket,
        # mostly: a set each would be 216 bytes per idle socket), several in a set
        self.by_channel: dict[str, Subscriber | set[Subscriber]] = {}
        self.subscribers: set[Subscriber] = set()
        self.catch_all: set[Subscriber] = set()  # attached, not yet focused: get everything
        self.ready = ready  # done once position is initialized
        self.catch_up: asyncio.Task[None] | None = None
        self.idle_since: float | None = None


# A shared replay reads every channel of the community: at most this many events, else each
# socket reads its own channels' (bench/fanout_storm.py).
SHARED_REPLAY_EVENTS = 5000
# kept for later sockets of the same storm: at most this many reads, this long
SHARED_REPLAYS_KEPT = 16
SHARED_REPLAY_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class SharedReplay:
    oldest: int | None  # the smallest id still stored
    events: list[Event]  # every channel's, since < id <= position (when complete)
    frames: dict[int, bytes]  # encode_frame of each, by id
    complete: bool


class Hub:
    """Shared logic of both hubs; `LocalHub` is this with no transport between processes."""

    def __init__(self, pool: asyncpg.Pool, settings: HubSettings | None = None) -> None:
        self._pool = pool
        self._settings = settings or HubSettings()
        self._streams: dict[int, _Stream] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._maintenance: asyncio.Task[None] | None = None
        self._closed = False
        # (community, since, position) -> one read shared by the sockets resuming from there
        # (community, since, position) -> the sockets waiting for its read in progress; then
        # the read, kept a little: what lies at or below a position never changes (ids are
        # gap-free and in commit order), so later sockets of the same storm read nothing
        self._replaying: dict[tuple[int, int, int], list[asyncio.Future[SharedReplay]]] = {}
        self._replayed: dict[tuple[int, int, int], tuple[float, SharedReplay]] = {}

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self._maintenance = self._spawn(self._maintain())

    async def close(self) -> None:
        """Close every attached socket (1001) and stop; idempotent."""
        if self._closed:
            return
        self._closed = True
        self.disconnect_all()
        await self._stop_transport()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        # Python 3.11's wait_for (used inside redis-py) can swallow a cancellation; the loops
        # also stop on `_closed`, and nothing here waits for a task that ignored it forever.
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        self._streams.clear()

    def disconnect_all(self, code: int = GOING_AWAY, message: str = "server shutting down") -> None:
        """Ask every attached socket to close (call from the app's on_shutdown)."""
        for stream in list(self._streams.values()):
            for sub in list(stream.subscribers):
                sub.terminate(code, message)

    # -- publishing ------------------------------------------------------------------------

    async def publish(self, events: Sequence[Event]) -> None:
        """Send committed events (numbered by their COMMIT, app/actions/work.py) to every
        process. Never raises for a transport failure: the events are in PostgreSQL and hubs
        catch up from there."""
        if not events:
            return
        encoded = [encode(e) for e in events]
        for event in encoded:
            self._feed(event)  # this process's sockets at once
        await self._publish_remote(encoded)

    async def _publish_remote(self, events: Sequence[EncodedEvent]) -> None:
        return None

    async def _flush_remote(self) -> None:
        """Send what could not be published earlier (maintenance tick)."""
        return None

    # -- resuming --------------------------------------------------------------------------

    async def replay(
        self, community_id: int, channels: set[str], since: int, position: int, limit: int
    ) -> tuple[bool, list[Event], dict[int, bytes]]:
        """(resumable, the events with since < id <= position on `channels`, frames of some
        of them by id). Sockets resuming from the same `since` at the same position (a
        reconnect storm) share one read of the community's events, and their encoding; each
        keeps its channels' events. Not resumable: pruned, ahead of the database, or more
        than `limit` events."""
        if since > position:  # ahead of this process: fine unless ahead of the database
            async with self._pool.acquire() as conn:
                return since <= await store.last_event_id(conn, community_id), [], {}
        shared = await self._shared_replay((community_id, since, position))
        if shared.oldest is None or shared.oldest > since + 1:
            return False, [], {}  # pruned
        if shared.complete:
            events = [e for e in shared.events if e.channel in channels]
        else:  # too many events in the community for one shared read: this socket's own
            async with self._pool.acquire() as conn:
                events = await store.events_since(
                    conn, community_id, sorted(channels), since, limit + 1, up_to=position
                )
        if len(events) > limit:
            return False, [], {}
        return True, events, shared.frames

    async def _shared_replay(self, key: tuple[int, int, int]) -> SharedReplay:
        """The read for (community, since, position): kept, in progress (joined: what lies at
        or below a position never changes, so a read begun earlier is as good), or started."""
        loop = asyncio.get_running_loop()
        kept = self._replayed.get(key)
        if kept is not None and kept[0] > loop.time():
            return kept[1]
        mine: asyncio.Future[SharedReplay] = loop.create_future()
        waiting = self._replaying.get(key)
        if waiting is None:
            self._replaying[key] = [mine]
            self._spawn(self._read_replay(key))
        else:
            waiting.append(mine)
        return await mine

    async def _read_replay(self, key: tuple[int, int, int]) -> None:
        community_id, since, position = key
        try:
            async with self._pool.acquire() as conn:
                oldest = await store.oldest_event_id(conn, community_id)
                events = await store.events_since(
                    conn, community_id, None, since, SHARED_REPLAY_EVENTS + 1, up_to=position
                )
        except asyncio.CancelledError:
            for future in self._replaying.pop(key, []):
                future.cancel()
            raise
        except Exception as exc:  # to each socket waiting (a 1011 close, as before)
            for future in self._replaying.pop(key, []):
                if not future.done():
                    future.set_exception(exc)
            return
        complete = len(events) <= SHARED_REPLAY_EVENTS
        shared = SharedReplay(
            oldest, events if complete else [],
            {e.id: encode_frame(e) for e in events} if complete else {}, complete,
        )
        now = asyncio.get_running_loop().time()
        if len(self._replayed) >= SHARED_REPLAYS_KEPT:
            self._replayed = {k: v for k, v in self._replayed.items() if v[0] > now}
            while len(self._replayed) >= SHARED_REPLAYS_KEPT:
                del self._replayed[next(iter(self._replayed))]
        self._replayed[key] = (now + SHARED_REPLAY_SECONDS, shared)
        for future in self._replaying.pop(key, []):
            if not future.done():
                future.set_result(shared)

    # -- subscribers -----------------------------------------------------------------------

    async def attach(self, sub: Subscriber) -> int:
        """Register `sub` in its community and return the position P it starts from.

        Until `focus(sub, ...)` the subscriber receives EVERY event of its community with an
        id above the stream's position at that moment (it may also see a few <= P, which it
        must skip); this lets the socket finish an awaited setup (loading its channels,
        replaying) without a window in which an event or a subscription change could slip by.
        """
        if self._closed:
            raise RuntimeError("hub is closed")
        stream = self._streams.get(sub.community_id)
        if stream is None:
            stream = _Stream(sub.community_id, asyncio.get_running_loop().create_future())
            self._streams[sub.community_id] = stream
            self._spawn(self._open(stream))
        stream.subscribers.add(sub)
        stream.catch_all.add(sub)
        stream.idle_since = None
        try:
            await asyncio.shield(stream.ready)
        except BaseException:
            self.detach(sub)
            raise
        return stream.position

    def focus(self, sub: Subscriber, channels: Iterable[str]) -> None:
        """End the catch-all phase: from now on `sub` gets only events on its channels."""
        stream = self._streams.get(sub.community_id)
        if stream is None or sub not in stream.subscribers:
            return
        self.subscribe(sub, channels)
        stream.catch_all.discard(sub)

    def subscribe(self, sub: Subscriber, channels: Iterable[str]) -> None:
        stream = self._streams.get(sub.community_id)
        if stream is None or sub not in stream.subscribers:
            return
        by_channel = stream.by_channel
        current = sub.channels
        added: list[str] = []
        for channel in channels:
            if channel not in current and channel not in added:
                held = by_channel.get(channel)
                if held is not None:
                    # one string per name for the sockets that share it, not one per socket
                    # (a name held by one socket, a user's own channel, stays out of the
                    # interpreter's table of interned strings)
                    channel = sys.intern(channel)
                added.append(channel)
                if held is None:
                    by_channel[channel] = sub
                elif isinstance(held, set):
                    held.add(sub)
                elif held is not sub:
                    by_channel[channel] = {held, sub}
        if added:
            sub.channels = (*current, *added)

    def unsubscribe(self, sub: Subscriber, channels: Iterable[str]) -> None:
        stream = self._streams.get(sub.community_id)
        if stream is None:
            return
        removed = {c for c in channels if c in sub.channels}
        if removed:
            sub.channels = tuple(c for c in sub.channels if c not in removed)
            for channel in removed:
                self._unindex(stream, sub, channel)

    def detach(self, sub: Subscriber) -> None:
        stream = self._streams.get(sub.community_id)
        if stream is None or sub not in stream.subscribers:
            return
        stream.subscribers.discard(sub)
        stream.catch_all.discard(sub)
        for channel in sub.channels:
            self._unindex(stream, sub, channel)
        if not stream.subscribers:
            stream.idle_since = asyncio.get_running_loop().time()

    @staticmethod
    def _unindex(stream: _Stream, sub: Subscriber, channel: str) -> None:
        held = stream.by_channel.get(channel)
        if isinstance(held, set):
            held.discard(sub)
            if len(held) <= 1:
                if held:
                    stream.by_channel[channel] = next(iter(held))
                else:
                    del stream.by_channel[channel]
        elif held is sub:
            del stream.by_channel[channel]

    def stats(self) -> dict[str, int]:
        """Numbers for logs and benchmarks."""
        return {
            "communities": len(self._streams),
            "subscribers": sum(len(s.subscribers) for s in self._streams.values()),
            "pending": sum(len(s.pending) for s in self._streams.values()),
        }

    # -- ordering and fan-out --------------------------------------------------------------

    def _feed(self, event: EncodedEvent) -> None:
        """One event from Redis or a local publish, in whatever order it arrived."""
        stream = self._streams.get(event.community_id)
        if stream is None or event.id <= stream.position:
            return
        if event.id == stream.position + 1 and stream.ready.done():
            self._dispatch(stream, event)
            if stream.pending:
                self._drain(stream)
            return
        if event.id in stream.pending:
            return  # our own publish heard back from Redis: held already, not a drop
        if len(stream.pending) < self._settings.max_pending:
            stream.pending[event.id] = event
        else:
            metrics.HUB_DROPS.inc()  # not held: the catch-up reads it from PostgreSQL
        if stream.ready.done():
            self._want(stream, event.id, self._settings.gap_timeout)
        elif event.id > stream.target:
            stream.target = event.id

    def _dispatch(self, stream: _Stream, event: EncodedEvent) -> None:
        stream.position = event.id
        on_channel = stream.by_channel.get(event.channel)
        subs: Collection[Subscriber]
        if on_channel is None:
            subs = ()
        elif isinstance(on_channel, set):
            # a tuple: a control event's handler changes subscriptions
            subs = tuple(on_channel) if event.name == CONTROL_EVENT else on_channel
        else:
            subs = (on_channel,)
        reached = len(stream.catch_all) + len(subs)
        if reached:
            metrics.HUB_DELIVERIES.inc(reached)
        for sub in subs:
            try:
                sub.deliver(event)
            except Exception:
                log.exception("realtime subscriber failed to take an event")
        for sub in stream.catch_all:
            try:
                sub.deliver(event)
            except Exception:
                log.exception("realtime subscriber failed to take an event")

    def _drain(self, stream: _Stream) -> None:
        pending = stream.pending
        while (event := pending.pop(stream.position + 1, None)) is not None:
            self._dispatch(stream, event)
        if pending:
            for stale in [i for i in pending if i <= stream.position]:
                del pending[stale]

    def _want(self, stream: _Stream, target: int, delay: float) -> None:
        """Make sure the stream reaches `target` (a committed id), from SQL if need be."""
        if target > stream.target:
            stream.target = target
        if stream.position >= stream.target or stream.catch_up is not None or self._closed:
            return
        stream.catch_up = self._spawn(self._catch_up(stream, delay))

    async def _catch_up(self, stream: _Stream, delay: float) -> None:
        settings = self._settings
        try:
            if delay > 0:
                await asyncio.sleep(delay)
            failures = 0
            while (
                stream.position < stream.target and self._streams.get(stream.community_id) is stream
            ):
                target = stream.target
                try:
                    async with self._pool.acquire() as conn:
                        rows = await store.events_since(
                            conn,
                            stream.community_id,
                            None,
                            stream.position,
                            settings.catch_up_page,
                            up_to=target,
                        )
                except Exception as exc:  # the database is down or restarting: retry
                    failures += 1
                    log.warning(
                        "realtime catch-up of community %s failed: %r", stream.community_id, exc
                    )
                    await asyncio.sleep(_backoff(settings, failures))
                    continue
                failures = 0
                for row in rows:
                    if row.id > stream.position:
                        early = stream.pending.pop(row.id, None)
                        self._dispatch(stream, early if early is not None else encode(row))
                if len(rows) < settings.catch_up_page and stream.position < target:
                    stream.position = target  # the rest of the range was pruned
                self._drain(stream)
        finally:
            stream.catch_up = None

    async def _resync(self, community_ids: Iterable[int], delay: float) -> None:
        """Compare positions with the committed counters; catch up where behind."""
        ids = [cid for cid in community_ids if cid in self._streams]
        if not ids:
            return
        async with self._pool.acquire() as conn:
            last = await store.last_event_ids(conn, ids)
        for cid, last_id in last.items():
            stream = self._streams.get(cid)
            if stream is not None and stream.ready.done() and not stream.ready.cancelled():
                self._want(stream, last_id, delay)

    async def _open(self, stream: _Stream) -> None:
        cid = stream.community_id
        try:
            await self._acquire_remote(cid)
            async with self._pool.acquire() as conn:
                last = await store.last_event_id(conn, cid)
        except BaseException as exc:
            if self._streams.get(cid) is stream:
                del self._streams[cid]
                self._release_remote(cid)
            if isinstance(exc, asyncio.CancelledError):
                stream.ready.cancel()
                raise
            log.warning("realtime stream of community %s failed to open: %r", cid, exc)
            stream.ready.set_exception(exc)
            return
        stream.position = last
        stream.ready.set_result(None)
        self._drain(stream)
        if stream.pending:
            self._want(stream, max(stream.pending), self._settings.gap_timeout)
        elif stream.target > stream.position:
            self._want(stream, stream.target, self._settings.gap_timeout)

    # -- maintenance -----------------------------------------------------------------------

    async def _maintain(self) -> None:
        loop = asyncio.get_running_loop()
        settings = self._settings
        last_resync = loop.time()
        while True:
            await asyncio.sleep(settings.maintenance_tick)
            now = loop.time()
            await self._flush_remote()
            for stream in list(self._streams.values()):
                if (
                    stream.idle_since is not None
                    and not stream.subscribers
                    and now - stream.idle_since >= settings.linger
                ):
                    self._drop(stream)
            interval = (
                settings.degraded_poll_interval if self._degraded() else settings.resync_interval
            )
            if now - last_resync >= interval:
                last_resync = now
                try:
                    await self._resync(list(self._streams), settings.gap_timeout)
                except DatabaseUnavailable:
                    pass  # the pool logs the outage once; the next tick tries again
                except Exception as exc:  # keep the loop alive whatever happened
                    log.warning("realtime resync failed: %r", exc)

    def _drop(self, stream: _Stream) -> None:
        del self._streams[stream.community_id]
        if stream.catch_up is not None:
            stream.catch_up.cancel()
        self._release_remote(stream.community_id)

    def _degraded(self) -> bool:
        return False

    # -- transport hooks -------------------------------------------------------------------

    async def _stop_transport(self) -> None:
        """Interrupt the transport's reader so that close() is prompt."""

    async def _acquire_remote(self, community_id: int) -> None:
        """Start receiving the community's events from other processes."""

    def _release_remote(self, community_id: int) -> None:
        """Stop receiving them (the stream is already gone from `_streams`)."""

    # -- helpers ---------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("realtime hub task failed", exc_info=task.exception())


class LocalHub(Hub):
    """A single process, no Redis: publish() feeds the local streams directly.

    It still needs the pool: two requests may publish in the other order than they committed,
    or one may die between commit and publish, and the stream then reads the hole from SQL.
    """


class RedisHub(Hub):
    """Many processes: one Redis pub/sub connection per process, one channel per community."""

    def __init__(
        self, pool: asyncpg.Pool, redis_url: str, settings: HubSettings | None = None,
        *, health: RedisHealth | None = None,
    ) -> None:
        super().__init__(pool, settings)
        self._redis_url = redis_url
        # shared with the app's other Redis users: one outage, one pair of log lines
        self._health = health or RedisHealth()
        # events not yet published because Redis was away (oldest dropped past the bound:
        # the receivers' resync covers those)
        self._unpublished: deque[EncodedEvent] = deque(maxlen=UNPUBLISHED_KEPT)
        self._publisher: aioredis.Redis | None = None
        self._sub_client: aioredis.Redis | None = None
        self._pubsub: Any = None  # redis.asyncio.client.PubSub of the live connection
        self._subscribed: set[int] = set()  # communities subscribed on that connection
        self._sub_lock = asyncio.Lock()
        self._confirmed: set[int] = set()  # SUBSCRIBE acknowledged on that connection
        self._confirm_waiters: dict[int, asyncio.Future[None]] = {}
        self._resync_ids: set[int] = set()
        self._resync_task: asyncio.Task[None] | None = None
        self._connected = False
        self.client_name = f"commons-realtime-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        """CLIENT SETNAME of the pub/sub connection, to find it in CLIENT LIST."""

    async def start(self) -> None:
        self._publisher = redis_client(self._redis_url, timeout=self._settings.redis_timeout)
        # No hidden retries on the subscriber: a failure must surface so that the hub
        # resubscribes and catches up, instead of silently reconnecting having missed messages.
        self._sub_client = aioredis.Redis.from_url(
            self._redis_url,
            retry=Retry(NoBackoff(), 0),
            socket_connect_timeout=5,
            socket_keepalive=True,
            client_name=self.client_name,
        )
        self._spawn(self._run())
        await super().start()

    async def _stop_transport(self) -> None:
        pubsub = self._pubsub
        if pubsub is not None and pubsub.connection is not None:
            # Breaks the reader's pending read at once instead of at its next timeout.
            with contextlib.suppress(Exception):
                await pubsub.connection.disconnect(nowait=True)

    async def close(self) -> None:
        if self._closed:
            return
        await super().close()
        for client in (self._publisher, self._sub_client):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.aclose()

    @property
    def connected(self) -> bool:
        return self._connected

    def _channel(self, community_id: int) -> str:
        return f"{self._settings.channel_prefix}{community_id}"

    def _degraded(self) -> bool:
        # A hung Redis may keep the subscription looking connected while publishes time out:
        # poll PostgreSQL then too.
        return not self._connected or self._health.down

    async def _publish_remote(self, events: Sequence[EncodedEvent]) -> None:
        """Publish, or keep the events for later while Redis is away. Other processes catch up
        from PostgreSQL meanwhile when they notice (their subscription drops, or the 30 s
        resync), and the kept events are sent as soon as Redis answers again: a process whose
        subscription never noticed the outage (a short freeze) gets them within seconds."""
        assert self._publisher is not None, "RedisHub.start() was not called"
        self._unpublished.extend(events)
        if not self._health.available():
            return
        batch, self._unpublished = self._unpublished, deque(maxlen=UNPUBLISHED_KEPT)
        try:
            async with self._publisher.pipeline(transaction=False) as pipe:
                for event in batch:
                    pipe.publish(self._channel(event.community_id), to_wire(event))
                await pipe.execute()
        except REDIS_FAILURES as exc:
            self._health.failed(exc)
            log.debug("realtime publish to Redis failed: %r", exc)
            batch.extend(self._unpublished)  # kept in id order, newest last
            self._unpublished = batch
            return
        self._health.answered()

    async def _flush_remote(self) -> None:
        if self._unpublished and self._publisher is not None:
            await self._publish_remote(())

    async def _acquire_remote(self, community_id: int) -> None:
        await self._reconcile()
        if not self._connected or community_id in self._confirmed:
            return
        # Wait until Redis has the subscription, so that reading the counter next gives a
        # position after which every publish reaches us. If Redis is slow or down, go on: the
        # resync after the confirmation (or the degraded poll) covers the window.
        waiter = self._confirm_waiters.get(community_id)
        if waiter is None:
            waiter = asyncio.get_running_loop().create_future()
            self._confirm_waiters[community_id] = waiter
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._settings.subscribe_timeout):
                await asyncio.shield(waiter)

    def _release_remote(self, community_id: int) -> None:
        if not self._closed:
            self._spawn(self._reconcile())

    async def _reconcile(self) -> None:
        """Make the live connection's subscriptions match the streams (serialized)."""
        async with self._sub_lock:
            pubsub = self._pubsub
            if pubsub is None:
                return
            wanted = set(self._streams)
            extra = self._subscribed - wanted
            missing = wanted - self._subscribed
            try:
                if extra:
                    self._confirmed -= extra
                    await pubsub.unsubscribe(*(self._channel(c) for c in extra))
                if missing:
                    await pubsub.subscribe(*(self._channel(c) for c in missing))
            except (RedisError, OSError) as exc:
                log.warning("realtime Redis (un)subscribe failed: %r", exc)
                return  # the reader notices the broken connection and starts over
            self._subscribed = wanted

    async def _run(self) -> None:
        """Own the pub/sub connection for the hub's lifetime: connect, read, reconnect."""
        assert self._sub_client is not None
        failures = 0
        connected_before = False
        while not self._closed:
            pubsub = self._sub_client.pubsub()
            try:
                await pubsub.connect()
                async with self._sub_lock:
                    self._pubsub = pubsub
                    self._subscribed = set()
                    self._confirmed = set()
                self._connected = True
                self._health.answered()
                if failures:
                    log.info("realtime Redis subscription restored")
                if connected_before:
                    metrics.REDIS_RECONNECTS.inc()
                connected_before = True
                await self._reconcile()
                failures = 0
                await self._read(pubsub)
            except (RedisError, OSError) as exc:
                # once per outage (the health logs it), not once per reconnect attempt
                if failures == 0:
                    log.info("realtime Redis subscription lost: %r", exc)
                self._health.failed(exc)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("realtime Redis reader failed")
            finally:
                self._connected = False
                self._pubsub = None
                self._subscribed = set()
                self._confirmed = set()
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
            failures += 1
            if not self._closed:
                await asyncio.sleep(_backoff(self._settings, failures))

    async def _read(self, pubsub: Any) -> None:
        loop = asyncio.get_running_loop()
        interval = self._settings.redis_ping_interval
        prefix = len(self._settings.channel_prefix)
        last_heard = loop.time()
        while not self._closed:
            message = await pubsub.get_message(timeout=interval)
            if message is None:
                if loop.time() - last_heard > 3 * interval:
                    raise ConnectionError("Redis pub/sub connection stopped answering pings")
                await pubsub.ping()
                continue
            last_heard = loop.time()
            kind = message["type"]
            if kind == "message":
                try:
                    event = from_wire(int(message["channel"][prefix:]), message["data"])
                except ValueError:
                    log.warning("realtime: ignoring a malformed message on %r", message["channel"])
                    continue
                self._feed(event)
            elif kind == "subscribe":
                self._subscribed_to(int(message["channel"][prefix:]))

    def _subscribed_to(self, community_id: int) -> None:
        self._confirmed.add(community_id)
        waiter = self._confirm_waiters.pop(community_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        stream = self._streams.get(community_id)
        if stream is not None and stream.ready.done():
            # (Re)subscribed on a new connection: read whatever was missed meanwhile.
            self._resync_ids.add(community_id)
            if self._resync_task is None:
                self._resync_task = self._spawn(self._resync_subscribed())

    async def _resync_subscribed(self) -> None:
        try:
            await asyncio.sleep(0)  # gather the confirmations of one SUBSCRIBE
            failures = 0
            while self._resync_ids:
                ids, self._resync_ids = self._resync_ids, set()
                try:
                    await self._resync(ids, 0)
                except Exception as exc:
                    log.warning("realtime resync after resubscribe failed: %r", exc)
                    self._resync_ids |= ids
                    failures += 1
                    await asyncio.sleep(_backoff(self._settings, failures))
        finally:
            self._resync_task = None


def _backoff(settings: HubSettings, failures: int) -> float:
    delay = min(settings.reconnect_max, settings.reconnect_min * 2 ** min(failures, 16))
    return delay * (0.5 + random.random() / 2)  # jitter, not crypto
