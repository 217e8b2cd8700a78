"""PostgreSQL restarted under the app: while it is away every request gets a quick 503
`unavailable` with Retry-After (never a 500, a traceback or a hang), and the app recovers by
itself when it is back, with no restart of its own.

The server stopped here is a private cluster of this test (tests.servers.PostgresProcess), never
the shared one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from app.config import Settings
from app.main import create_app
from app.passwords import Passwords
from app.resources import POOL
from app.views.ops import PROBE_TIMEOUT
from migrations import apply_migrations
from tests.app.test_metrics import scrape
from tests.servers import PostgresProcess, start_private_postgres, with_database
from tests.support import Api, Member, World

# Refused connections fail at once; the bound leaves room for a loaded machine.
MAX_SECONDS_WHILE_DOWN = 2.0


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[PostgresProcess]:
    server = start_private_postgres()
    asyncio.run(apply_migrations(with_database(server.admin_dsn, "postgres")))
    yield server
    server.close()


@pytest.fixture
async def on_private(
    aiohttp_client: Any, settings: Settings, private_postgres: PostgresProcess
) -> tuple[TestClient, World]:
    """The app on the private server (started again if a test left it stopped), and a World
    writing to it."""
    private_postgres.start()
    on_private = dataclasses.replace(
        settings, database_url=with_database(private_postgres.admin_dsn, "postgres"),
        redis_url=None,
    )
    app = create_app(on_private)
    client: TestClient = await aiohttp_client(app)
    return client, World(app[POOL], Passwords(settings.argon2), client)


async def timed(api: Api, method: str, path: str, **kwargs: Any) -> tuple[Any, float]:
    began = time.monotonic()
    resp = await api.request(method, path, **kwargs)
    return resp, time.monotonic() - began


def assert_unavailable(resp: Any) -> None:
    assert resp.status == 503, resp.text
    assert resp.json["code"] == "unavailable", resp.json
    assert int(resp.headers["Retry-After"]) > 0
    assert resp.headers["X-Request-Id"]


async def test_postgres_restart_answers_503_then_recovers(
    on_private: tuple[TestClient, World], private_postgres: PostgresProcess,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client, world = on_private
    ann: Member = await world.community("Acme")
    assert (await ann.api.get("/api/userinfo")).status == 200
    groups = await ann.api.get("/api/groups")
    assert groups.status == 200, groups.text

    await asyncio.to_thread(private_postgres.stop)
    caplog.clear()
    requests = [
        ("GET", "/api/userinfo", {}),
        ("GET", "/api/groups", {}),
        ("POST", "/api/groups", {"json": {"group": {"name": "While down"}}}),
        ("GET", "/api/users", {}),
    ]
    for _ in range(3):
        for method, path, kwargs in requests:
            resp, seconds = await timed(ann.api, method, path, **kwargs)
            assert_unavailable(resp)
            assert seconds < MAX_SECONDS_WHILE_DOWN, (method, path, seconds)
    # a host not resolved before: finding its community needs the database
    elsewhere = Api(client, "elsewhere.example", ann.email, "x")
    unknown, _ = await timed(elsewhere, "GET", "/api/userinfo")
    assert_unavailable(unknown)
    # no traceback, and not a line per request
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not errors, [r.getMessage() for r in errors]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) <= 3, warnings

    await asyncio.to_thread(private_postgres.start)
    # it recovers by itself: the pool replaces its dead connections on the next acquire
    async with asyncio.timeout(15):
        while (await ann.api.get("/api/userinfo")).status != 200:  # noqa: ASYNC110 - polling the API
            await asyncio.sleep(0.1)
    for _ in range(3):
        for method, path, kwargs in requests[:2] + requests[3:]:
            resp = await ann.api.request(method, path, **kwargs)
            assert resp.status == 200, (path, resp.text)
    created = await ann.api.post("/api/groups", json={"group": {"name": "After"}})
    assert created.status == 201, created.text
    assert any("reachable again" in r.getMessage() for r in caplog.records)


async def test_postgres_gone_mid_request_is_503_not_500(
    on_private: tuple[TestClient, World], private_postgres: PostgresProcess,
) -> None:
    """Connections already in the pool when the server restarts are dead: a request that gets
    one answers 503 (or, if asyncpg noticed first, succeeds on a fresh one), never 500."""
    _, world = on_private
    ann: Member = await world.community("Acme")
    # fill the pool with idle connections
    statuses = await asyncio.gather(*(ann.api.get("/api/groups") for _ in range(8)))
    assert {s.status for s in statuses} == {200}

    await asyncio.to_thread(private_postgres.stop)
    await asyncio.to_thread(private_postgres.start)
    statuses = await asyncio.gather(*(ann.api.get("/api/groups") for _ in range(8)))
    assert {s.status for s in statuses} <= {200, 503}, [s.text for s in statuses]
    async with asyncio.timeout(15):
        while (await ann.api.get("/api/groups")).status != 200:  # noqa: ASYNC110 - polling the API
            await asyncio.sleep(0.1)


async def test_readyz_says_postgres_is_away_while_healthz_stays_up(
    on_private: tuple[TestClient, World], private_postgres: PostgresProcess,
) -> None:
    """A load balancer takes the process out of rotation (503 with the reason), and a liveness
    probe does not get it restarted for an outage a restart cannot fix."""
    client, _ = on_private
    assert (await client.get("/readyz")).status == 200

    await asyncio.to_thread(private_postgres.stop)
    began = time.monotonic()
    resp = await client.get("/readyz")
    body = await resp.json()
    assert resp.status == 503, body
    assert time.monotonic() - began < 2 * PROBE_TIMEOUT  # refused at once, bounded if hung
    assert int(resp.headers["Retry-After"]) > 0
    assert body["status"] == "unavailable"
    assert body["reason"].startswith("postgres: unreachable ("), body
    assert body["checks"]["postgres"] == body["reason"]
    alive = await client.get("/healthz")
    assert alive.status == 200
    assert await alive.json() == {"status": "ok"}

    await asyncio.to_thread(private_postgres.start)
    async with asyncio.timeout(15):
        while (await client.get("/readyz")).status != 200:  # noqa: ASYNC110 - polling the API
            await asyncio.sleep(0.1)


async def test_reconnects_after_a_restart_are_counted(
    on_private: tuple[TestClient, World], private_postgres: PostgresProcess,
) -> None:
    """commons_postgres_reconnects_total: pool connections opened to replace lost ones."""
    client, world = on_private
    ann: Member = await world.community("Acme")
    statuses = await asyncio.gather(*(ann.api.get("/api/groups") for _ in range(4)))
    assert {s.status for s in statuses} == {200}
    before = await scrape(client)
    assert before("commons_postgres_connections_opened_total") >= 1

    await asyncio.to_thread(private_postgres.stop)
    await asyncio.to_thread(private_postgres.start)
    async with asyncio.timeout(15):
        while (await ann.api.get("/api/groups")).status != 200:  # noqa: ASYNC110 - polling the API
            await asyncio.sleep(0.1)
    after = await scrape(client)
    reconnects = after.since(before, "commons_postgres_reconnects_total")
    assert reconnects >= 1
    assert after.since(before, "commons_postgres_connections_opened_total") >= reconnects
