"""Group chat messages, and each member's chat read state (table group_chat_reads, migration
0003: last_viewed_at and unread_count, which the group JSON renders as chats_last_viewed_at and
unread_chats_count).

The unread count is a counter: a new message adds one for every other member of the group
(creating their row), and marking the chat read sets it to zero and last_viewed_at to now.
A member who joins later starts with nothing unread.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from storage.db import Conn

COLUMNS = "m.id, m.community_id, m.group_id, m.user_id, m.body, m.html, m.created_at"

INSERT = f"""
INSERT INTO group_chat_messages AS m (community_id, group_id, user_id, body, html, created_at)
VALUES ($1, $2, $3, $4, $5, clock_timestamp())
RETURNING {COLUMNS}
"""

# Newest first. $1 group, $2 only ids below (NULL: any), $3 only created after (NULL: any),
# $4 offset, $5 limit.
PAGE = f"""
SELECT {COLUMNS} FROM group_chat_messages m
WHERE m.group_id = $1
  AND ($2::bigint IS NULL OR m.id < $2)
  AND ($3::timestamptz IS NULL OR m.created_at > $3)
ORDER BY m.id DESC
OFFSET $4 LIMIT $5
"""

# One more unread message for every member but its author.
COUNT_UNREAD = """
INSERT INTO group_chat_reads AS cr (community_id, group_id, user_id, unread_count)
SELECT $1, gm.group_id, gm.user_id, 1
FROM group_memberships gm WHERE gm.group_id = $2 AND gm.user_id <> $3
ON CONFLICT (group_id, user_id) DO UPDATE
    SET unread_count = cr.unread_count + 1, updated_at = now()
"""

MARK_READ = """
INSERT INTO group_chat_reads AS cr (community_id, group_id, user_id, last_viewed_at,
                                    unread_count)
VALUES ($1, $2, $3, now(), 0)
ON CONFLICT (group_id, user_id) DO UPDATE
    SET last_viewed_at = now(), unread_count = 0, updated_at = now()
RETURNING floor(extract(epoch FROM cr.last_viewed_at))::bigint AS last_viewed_at
"""

READ_STATE = """
SELECT coalesce(floor(extract(epoch FROM last_viewed_at))::bigint, 0) AS last_viewed_at,
       unread_count
FROM group_chat_reads WHERE group_id = $1 AND user_id = $2
"""


async def insert(
    conn: asyncpg.Connection, community_id: int, group_id: int, user_id: int, body: str,
    html: str,
) -> asyncpg.Record:
    row = await conn.fetchrow(INSERT, community_id, group_id, user_id, body, html)
    assert row is not None
    return row


async def page(
    conn: Conn, group_id: int, *, before_id: int | None, since: datetime | None, offset: int,
    limit: int,
) -> list[asyncpg.Record]:
    return await conn.fetch(PAGE, group_id, before_id, since, offset, limit)


async def count_unread(
    conn: asyncpg.Connection, community_id: int, group_id: int, author_id: int
) -> None:
    await conn.execute(COUNT_UNREAD, community_id, group_id, author_id)


async def mark_read(
    conn: asyncpg.Connection, community_id: int, group_id: int, user_id: int
) -> int:
    """Nothing unread, viewed now; returns last_viewed_at in epoch seconds."""
    return int(await conn.fetchval(MARK_READ, community_id, group_id, user_id))


async def read_state(conn: Conn, group_id: int, user_id: int) -> tuple[int, int]:
    """(last_viewed_at epoch seconds, unread count); (0, 0) when never written."""
    row = await conn.fetchrow(READ_STATE, group_id, user_id)
    return (int(row["last_viewed_at"]), int(row["unread_count"])) if row else (0, 0)


def author_ids(rows: Sequence[asyncpg.Record]) -> list[int]:
    return list({r["user_id"] for r in rows})
