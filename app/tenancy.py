"""Resolving the community of a request from its host name, with a short cache.

Exact domain matches are cached for a few seconds (communities are not renamed through the
API); the single-community fallback is never cached, so adding a second community takes
effect at once. The requests that miss the cache in the same turn of the event loop (a fresh
process, or an entry expiring under a reconnect storm) share one lookup per host
(storage.batch.Batcher) instead of each running its own query.
"""

from __future__ import annotations

import time

import asyncpg

from storage import communities
from storage.batch import Batcher
from storage.communities import Community

TTL_SECONDS = 30.0


class CommunityResolver:
    def __init__(self, pool: asyncpg.Pool, ttl: float = TTL_SECONDS) -> None:
        self._pool = pool
        self._ttl = ttl
        self._cache: dict[str, tuple[float, Community]] = {}
        self._lookups: Batcher[str, tuple[Community, bool]] = Batcher(self._load)

    async def _load(self, hosts: list[str]) -> dict[str, tuple[Community, bool]]:
        found: dict[str, tuple[Community, bool]] = {}
        for host in hosts:  # the hosts of one turn: usually one
            row = await communities.for_host(self._pool, host)
            if row is not None:
                found[host] = row
        return found

    async def for_host(self, host: str) -> Community | None:
        key = host.lower()
        hit = self._cache.get(key)
        now = time.monotonic()
        if hit is not None and hit[0] > now:
            return hit[1]
        found = await self._lookups.get(key)
        if found is None:
            return None
        community, exact = found
        if exact:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (now + self._ttl, community)
        return community
