"""Helpers of the migration tests that start from an older schema."""

from __future__ import annotations

import asyncpg


async def old_community(conn: asyncpg.Connection) -> int:
    """A community made before the migration under test; its id."""
    return int(await conn.fetchval(
        "INSERT INTO communities (name, domain, base_url) "
        "VALUES ('Old', 'old.example', 'https://old.example') RETURNING id"))
