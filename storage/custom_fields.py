"""Custom profile fields defined by a community's admins."""

from __future__ import annotations

import asyncpg

from storage.db import Conn

_COLUMNS = "id, name, position"

LIST = f"SELECT {_COLUMNS} FROM custom_fields WHERE community_id = $1 ORDER BY position, id"
BY_ID = f"SELECT {_COLUMNS} FROM custom_fields WHERE community_id = $1 AND id = $2"
INSERT = f"""
INSERT INTO custom_fields (community_id, name, position) VALUES ($1, $2, $3)
RETURNING {_COLUMNS}
"""
UPDATE = f"""
UPDATE custom_fields SET name = coalesce($3, name), position = coalesce($4, position)
WHERE community_id = $1 AND id = $2
RETURNING {_COLUMNS}
"""
DELETE = "DELETE FROM custom_fields WHERE community_id = $1 AND id = $2"
NEXT_POSITION = """
SELECT coalesce(max(position), 0) + 1 FROM custom_fields WHERE community_id = $1
"""



async def list_fields(conn: Conn, community_id: int) -> list[asyncpg.Record]:
    return await conn.fetch(LIST, community_id)


async def by_id(conn: Conn, community_id: int, field_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(BY_ID, community_id, field_id)


async def insert(
    conn: asyncpg.Connection, community_id: int, name: str, position: int | None
) -> asyncpg.Record:
    if position is None:
        position = await conn.fetchval(NEXT_POSITION, community_id)
    row = await conn.fetchrow(INSERT, community_id, name, position)
    assert row is not None
    return row


async def update(
    conn: asyncpg.Connection, community_id: int, field_id: int, name: str | None,
    position: int | None,
) -> asyncpg.Record | None:
    return await conn.fetchrow(UPDATE, community_id, field_id, name, position)


async def delete(conn: asyncpg.Connection, community_id: int, field_id: int) -> bool:
    return bool((await conn.execute(DELETE, community_id, field_id)).endswith(" 1"))
