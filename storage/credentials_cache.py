"""The verified-credentials cache shared by every process, in Redis (app/passwords.py).

Keys are `<prefix>:cred:<hex digest>`, where the digest is a keyed MAC the caller computed
(never a password, never an unkeyed hash of one); the value is `1`, with a TTL. Reading Redis
therefore tells nothing about any password, and writing it cannot forge an entry that any
process would ever look up (docs/decisions.md "Shared verified-credentials cache").

Lookups made in the same turn of the event loop (a reconnect storm: thousands of Basic logins
at once) go to Redis as one MGET, and new entries as one script call (storage.batch.Batcher
for both).
Redis away or hung: every answer is "not known" after at most one short timeout
(storage/redis.py), and the caller verifies the password itself.
"""

from __future__ import annotations

from redis.asyncio import Redis

from storage.batch import Batcher
from storage.redis import REDIS_FAILURES, RedisHealth

# Lookups waiting for the next MGET (entries for the next write), at most this many per command.
MAX_BATCH = 1000

# Every key of a batch set to 1 with the TTL ARGV[1]: one command to encode and one reply to
# parse, where a pipeline of SETs costs redis-py's pure-Python RESP code five arguments and a
# reply each (measured: a few % of the servers' CPU in a cold storm).
REMEMBER_SCRIPT = """
for _, key in ipairs(KEYS) do
  redis.call('SET', key, '1', 'EX', ARGV[1])
end
return #KEYS
"""


class CredentialsCache:
    def __init__(
        self, redis: Redis, prefix: str, health: RedisHealth, ttl_seconds: int
    ) -> None:
        self._redis = redis
        self._prefix = f"{prefix}:cred:"
        self._health = health
        self.ttl_seconds = ttl_seconds
        self._lookups: Batcher[str, bool] = Batcher(self._load, max_batch=MAX_BATCH)
        self._writes: Batcher[str, None] = Batcher(self._write, max_batch=MAX_BATCH)
        self._set_all = redis.register_script(REMEMBER_SCRIPT)  # loads itself on NOSCRIPT

    def key(self, digest: bytes) -> str:
        return self._prefix + digest.hex()

    async def known(self, digest: bytes) -> bool | None:
        """Whether these credentials were verified by any process within the TTL; None when
        Redis did not answer (or is known to be away)."""
        if not self._health.available():
            return None
        return await self._lookups.get(self.key(digest))

    async def _load(self, keys: list[str]) -> dict[str, bool]:
        """Whether Redis has each key; nothing (every answer None) when it did not answer."""
        found = await self._mget(keys)
        return {} if found is None else {k: k in found for k in keys}

    async def _mget(self, keys: list[str]) -> set[str] | None:
        """The keys Redis has; None when it did not answer."""
        if not self._health.available():
            return None
        try:
            values = await self._redis.mget(keys)
        except REDIS_FAILURES as exc:
            self._health.failed(exc)
            return None
        self._health.answered()
        return {k for k, v in zip(keys, values, strict=True) if v is not None}

    async def remember(self, digest: bytes) -> None:
        """Mark these credentials verified for every process, for the TTL. Marks of the same
        turn of the event loop (a cold storm) go in one call."""
        if self.ttl_seconds <= 0 or not self._health.available():
            return
        await self._writes.get(self.key(digest))

    async def _write(self, keys: list[str]) -> dict[str, None]:
        try:
            await self._set_all(keys=keys, args=[self.ttl_seconds])
        except REDIS_FAILURES as exc:
            self._health.failed(exc)
        else:
            self._health.answered()
        return {}
