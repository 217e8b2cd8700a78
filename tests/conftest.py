"""Fixtures: real PostgreSQL and Redis (started when absent), a clean database per test,
and a fresh app per test."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import pytest
from aiohttp import CookieJar
from aiohttp.test_utils import TestClient, TestServer

from app.config import Argon2Settings, Settings
from app.main import create_app
from app.passwords import Passwords
from app.resources import POOL
from migrations import apply_migrations
from tests.servers import ensure_postgres, ensure_redis, ensure_s3
from tests.support import World

# Real Argon2id, at its cheapest cost, so that hundreds of test users stay fast.
TEST_ARGON2 = Argon2Settings(time_cost=1, memory_kib=1024, parallelism=1)


def _dsn_for(admin_dsn: str, database: str) -> str:
    base, _, _ = admin_dsn.rpartition("/")
    query = ""
    if "?" in admin_dsn.rsplit("/", 1)[1]:
        query = "?" + admin_dsn.rsplit("?", 1)[1]
    return f"{base}/{database}{query}"


def pytest_configure(config: pytest.Config) -> None:
    """Find or start the servers once, in the controller; xdist workers inherit them."""
    if hasattr(config, "workerinput"):
        return
    os.environ["DATABASE_URL"] = ensure_postgres()
    os.environ["REDIS_URL"] = ensure_redis()
    os.environ.update(ensure_s3().env())


@pytest.fixture(scope="session")
def pg_admin_dsn() -> str:
    return ensure_postgres()


@pytest.fixture(scope="session")
def redis_url() -> str:
    return ensure_redis()


async def _recreate(admin_dsn: str, name: str) -> None:
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


async def _drop(admin_dsn: str, name: str) -> None:
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def database_url(pg_admin_dsn: str) -> Iterator[str]:
    """One migrated database per test worker process."""
    # Unique per process: several test runs may share one PostgreSQL server.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"commons_test_{worker}_{os.getpid()}"
    asyncio.run(_recreate(pg_admin_dsn, name))
    dsn = _dsn_for(pg_admin_dsn, name)
    asyncio.run(apply_migrations(dsn))
    yield dsn
    asyncio.run(_drop(pg_admin_dsn, name))


TRUNCATE = """
SELECT 'TRUNCATE ' || string_agg(format('%I', tablename), ', ') || ' RESTART IDENTITY CASCADE'
FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations'
"""


@pytest.fixture
async def clean_db(database_url: str) -> str:
    conn = await asyncpg.connect(database_url)
    try:
        statement = await conn.fetchval(TRUNCATE)
        if statement:
            await conn.execute(statement)
    finally:
        await conn.close()
    return database_url


@pytest.fixture
def settings(clean_db: str, redis_url: str, tmp_path: Any) -> Settings:
    return Settings(
        database_url=clean_db,
        redis_url=redis_url,
        redis_prefix=f"test-{uuid.uuid4().hex[:12]}",
        data_dir=tmp_path,
        secret_key="test-secret",
        argon2=TEST_ARGON2,
    )


class QueryLog(list[str]):
    """Every SQL statement the app's pool ran; `reset()` before the request you measure.

    asyncpg reports a query to its loggers by `loop.call_soon`, so the report of the last query
    made before `reset()` can still be on its way: it is dropped. Reports are run in the order
    they were scheduled, and `reset()` schedules the end of the dropping behind them; a query
    made after it answers in a later turn of the loop."""

    _dropping = False

    def reset(self) -> None:
        self.clear()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._dropping = True
        loop.call_soon(self._stop_dropping)

    def _stop_dropping(self) -> None:
        self._dropping = False

    def observe(self, query: str) -> None:
        if not self._dropping:
            self.append(query)


@pytest.fixture
def query_log() -> QueryLog:
    return QueryLog()


@pytest.fixture
async def client(
    aiohttp_client: Any, settings: Settings, query_log: QueryLog
) -> AsyncIterator[TestClient]:
    app = create_app(settings, query_observer=query_log.observe)
    server = TestServer(app)
    await server.start_server()
    # Communities have https base URLs, so the session cookie is Secure: the test server's
    # plain-http origin is treated as secure, as a browser behind the TLS proxy would be.
    jar = CookieJar(unsafe=True, treat_as_secure_origin=[server.make_url("/")])
    yield await aiohttp_client(server, cookie_jar=jar)


@pytest.fixture
def world(client: TestClient, settings: Settings) -> World:
    return World(client.app[POOL], Passwords(settings.argon2), client)


@pytest.fixture
async def fresh_database_url(pg_admin_dsn: str) -> AsyncIterator[str]:
    """An empty, unmigrated database of this test's own (`commons_mig_<random>`), dropped after:
    for the migration runner and the command line."""
    name = f"commons_mig_{uuid.uuid4().hex[:12]}"
    await _recreate(pg_admin_dsn, name)
    yield _dsn_for(pg_admin_dsn, name)
    await _drop(pg_admin_dsn, name)
