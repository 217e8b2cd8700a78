"""Redis clients with short timeouts, and the health of Redis as the app sees it.

Redis is shared plumbing (rate limits, the realtime fast path, the shared verified-credentials
cache) that REST goes on without: every caller has a process-local fallback. A Redis that
refuses connections fails fast by itself, but a hung one (frozen, a black-holed network) would
make every call wait for TCP, so:

- `redis_client` sets `socket_timeout` / `socket_connect_timeout` (COMMONS_REDIS_TIMEOUT_SECONDS,
  0.5 s by default) and never retries a timeout: one short wait, then the fallback. A dropped
  connection is retried once at once (a pooled connection from before a Redis restart).
- `RedisHealth` (one per app) is what callers ask first. After a failure it lets one call per
  `retry_interval` try Redis again and sends the others straight to their fallback, so that a
  frozen Redis costs one timeout a second instead of one per request; and it logs one line when
  an outage starts and one when it ends, instead of a WARNING per call.
"""

from __future__ import annotations

import time
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError, RedisError

from storage.availability import Outage

DEFAULT_TIMEOUT = 0.5
# Whatever a Redis call raises when Redis is away: its own errors (ConnectionError, TimeoutError
# and the rest) and the OS ones redis-py lets through.
REDIS_FAILURES: tuple[type[BaseException], ...] = (RedisError, OSError, TimeoutError)


def redis_client(
    url: str, *, timeout: float = DEFAULT_TIMEOUT, max_connections: int = 50, **kwargs: Any
) -> Redis:
    """A client on a blocking pool (a burst waits for a free connection rather than failing)
    whose every call gives up after `timeout` seconds, without retrying."""
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=max(timeout, 0.1) * 4,  # waiting for a free connection
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 1, supported_errors=(ConnectionError,)),
        **kwargs,
    )
    return Redis.from_pool(pool)


class RedisHealth:
    """Whether to try Redis now, and the outage log lines."""

    def __init__(self, retry_interval: float = 1.0) -> None:
        self.retry_interval = retry_interval
        self.outage = Outage("Redis")
        self._next_try = 0.0

    @property
    def down(self) -> bool:
        return self.outage.down

    def available(self) -> bool:
        """True when a call should go to Redis: always while it is up, and once per
        `retry_interval` while it is down (that call finds out whether it is back)."""
        if not self.outage.down:
            return True
        now = time.monotonic()
        if now < self._next_try:
            return False
        self._next_try = now + self.retry_interval
        return True

    def failed(self, exc: BaseException) -> None:
        self._next_try = time.monotonic() + self.retry_interval
        self.outage.failed(
            exc, "rate limits are counted per process, realtime events reach other "
            "processes through PostgreSQL and password logins new to this process cost a full "
            "hash until it is back"
        )

    def answered(self) -> None:
        self.outage.answered()
