"""Worker heartbeats (migration 0017) and the few numbers the probes and metrics read."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from storage.db import Conn


async def beat(conn: Conn, worker_id: str, host: str, pid: int, stats: dict[str, int]) -> None:
    await conn.execute(
        """
        INSERT INTO worker_heartbeats (worker_id, host, pid, stats)
        VALUES ($1, $2, $3, $4)
        ON CONFLICT (worker_id) DO UPDATE SET beat_at = now(), stats = EXCLUDED.stats
        """,
        worker_id, host, pid, stats,
    )


async def forget(conn: Conn, worker_id: str) -> None:
    await conn.execute("DELETE FROM worker_heartbeats WHERE worker_id = $1", worker_id)


async def recent(conn: Conn, within: timedelta) -> list[dict[str, Any]]:
    """Workers heard from within `within`, with the age of their last beat in seconds."""
    rows = await conn.fetch(
        """
        SELECT worker_id, host, pid, stats,
               extract(epoch FROM now() - beat_at)::float8 AS age
        FROM worker_heartbeats WHERE beat_at > now() - $1::interval
        ORDER BY beat_at DESC
        """,
        within,
    )
    return [dict(r) for r in rows]


async def prune(conn: Conn, older_than: timedelta) -> None:
    await conn.execute(
        "DELETE FROM worker_heartbeats WHERE beat_at < now() - $1::interval", older_than
    )


async def push_queue_depth(conn: Conn) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM push_jobs"))


async def pending_migrations(conn: Conn, names: list[str]) -> list[str]:
    """Which of `names` are not in schema_migrations (all of them on an empty database)."""
    exists = await conn.fetchval("SELECT to_regclass('public.schema_migrations') IS NOT NULL")
    if not exists:
        return names
    rows = await conn.fetch(
        "SELECT name FROM schema_migrations WHERE name = ANY($1::text[])", names
    )
    applied = {r["name"] for r in rows}
    return [n for n in names if n not in applied]
