"""Fixtures for the realtime core: its own throwaway database (only migration 0005, which
stands alone), real Redis, hubs with fast timings, and a tiny aiohttp app that mounts
`serve_realtime` with channels chosen by query parameters."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
from aiohttp import web

from realtime.events import Event, NewEvent
from realtime.hub import Hub, HubSettings, LocalHub, RedisHub
from realtime.websocket import (
    RealtimeConnection,
    RealtimeSettings,
    parse_since,
    serve_realtime,
)
from storage.db import create_pool
from storage.events import append_events

MIGRATION = Path(__file__).resolve().parents[2] / "migrations" / "0006_realtime.sql"
FAST = HubSettings(
    gap_timeout=0.05,
    maintenance_tick=0.05,
    degraded_poll_interval=0.2,
    resync_interval=60.0,
    reconnect_min=0.05,
    reconnect_max=0.2,
    redis_ping_interval=1.0,
    linger=0.2,
)


def _servers() -> tuple[str, str]:
    """Admin DSN and Redis URL: the suite's server finder when present, else the defaults."""
    try:
        from tests.servers import ensure_postgres, ensure_redis
    except ImportError:
        return (
            os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
            os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
        )
    return ensure_postgres(), ensure_redis()


async def _create(admin: str, name: str, dsn: str) -> None:
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(MIGRATION.read_text())
    finally:
        await conn.close()


async def _drop(admin: str, name: str) -> None:
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def rt_servers() -> tuple[str, str]:
    return _servers()


@pytest.fixture(scope="session")
def rt_dsn(rt_servers: tuple[str, str]) -> Iterator[str]:
    admin = rt_servers[0]
    name = f"commons_rt_test_{uuid.uuid4().hex[:10]}"
    dsn = f"{admin.rsplit('/', 1)[0]}/{name}"
    asyncio.run(_create(admin, name, dsn))
    yield dsn
    asyncio.run(_drop(admin, name))


@pytest.fixture(scope="session")
def rt_redis_url(rt_servers: tuple[str, str]) -> str:
    return rt_servers[1]


@pytest_asyncio.fixture
async def rt_pool(rt_dsn: str) -> AsyncIterator[asyncpg.Pool]:
    # the app's own pool (json decoded by orjson): storage must work with it
    pool = await create_pool(rt_dsn, size=20)
    await pool.execute("TRUNCATE realtime_events, realtime_event_counters")
    yield pool
    await pool.close()


HubFactory = Callable[..., Awaitable[Hub]]


@pytest_asyncio.fixture
async def make_hub(rt_pool: asyncpg.Pool, rt_redis_url: str) -> AsyncIterator[HubFactory]:
    """`await make_hub("redis" | "local", **settings)`; Redis hubs of one test share a prefix
    (so they talk to each other) that no other test uses."""
    hubs: list[Hub] = []
    prefix = f"test-rt-{uuid.uuid4().hex[:10]}:"

    async def make(kind: str = "redis", **overrides: Any) -> Hub:
        settings = dataclasses.replace(FAST, channel_prefix=prefix, **overrides)
        hub: Hub = (
            RedisHub(rt_pool, rt_redis_url, settings)
            if kind == "redis"
            else LocalHub(rt_pool, settings)
        )
        await hub.start()
        hubs.append(hub)
        return hub

    yield make
    for hub in hubs:
        await hub.close()


Publish = Callable[..., Awaitable[list[Event]]]


@pytest_asyncio.fixture
async def commit(rt_pool: asyncpg.Pool) -> Publish:
    """`await commit(hub, community_id, NewEvent...)`: store in one transaction, then publish
    (hub None: store only, as if the writer died between commit and publish)."""

    async def run(hub: Hub | None, community_id: int, *events: NewEvent) -> list[Event]:
        async with rt_pool.acquire() as conn, conn.transaction():
            stored = await append_events(conn, community_id, events)
        if hub is not None:
            await hub.publish(stored)
        return stored

    return run


def _realtime_app(
    hub: Hub,
    pool: asyncpg.Pool,
    settings: RealtimeSettings | None = None,
    *,
    before: Callable[[web.Request], Awaitable[None]] | None = None,
    on_load: Callable[[], Awaitable[None]] | None = None,
) -> tuple[web.Application, list[RealtimeConnection]]:
    """GET /rt?user=1&community=1&channel=a&channel=b[&since=N] runs one realtime socket
    through `serve_realtime`, as the app does; /rt-conn does the same by hand and keeps the
    RealtimeConnection in the returned list. `before` runs before the upgrade, `on_load`
    inside load_channels (to commit events in the middle of the setup)."""
    app = web.Application()
    connections: list[RealtimeConnection] = []
    rt_settings = settings or RealtimeSettings()

    def loader(request: web.Request) -> Callable[[], Awaitable[Sequence[str]]]:
        channels: Sequence[str] = request.query.getall("channel", [])

        async def load_channels() -> Sequence[str]:
            if on_load is not None:
                await on_load()
            return channels

        return load_channels

    async def handler(request: web.Request) -> web.StreamResponse:
        if before is not None:
            await before(request)
        return await serve_realtime(
            request,
            hub=hub,
            pool=pool,
            community_id=int(request.query.get("community", "1")),
            user_id=int(request.query.get("user", "1")),
            load_channels=loader(request),
            since=parse_since(request),
            settings=rt_settings,
        )

    async def handler_by_hand(request: web.Request) -> web.StreamResponse:
        if before is not None:
            await before(request)
        ws = web.WebSocketResponse(compress=False, timeout=rt_settings.close_timeout)
        await ws.prepare(request)
        connection = RealtimeConnection(
            ws,
            community_id=int(request.query.get("community", "1")),
            user_id=int(request.query.get("user", "1")),
            hub=hub,
            pool=pool,
            settings=rt_settings,
            transport=request.transport,
        )
        connections.append(connection)
        await connection.run(loader(request), parse_since(request))
        return ws

    app.router.add_get("/rt", handler)
    app.router.add_get("/rt-conn", handler_by_hand)
    return app, connections


@pytest.fixture
def make_app() -> Callable[..., tuple[web.Application, list[RealtimeConnection]]]:
    """`app, connections = make_app(hub, pool, settings, before=..., on_load=...)`."""
    return _realtime_app
