"""Lookups that many requests make at once, answered by one query per batch.

A reconnect storm is thousands of sockets connecting in the same second, each needing the
same kinds of rows (its user by login, its channels). One query each would queue them behind
the pool's few connections; instead the lookups made in the same turn of the event loop are
collected and answered by one query (`Batcher`), and a lookup alone costs what it did. The
rows read are never older than a query of one's own made at the moment of asking: the batch
runs after every lookup in it was asked for.

`Lookups` holds one process's batchers over its pool (app/main.py makes it).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Generic, TypeVar

import asyncpg

from storage import realtime_channels, users

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

MAX_BATCH = 500


class Batcher(Generic[K, V]):
    """`get(key)`: the value `load` gives for it, `load` called once for every key asked for
    in the same turn of the event loop (at most `max_batch` keys a call). A key `load` leaves
    out is None; an exception of `load` is raised to every caller of that batch."""

    def __init__(
        self, load: Callable[[list[K]], Awaitable[Mapping[K, V]]], max_batch: int = MAX_BATCH
    ) -> None:
        self._load = load
        self._max_batch = max_batch
        # each caller's own future (cheaper than a shared one shielded): one that goes away
        # cancels only its own
        self._waiting: dict[K, list[asyncio.Future[V | None]]] = {}
        self._running: asyncio.Task[None] | None = None

    async def get(self, key: K) -> V | None:
        loop = asyncio.get_running_loop()
        mine: asyncio.Future[V | None] = loop.create_future()
        waiting = self._waiting.get(key)
        if waiting is None:
            self._waiting[key] = [mine]
            if self._running is None:
                self._running = loop.create_task(self._run())
        else:
            waiting.append(mine)
        return await mine

    async def _run(self) -> None:
        try:
            await asyncio.sleep(0)  # every lookup of this turn joins
            while self._waiting:
                keys = list(self._waiting)[: self._max_batch]
                batch = {k: self._waiting.pop(k) for k in keys}
                try:
                    found = await self._load(keys)
                except Exception as exc:
                    for futures in batch.values():
                        for future in futures:
                            if not future.done():
                                future.set_exception(exc)
                    continue
                for key, futures in batch.items():
                    value = found.get(key)
                    for future in futures:
                        if not future.done():
                            future.set_result(value)
        finally:
            self._running = None
            for futures in self._waiting.values():  # cancelled (shutdown)
                for future in futures:
                    future.cancel()
            self._waiting.clear()


def by_community(keys: list[tuple[int, K]]) -> dict[int, list[K]]:
    grouped: dict[int, list[K]] = defaultdict(list)
    for community_id, key in keys:
        grouped[community_id].append(key)
    return grouped


class Lookups:
    """One process's batched lookups over its pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._logins: Batcher[tuple[int, str], asyncpg.Record] = Batcher(self._load_logins)
        self._sessions: Batcher[tuple[int, int], asyncpg.Record] = Batcher(
            self._load_sessions)
        self._channels: Batcher[tuple[int, int], realtime_channels.ChannelIds | None] = (
            Batcher(self._load_channels)
        )

    async def user_by_login(self, community_id: int, login: str) -> asyncpg.Record | None:
        """`users.by_login`, batched."""
        return await self._logins.get((community_id, login))

    async def user_by_session(self, community_id: int, user_id: int) -> asyncpg.Record | None:
        """`users.by_session` (the user a session cookie names), batched."""
        return await self._sessions.get((community_id, user_id))

    async def channel_ids_if_active(
        self, community_id: int, user_id: int
    ) -> realtime_channels.ChannelIds | None:
        """`realtime_channels.channel_ids_if_active`, batched."""
        return await self._channels.get((community_id, user_id))

    async def _per_community(
        self, keys: list[tuple[int, K]],
        read: Callable[[asyncpg.Pool, int, list[K]], Awaitable[Mapping[K, V]]],
    ) -> dict[tuple[int, K], V]:
        """`read(pool, community_id, keys of that community)` for each community asked."""
        found: dict[tuple[int, K], V] = {}
        for community_id, wanted in by_community(keys).items():
            rows = await read(self._pool, community_id, wanted)
            found.update({(community_id, key): row for key, row in rows.items()})
        return found

    async def _load_logins(
        self, keys: list[tuple[int, str]]
    ) -> dict[tuple[int, str], asyncpg.Record]:
        return await self._per_community(keys, users.by_logins)

    async def _load_sessions(
        self, keys: list[tuple[int, int]]
    ) -> dict[tuple[int, int], asyncpg.Record]:
        return await self._per_community(keys, users.by_sessions)

    async def _load_channels(
        self, keys: list[tuple[int, int]]
    ) -> dict[tuple[int, int], realtime_channels.ChannelIds | None]:
        return await self._per_community(keys, realtime_channels.channel_ids_if_active_many)
