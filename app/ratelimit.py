"""Fixed-window rate limits: in Redis when there is one (shared by every process), else here.

`hit(key, limit)` counts one event in the current minute and returns the seconds to wait when
the count is over the limit; `peek` only reads.

While Redis cannot be reached, `RedisRateLimiter` counts in the process instead (each process
then allows the limit on its own) rather than failing every request: Redis is shared plumbing
the API keeps working without, as the realtime hub does. A hung Redis costs at most the client's
short timeout, and only once per retry interval (storage.redis.RedisHealth).
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from redis.asyncio import Redis

from storage.redis import REDIS_FAILURES, RedisHealth

WINDOW = 60
MAX_PIPELINE = 1000  # commands of one batch, at most


class RedisUnavailable(Exception):
    """Redis did not answer a batch (RedisHealth has been told)."""


class RateLimiter(Protocol):
    async def hit(self, key: str, limit: int, window: int = WINDOW) -> int | None: ...

    async def peek(self, key: str, limit: int, window: int = WINDOW) -> int | None: ...


def _window(window: int) -> tuple[int, int]:
    now = time.time()
    start = int(now // window) * window
    return start, max(1, int(start + window - now + 0.999))


class RedisRateLimiter:
    """Counts and reads made in the same turn of the event loop (a reconnect storm: thousands
    of requests at once) go to Redis in one pipeline instead of one round trip each."""

    def __init__(self, redis: Redis, prefix: str, health: RedisHealth | None = None) -> None:
        self._redis = redis
        self._prefix = prefix
        self._fallback = MemoryRateLimiter()
        self._health = health or RedisHealth()
        # (rkey, window: a hit; None: a peek, its answer)
        self._pending: list[tuple[str, int | None, asyncio.Future[int | None]]] = []
        self._sending: asyncio.Task[None] | None = None

    def _key(self, key: str, window: int) -> tuple[str, int]:
        start, remaining = _window(window)
        return f"{self._prefix}:rl:{key}:{start}", remaining

    async def _ask(self, rkey: str, window: int | None) -> int | None:
        """The count after the hit (window given) or the count read (None); raises
        RedisUnavailable when Redis could not answer."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[int | None] = loop.create_future()
        self._pending.append((rkey, window, answer))
        if self._sending is None:
            self._sending = loop.create_task(self._send())
        return await answer

    async def _send(self) -> None:
        try:
            await asyncio.sleep(0)  # every call of this turn joins
            while self._pending:
                batch, self._pending = self._pending[:MAX_PIPELINE], self._pending[MAX_PIPELINE:]
                try:
                    async with self._redis.pipeline(transaction=False) as pipe:
                        for rkey, window, _ in batch:
                            if window is None:
                                pipe.get(rkey)
                            else:
                                pipe.incr(rkey)
                                pipe.expire(rkey, window + 1, nx=True)
                        replies = iter(await pipe.execute())
                except REDIS_FAILURES as exc:
                    self._health.failed(exc)
                    for _, _, answer in batch:
                        if not answer.done():
                            answer.set_exception(RedisUnavailable())
                            answer.exception()  # retrieved even if its caller went away
                    continue
                self._health.answered()
                for _, window, answer in batch:
                    value = next(replies)
                    if window is not None:
                        next(replies)  # EXPIRE's
                    if not answer.done():
                        answer.set_result(None if value is None else int(value))
        finally:
            self._sending = None
            for _, _, answer in self._pending:  # cancelled (shutdown)
                answer.cancel()
            self._pending = []

    async def hit(self, key: str, limit: int, window: int = WINDOW) -> int | None:
        if not self._health.available():
            return await self._fallback.hit(key, limit, window)
        rkey, remaining = self._key(key, window)
        try:
            count = await self._ask(rkey, window)
        except RedisUnavailable:
            return await self._fallback.hit(key, limit, window)
        return remaining if count is not None and count > limit else None

    async def peek(self, key: str, limit: int, window: int = WINDOW) -> int | None:
        if not self._health.available():
            return await self._fallback.peek(key, limit, window)
        rkey, remaining = self._key(key, window)
        try:
            count = await self._ask(rkey, None)
        except RedisUnavailable:
            return await self._fallback.peek(key, limit, window)
        return remaining if count is not None and count >= limit else None


class MemoryRateLimiter:
    """Single-process fallback; old windows are dropped as new ones start."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, int], int] = {}
        self._current = 0

    def _slot(self, key: str, window: int) -> tuple[tuple[str, int], int]:
        start, remaining = _window(window)
        if start != self._current:
            self._counts = {k: v for k, v in self._counts.items() if k[1] >= start}
            self._current = start
        return (key, start), remaining

    async def hit(self, key: str, limit: int, window: int = WINDOW) -> int | None:
        slot, remaining = self._slot(key, window)
        self._counts[slot] = self._counts.get(slot, 0) + 1
        return remaining if self._counts[slot] > limit else None

    async def peek(self, key: str, limit: int, window: int = WINDOW) -> int | None:
        slot, remaining = self._slot(key, window)
        return remaining if self._counts.get(slot, 0) >= limit else None
