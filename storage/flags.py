"""Flags (bookmarks) of messages: one per user and message."""

from __future__ import annotations

import asyncpg

from storage.db import Conn

FLAG = """
WITH ins AS (
    INSERT INTO flags (community_id, user_id, message_id) VALUES ($1, $2, $3)
    ON CONFLICT (message_id, user_id) DO NOTHING
    RETURNING id
)
SELECT id, true AS created FROM ins
UNION ALL
SELECT id, false FROM flags WHERE message_id = $3 AND user_id = $2
LIMIT 1
"""
EXISTING = "SELECT id, false AS created FROM flags WHERE message_id = $1 AND user_id = $2"
# The viewer's own flag ($2) on the message ($3), by id ($4).
DELETE_OWN = """
DELETE FROM flags WHERE community_id = $1 AND user_id = $2 AND message_id = $3 AND id = $4
"""


async def flag(
    conn: asyncpg.Connection, community_id: int, user_id: int, message_id: int
) -> asyncpg.Record:
    """The user's flag of the message, new or existing; the row has `id` and `created`."""
    row = await conn.fetchrow(FLAG, community_id, user_id, message_id)
    if row is None:  # a concurrent flag committed after this statement's snapshot
        row = await conn.fetchrow(EXISTING, message_id, user_id)
    assert row is not None
    return row


async def delete_own(
    conn: Conn, community_id: int, user_id: int, message_id: int, flag_id: int
) -> bool:
    status = await conn.execute(DELETE_OWN, community_id, user_id, message_id, flag_id)
    return bool(status.endswith(" 1"))
