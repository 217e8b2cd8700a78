"""Content filters: words a community's admins block in what members post."""

from __future__ import annotations

import asyncpg

from storage.db import Conn

COLUMNS = "id, word, creator_id, created_at"

LIST = f"""
SELECT {COLUMNS} FROM content_filters WHERE community_id = $1
ORDER BY lower(word), id
OFFSET $2 LIMIT $3
"""
WORDS = "SELECT word FROM content_filters WHERE community_id = $1"
BY_ID = f"SELECT {COLUMNS} FROM content_filters WHERE community_id = $1 AND id = $2"
INSERT = f"""
INSERT INTO content_filters (community_id, word, creator_id) VALUES ($1, $2, $3)
RETURNING {COLUMNS}
"""
DELETE = "DELETE FROM content_filters WHERE community_id = $1 AND id = $2"


async def list_filters(
    conn: Conn, community_id: int, offset: int, limit: int
) -> list[asyncpg.Record]:
    return await conn.fetch(LIST, community_id, offset, limit)


async def words(conn: Conn, community_id: int) -> list[str]:
    return [r["word"] for r in await conn.fetch(WORDS, community_id)]


async def by_id(conn: Conn, community_id: int, filter_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(BY_ID, community_id, filter_id)


async def insert(
    conn: asyncpg.Connection, community_id: int, word: str, creator_id: int | None
) -> asyncpg.Record:
    row = await conn.fetchrow(INSERT, community_id, word, creator_id)
    assert row is not None
    return row


async def delete(conn: asyncpg.Connection, community_id: int, filter_id: int) -> bool:
    return bool((await conn.execute(DELETE, community_id, filter_id)).endswith(" 1"))
