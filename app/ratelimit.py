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
MAX_BATCH = 1000  # counters of one script call, at most


class RedisUnavailable(Exception):
    """Redis did not answer a batch (RedisHealth has been told)."""


class RateLimiter(Protocol):
    async def hit(self, key: str, limit: int, window: int = WINDOW) -> int | None: ...

    async def peek(self, key: str, limit: int, window: int = WINDOW) -> int | None: ...


def _window(window: int) -> tuple[int, int]:
    now = time.time()
    start = int(now // window) * window
    return start, max(1, int(start + window - now + 0.999))


# One call for a whole batch. KEYS are the counters; ARGV[1] lists, space-separated, the TTL
# a hit gives each (its window + 1 s), or 0 for a read. The answer is each count after the
# hit, or as read (-1: none), also space-separated: one string to encode and one to parse
# per batch, where an argument or an array element each cost redis-py's pure-Python RESP
# code a call (measured: most of the limiter's CPU). Atomic, so a counter never lives without
# its TTL; the TTL is set only when it has none (EXPIRE NX's meaning, which Redis 6.2 lacks),
# so that later hits do not move the window's end.
COUNT_SCRIPT = """
local counts = {}
local i = 0
for ttl in string.gmatch(ARGV[1], '%d+') do
  i = i + 1
  local key = KEYS[i]
  if ttl == '0' then
    counts[i] = redis.call('GET', key) or '-1'
  else
    counts[i] = redis.call('INCR', key)
    if redis.call('TTL', key) == -1 then
      redis.call('EXPIRE', key, ttl)
    end
  end
end
return table.concat(counts, ' ')
"""


class RedisRateLimiter:
    """Counts and reads made in the same turn of the event loop (a reconnect storm: thousands
    of requests at once) go to Redis as one script call (EVALSHA, COUNT_SCRIPT) instead of a
    round trip, or a pipeline of INCR + EXPIRE, each."""

    def __init__(self, redis: Redis, prefix: str, health: RedisHealth | None = None) -> None:
        self._redis = redis
        self._prefix = prefix
        self._fallback = MemoryRateLimiter()
        self._health = health or RedisHealth()
        self._script = redis.register_script(COUNT_SCRIPT)  # loads itself on NOSCRIPT
        # (rkey, TTL of a hit or 0 for a read, its answer)
        self._pending: list[tuple[str, int, asyncio.Future[int | None]]] = []
        self._sending: asyncio.Task[None] | None = None

    def _key(self, key: str, window: int) -> tuple[str, int]:
        start, remaining = _window(window)
        return f"{self._prefix}:rl:{key}:{start}", remaining

    async def _ask(self, rkey: str, ttl: int) -> int | None:
        """The count after a hit (ttl > 0: the counter's TTL if new) or the count read (ttl
        0; None when there is none); raises RedisUnavailable when Redis could not answer."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[int | None] = loop.create_future()
        self._pending.append((rkey, ttl, answer))
        if self._sending is None:
            self._sending = loop.create_task(self._send())
        return await answer

    async def _send(self) -> None:
        try:
            await asyncio.sleep(0)  # every call of this turn joins
            while self._pending:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                try:
                    reply = await self._script(
                        keys=[rkey for rkey, _, _ in batch],
                        args=[" ".join([str(ttl) for _, ttl, _ in batch])],
                    )
                except REDIS_FAILURES as exc:
                    self._health.failed(exc)
                    for _, _, answer in batch:
                        if not answer.done():
                            answer.set_exception(RedisUnavailable())
                            answer.exception()  # retrieved even if its caller went away
                    continue
                self._health.answered()
                counts = map(int, reply.split())
                for (_, _, answer), count in zip(batch, counts, strict=True):
                    if not answer.done():
                        answer.set_result(None if count < 0 else count)
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
            count = await self._ask(rkey, window + 1)
        except RedisUnavailable:
            return await self._fallback.hit(key, limit, window)
        return remaining if count is not None and count > limit else None

    async def peek(self, key: str, limit: int, window: int = WINDOW) -> int | None:
        if not self._health.available():
            return await self._fallback.peek(key, limit, window)
        rkey, remaining = self._key(key, window)
        try:
            count = await self._ask(rkey, 0)
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
