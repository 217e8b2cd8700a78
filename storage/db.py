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


async def create_pool(
    dsn: str, *, size: int = 10, observer: QueryObserver | None = None,
    reset_sessions: bool = True, on_connect: Callable[[asyncpg.Connection], None] | None = None,
) -> asyncpg.Pool:
    """A pool whose connections decode json/jsonb with orjson.

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

    pool = await asyncpg.create_pool(
        dsn, min_size=1, max_size=size, init=init, command_timeout=60,
        server_settings={"application_name": "commons"},
        reset=None if reset_sessions else _rollback_only, connection_class=TrackedConnection,
    )
    assert pool is not None
    return pool


@asynccontextmanager
async def transaction(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    async with pool.acquire() as conn, conn.transaction():
        yield conn


@asynccontextmanager
async def connection(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    async with pool.acquire() as conn:
        yield conn


def is_unique_violation(exc: BaseException, constraint: str | None = None) -> bool:
    if not isinstance(exc, asyncpg.UniqueViolationError):
        return False
    return constraint is None or getattr(exc, "constraint_name", None) == constraint


Record = asyncpg.Record
Row = dict[str, Any]
# Storage functions that run one statement accept a pool as well as a connection.
Conn: TypeAlias = asyncpg.Connection | asyncpg.Pool
