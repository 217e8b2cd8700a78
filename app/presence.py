"""Who is online: a user with a live realtime connection (GET /api/realtime) seen within the
last PRESENCE_SECONDS. Read by `GET /api/groups/:id/members?send_user_presence=true`.

Each process keeps a count of its open sockets per (community, user) (`hold` / `release`): a
user is marked seen when their first socket there is accepted, and one task per process marks
every held user again every REFRESH_SECONDS, in one write (one Redis pipeline), instead of a
task per socket (its coroutine, timer and future cost every idle socket memory). The marks
live in Redis when there is one (a sorted set per community, score = last seen, so every
process sees every socket), else in the process. As with the rate limits, a Redis that cannot
be reached falls back to the process's own marks rather than failing the request. A closed
socket is not unmarked (another socket of the same user may be open on another process): its
user reads as online until the mark ages out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Protocol

from redis.asyncio import Redis

from storage.redis import REDIS_FAILURES, RedisHealth

PRESENCE_SECONDS = 60
REFRESH_SECONDS = 20


class Presence(Protocol):
    async def seen(self, community_id: int, user_id: int) -> None: ...

    async def online(self, community_id: int, user_ids: Sequence[int]) -> set[int]: ...

    def hold(self, community_id: int, user_id: int) -> None:
        """A socket of the user was accepted: online (marked at once) until `release`."""

    def release(self, community_id: int, user_id: int) -> None:
        """That socket closed: its user ages out once no socket of theirs holds them."""


Mark = tuple[int, int]  # (community_id, user_id)


class _Held:
    """The users held online by this process's sockets, refreshed by one task."""

    def __init__(self) -> None:
        self._held: dict[Mark, int] = {}  # -> sockets open on this process
        self._refresher: asyncio.Task[None] | None = None

    def _mark(self, marks: list[Mark]) -> None:
        raise NotImplementedError

    def hold(self, community_id: int, user_id: int) -> None:
        key = (community_id, user_id)
        count = self._held.get(key, 0)
        self._held[key] = count + 1
        if not count:
            self._mark([key])  # online from when the socket is accepted
        if self._refresher is None:
            self._refresher = asyncio.get_running_loop().create_task(self._refresh())

    def release(self, community_id: int, user_id: int) -> None:
        key = (community_id, user_id)
        count = self._held.pop(key, 0) - 1
        if count > 0:
            self._held[key] = count
        if not self._held and self._refresher is not None:
            # nothing left to refresh (and nothing left pending when the app stops)
            self._refresher.cancel()
            self._refresher = None

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_SECONDS)
            self._mark(list(self._held))


class MemoryPresence(_Held):
    def __init__(self) -> None:
        super().__init__()
        self._seen: dict[Mark, float] = {}

    async def seen(self, community_id: int, user_id: int) -> None:
        self._mark([(community_id, user_id)])

    def _mark(self, marks: list[Mark]) -> None:
        now = time.time()
        if len(self._seen) > 100_000:  # bounded: drop what has aged out
            self._seen = {k: t for k, t in self._seen.items() if t > now - PRESENCE_SECONDS}
        for key in marks:
            self._seen[key] = now

    async def online(self, community_id: int, user_ids: Sequence[int]) -> set[int]:
        since = time.time() - PRESENCE_SECONDS
        return {u for u in user_ids if self._seen.get((community_id, u), 0.0) > since}


class RedisPresence(_Held):
    """Marks made in the same turn of the event loop (a reconnect storm: thousands of sockets
    starting at once; the refresh of every held user) go to Redis in one pipeline."""

    def __init__(self, redis: Redis, prefix: str, health: RedisHealth | None = None) -> None:
        super().__init__()
        self._redis = redis
        self._prefix = prefix
        self._fallback = MemoryPresence()
        self._health = health or RedisHealth()
        self._marks: dict[Mark, None] = {}  # waiting for the next pipeline
        self._writing: asyncio.Task[None] | None = None
        self._in_flight: set[asyncio.Task[None]] = set()

    def _key(self, community_id: int) -> str:
        return f"{self._prefix}:presence:{community_id}"

    async def seen(self, community_id: int, user_id: int) -> None:
        self._mark([(community_id, user_id)])
        if self._writing is not None:
            await asyncio.shield(self._writing)

    def _mark(self, marks: list[Mark]) -> None:
        """Queue `marks` for the next pipeline (this turn's), without waiting for it."""
        self._fallback._mark(marks)
        if not self._health.available():
            return
        self._marks.update(dict.fromkeys(marks))
        if self._writing is None:
            self._writing = asyncio.get_running_loop().create_task(self._write())
            # kept until done: nobody may be awaiting it (hold, the refresher)
            self._in_flight.add(self._writing)
            self._writing.add_done_callback(self._in_flight.discard)

    async def _write(self) -> None:
        await asyncio.sleep(0)  # every mark of this turn joins
        marks, self._marks, self._writing = self._marks, {}, None
        now = time.time()
        seen: dict[int, dict[str, float]] = {}
        for community_id, user_id in marks:
            seen.setdefault(community_id, {})[str(user_id)] = now
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for community_id, users in seen.items():
                    key = self._key(community_id)
                    pipe.zadd(key, users)
                    # keep the set to who was seen lately
                    pipe.zremrangebyscore(key, "-inf", now - PRESENCE_SECONDS)
                    pipe.expire(key, PRESENCE_SECONDS * 2)
                await pipe.execute()
        except REDIS_FAILURES as exc:
            self._health.failed(exc)
            return
        self._health.answered()

    async def online(self, community_id: int, user_ids: Sequence[int]) -> set[int]:
        if not user_ids:
            return set()
        if not self._health.available():
            return await self._fallback.online(community_id, user_ids)
        try:
            scores = await self._redis.zmscore(self._key(community_id),
                                               [str(u) for u in user_ids])
        except REDIS_FAILURES as exc:
            self._health.failed(exc)
            return await self._fallback.online(community_id, user_ids)
        self._health.answered()
        since = time.time() - PRESENCE_SECONDS
        return {u for u, score in zip(user_ids, scores, strict=True)
                if score is not None and score > since}
