"""Resolving the community of a request from its host name, with a short cache.

Exact domain matches are cached for a few seconds (communities are not renamed through the
API); the single-community fallback is never cached, so adding a second community takes
effect at once.
"""

from __future__ import annotations

import time

import asyncpg

from storage import communities
from storage.communities import Community

TTL_SECONDS = 30.0


class CommunityResolver:
    def __init__(self, pool: asyncpg.Pool, ttl: float = TTL_SECONDS) -> None:
        self._pool = pool
        self._ttl = ttl
        self._cache: dict[str, tuple[float, Community]] = {}

    async def for_host(self, host: str) -> Community | None:
        key = host.lower()
        hit = self._cache.get(key)
        now = time.monotonic()
        if hit is not None and hit[0] > now:
            return hit[1]
        found = await communities.for_host(self._pool, key)
        if found is None:
            return None
        community, exact = found
        if exact:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (now + self._ttl, community)
        return community
