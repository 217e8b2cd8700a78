"""Numbered, forward-only SQL migrations and their runner.

Each `NNNN_name.sql` file runs once, in its own transaction, in name order. The runner holds a
PostgreSQL advisory lock so that several processes starting at once apply each file exactly
once, and refuses to start when an applied file was edited afterwards (checksum mismatch).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import asyncpg

MIGRATIONS_DIR = Path(__file__).resolve().parent
LOCK_KEY = 0x636F6D6D6F6E73  # "commons"

CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    name text PRIMARY KEY,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


class MigrationError(RuntimeError):
    pass


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def discover(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    files = sorted(p for p in directory.glob("*.sql") if p.name[:4].isdigit())
    return [Migration(p.stem, p.read_text(encoding="utf-8")) for p in files]


async def apply_migrations(dsn: str, directory: Path = MIGRATIONS_DIR) -> list[str]:
    """Apply pending migrations; returns the names applied by this call."""
    conn = await asyncpg.connect(dsn)
    try:
        return await apply_on(conn, discover(directory))
    finally:
        await conn.close()


async def apply_on(conn: asyncpg.Connection, migrations: list[Migration]) -> list[str]:
    applied_now: list[str] = []
    await conn.execute("SELECT pg_advisory_lock($1)", LOCK_KEY)
    try:
        await conn.execute(CREATE_TABLE)
        rows = await conn.fetch("SELECT name, checksum FROM schema_migrations")
        done = {r["name"]: r["checksum"] for r in rows}
        for migration in migrations:
            known = done.get(migration.name)
            if known is not None:
                if known != migration.checksum:
                    raise MigrationError(
                        f"migration {migration.name} was edited after it was applied "
                        "(checksum mismatch); add a new migration instead"
                    )
                continue
            async with conn.transaction():
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (name, checksum) VALUES ($1, $2)",
                    migration.name,
                    migration.checksum,
                )
            applied_now.append(migration.name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", LOCK_KEY)
    return applied_now
