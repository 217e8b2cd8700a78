"""The connection pool, its codecs, and the transaction helper.

Transactions belong to actions: `async with transaction(pool) as conn:`; storage functions take
a connection and never open transactions of their own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeAlias

import asyncpg
import orjson

from storage.availability import AvailablePool, Outage

QueryObserver = Callable[[str], None]


async def _init_connection(conn: asyncpg.Connection) -> None:
    for typename in ("json", "jsonb"):
        await conn.set_type_codec(
            typename,
            schema="pg_catalog",
            encoder=lambda v: orjson.dumps(v).decode(),
            decoder=orjson.loads,
            format="text",
        )


class TrackedConnection(asyncpg.Connection):
    """Knows whether it was closed on purpose (pool shutdown, idle expiry) or lost (server
    gone, network cut): `closed_on_purpose`, read by termination listeners."""

    closed_on_purpose = False

    async def close(self, *, timeout: float | None = None) -> None:  # noqa: ASYNC109 (asyncpg)
        self.closed_on_purpose = True
        await super().close(timeout=timeout)

    def terminate(self) -> None:
        self.closed_on_purpose = True
        super().terminate()


async def _rollback_only(conn: asyncpg.Connection) -> None:
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


# Defaults of COMMONS_DB_CONNECT_TIMEOUT_SECONDS and COMMONS_DB_ACQUIRE_TIMEOUT_SECONDS.
CONNECT_TIMEOUT = 5.0
ACQUIRE_TIMEOUT = 10.0


async def create_pool(
    dsn: str, *, size: int = 10, observer: QueryObserver | None = None,
    reset_sessions: bool = True, connect_timeout: float = CONNECT_TIMEOUT,
    acquire_timeout: float = ACQUIRE_TIMEOUT,
    on_connect: Callable[[asyncpg.Connection], None] | None = None,
) -> asyncpg.Pool:
    """A pool whose connections decode json/jsonb with orjson.

    While PostgreSQL cannot be reached, acquiring a connection raises
    storage.availability.DatabaseUnavailable within `connect_timeout` (a new connection) or
    `acquire_timeout` (waiting for a free one), and the pool recovers by itself afterwards.

    `observer` (tests and benchmarks) is called with the text of every query the pool runs,
    which is how list endpoints prove they run a fixed number of queries.

    `reset_sessions=False` skips asyncpg's reset query on release (one more round trip per
    acquire): for pools whose users never leave session state behind (no LISTEN, SET, session
    advisory locks or temp tables), like the HTTP app's. An open transaction is still rolled
    back.

    `on_connect` is called with every new connection (metrics count them and their losses).
    """

    async def init(conn: asyncpg.Connection) -> None:
        await _init_connection(conn)
        if on_connect is not None:
            on_connect(conn)
        if observer is not None:
            conn.add_query_logger(lambda q: observer(q.query))

    # min_size=0: asyncpg would otherwise keep reconnecting to restore a floor of connections
    # while PostgreSQL is away, logging a traceback each second; the next acquire reconnects.
    pool = AvailablePool(
        dsn, init_size=1, min_size=0, max_size=size, init=init, command_timeout=60,
        # notices on: the COMMIT reports realtime event ids in one (storage/events.py)
        server_settings={"application_name": "commons", "client_min_messages": "notice"},
        reset=None if reset_sessions else _rollback_only,
        timeout=connect_timeout, acquire_timeout=acquire_timeout,
        outage=Outage("PostgreSQL"), reset_waits_only_in_transaction=not reset_sessions,
        max_queries=50000, max_inactive_connection_lifetime=300.0, loop=None,
        connection_class=TrackedConnection, record_class=asyncpg.Record,
        # a Home page's statement grows with the viewer's groups (a branch each, about 200
        # bytes: storage.messages._home_merge); asyncpg re-prepares, and PostgreSQL re-plans,
        # any statement over 15 KB on every call by default
        max_cacheable_statement_size=256 * 1024,
    )
    await pool
    return pool


@asynccontextmanager
async def transaction(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    async with pool.acquire() as conn, conn.transaction():
        yield conn


@asynccontextmanager
async def connection(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    async with pool.acquire() as conn:
        yield conn


Record = asyncpg.Record
Row = dict[str, Any]
# Storage functions that run one statement accept a pool as well as a connection.
Conn: TypeAlias = asyncpg.Connection | asyncpg.Pool
