"""What the readiness probe and the metrics page read from PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from migrations import discover
from storage import heartbeats
from storage.db import Conn

RECENT_WORKERS = timedelta(minutes=10)


async def readiness(conn: Conn) -> tuple[list[str], list[dict[str, Any]]]:
    """(migrations not applied yet, workers heard from recently)."""
    pending = await heartbeats.pending_migrations(conn, [m.name for m in discover()])
    return pending, await heartbeats.recent(conn, RECENT_WORKERS)


async def worker_figures(conn: Conn) -> tuple[int, list[dict[str, Any]]]:
    """(push jobs waiting, workers heard from recently)."""
    depth = await heartbeats.push_queue_depth(conn)
    return depth, await heartbeats.recent(conn, RECENT_WORKERS)
