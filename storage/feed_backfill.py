"""Fill the copies of last_interacted_at that migration 0012 added to recipient and topic rows,
in small batches (`commons backfill-feed`): each batch is its own short transaction, so a
database in service keeps serving. New rows are filled by the triggers; this is for rows older
than the migration (which fills them itself when the tables are small)."""

from __future__ import annotations

import asyncpg

# Tables with a copy of their message's last_interacted_at.
TABLES = ("message_recipients", "message_topics")


def _fill(table: str) -> str:
    # SKIP LOCKED: two backfills (or a writer touching the same rows) never wait on each other.
    return f"""
UPDATE {table} t SET last_interacted_at = m.last_interacted_at
FROM messages m
WHERE m.id = t.message_id AND t.id IN (
    SELECT id FROM {table} WHERE last_interacted_at IS NULL
    LIMIT $1 FOR UPDATE SKIP LOCKED)
"""


async def fill_batch(pool: asyncpg.Pool, table: str, batch: int) -> int:
    """Fill up to `batch` rows of `table`; returns how many."""
    if table not in TABLES:
        raise ValueError(table)
    status = await pool.execute(_fill(table), batch)
    return int(status.split()[-1])


async def backfill(pool: asyncpg.Pool, batch: int) -> dict[str, int]:
    """Fill every row still empty; returns the rows filled per table."""
    done = {}
    for table in TABLES:
        total = 0
        while filled := await fill_batch(pool, table, batch):
            total += filled
        done[table] = total
    return done
