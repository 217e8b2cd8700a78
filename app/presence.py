"""Who is online: a user with a live realtime connection (GET /api/realtime) seen within the
last PRESENCE_SECONDS. Read by `GET /api/groups/:id/members?send_user_presence=true`.

Each open socket marks its user seen when it starts and every REFRESH_SECONDS after. The marks
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


class MemoryPresence:
    def __init__(self) -> None:
        self._seen: dict[tuple[int, int], float] = {}

    async def seen(self, community_id: int, user_id: int) -> None:
        now = time.time()
        if len(self._seen) > 100_000:  # bounded: drop what has aged out
            self._seen = {k: t for k, t in self._seen.items() if t > now - PRESENCE_SECONDS}
        self._seen[(community_id, user_id)] = now

    async def online(self, community_id: int, user_ids: Sequence[int]) -> set[int]:
        since = time.time() - PRESENCE_SECONDS
        return {u for u in user_ids if self._seen.get((community_id, u), 0.0) > since}


class RedisPresence:
    """Marks made in the same turn of the event loop (a reconnect storm: thousands of sockets
    starting at once) go to Redis in one pipeline."""

    def __init__(self, redis: Redis, prefix: str, health: RedisHealth | None = None) -> None:
        self._redis = redis
        self._prefix = prefix
        self._fallback = MemoryPresence()
        self._health = health or RedisHealth()
        self._marks: dict[tuple[int, int], None] = {}  # waiting for the next pipeline
        self._writing: asyncio.Task[None] | None = None

    def _key(self, community_id: int) -> str:
        return f"{self._prefix}:presence:{community_id}"

    async def seen(self, community_id: int, user_id: int) -> None:
        await self._fallback.seen(community_id, user_id)
        if not self._health.available():
            return
        self._marks[(community_id, user_id)] = None
        if self._writing is None:
            self._writing = asyncio.get_running_loop().create_task(self._write())
        await asyncio.shield(self._writing)

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
