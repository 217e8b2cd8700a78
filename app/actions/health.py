"""What the readiness probe and the metrics page read from PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import asyncpg

from migrations import discover
from storage import heartbeats
from storage.availability import DatabaseUnavailable
from storage.db import Conn

RECENT_WORKERS = timedelta(minutes=10)


async def postgres_readiness(
    pool: asyncpg.Pool, probe_seconds: float
) -> tuple[str | None, list[dict[str, Any]]]:
    """(why PostgreSQL is not ready, or None; workers heard from recently): unreachable, or
    a migration not applied yet."""
    names = [m.name for m in discover()]
    try:
        async with asyncio.timeout(probe_seconds):
            async with pool.acquire() as conn:
                pending = await heartbeats.pending_migrations(conn, names)
                workers = await heartbeats.recent(conn, RECENT_WORKERS)
    except (TimeoutError, OSError, DatabaseUnavailable) as exc:
        return f"postgres: unreachable ({type(exc).__name__})", []
    except Exception as exc:  # asyncpg's errors: the database answered but badly
        return f"postgres: {type(exc).__name__}", []
    if pending:
        return f"migrations: {len(pending)} not applied (first {pending[0]})", workers
    return None, workers


async def worker_figures(conn: Conn) -> tuple[int, list[dict[str, Any]]]:
    """(push jobs waiting, workers heard from recently)."""
    depth = await heartbeats.push_queue_depth(conn)
    return depth, await heartbeats.recent(conn, RECENT_WORKERS)
