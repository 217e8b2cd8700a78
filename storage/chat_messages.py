"""Group chat messages, and each member's chat read state (table group_chat_reads, migration
0003: last_viewed_at, which the group JSON renders as chats_last_viewed_at).

The unread count (unread_chats_count) is counted when read, never stored (migration 0012): the
others' chat messages after the member last viewed the chat, or after they joined when they
never did (a member who joins later starts with nothing unread). Posting writes the message and
the author's own read marker, whatever the group's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from storage.db import Conn
from storage.group_visibility import listed_sql

COLUMNS = "m.id, m.community_id, m.group_id, m.user_id, m.body, m.html, m.created_at"

INSERT = f"""
INSERT INTO group_chat_messages AS m (community_id, group_id, user_id, body, html, created_at)
VALUES ($1, $2, $3, $4, $5, clock_timestamp())
RETURNING {COLUMNS}
"""

# What using a group's chat depends on, and nothing that costs per member (the group JSON's
# member_count and admin_ids do): $1 community, $2 viewer, $3 external contributor, $4 group.
ACCESS = f"""
SELECT g.id, g.name, g.chat_enabled, g.state,
       (SELECT m.role FROM group_memberships m WHERE m.group_id = g.id AND m.user_id = $2)
           AS viewer_role,
       {listed_sql("g", "$2", "$3")} AS listed
FROM groups g WHERE g.community_id = $1 AND g.id = $4
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

MARK_READ = """
INSERT INTO group_chat_reads AS cr (community_id, group_id, user_id, last_viewed_at)
VALUES ($1, $2, $3, now())
ON CONFLICT (group_id, user_id) DO UPDATE SET last_viewed_at = now(), updated_at = now()
RETURNING floor(extract(epoch FROM cr.last_viewed_at))::bigint AS last_viewed_at
"""


def unread_sql(group: str, viewer: str, read_since: str) -> str:
    """SQL counting the chat messages of others in `group` after `read_since` (SQL expressions:
    greatest(last_viewed_at, joined)), through group_chat_messages (group_id, created_at)."""
    return f"""
(SELECT count(*) FROM group_chat_messages c_u
 WHERE c_u.group_id = {group} AND c_u.user_id <> {viewer} AND c_u.created_at > {read_since})::int
"""


# A member's read state; no row when not a member.
READ_STATE = f"""
SELECT coalesce(floor(extract(epoch FROM cr.last_viewed_at))::bigint, 0) AS last_viewed_at,
       {unread_sql("$1", "$2", "greatest(cr.last_viewed_at, gm.created_at)")} AS unread_count
FROM group_memberships gm
LEFT JOIN group_chat_reads cr ON cr.group_id = gm.group_id AND cr.user_id = gm.user_id
WHERE gm.group_id = $1 AND gm.user_id = $2
"""


async def access(
    conn: Conn, community_id: int, viewer_id: int, external: bool, group_id: int
) -> asyncpg.Record | None:
    return await conn.fetchrow(ACCESS, community_id, viewer_id, external, group_id)


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


async def mark_read(
    conn: asyncpg.Connection, community_id: int, group_id: int, user_id: int
) -> int:
    """Nothing unread, viewed now; returns last_viewed_at in epoch seconds."""
    return int(await conn.fetchval(MARK_READ, community_id, group_id, user_id))


async def read_state(conn: Conn, group_id: int, user_id: int) -> tuple[int, int]:
    """(last_viewed_at epoch seconds (0 when never viewed), unread count); (0, 0) for a
    non-member."""
    row = await conn.fetchrow(READ_STATE, group_id, user_id)
    return (int(row["last_viewed_at"]), int(row["unread_count"])) if row else (0, 0)


def author_ids(rows: Sequence[asyncpg.Record]) -> list[int]:
    return list({r["user_id"] for r in rows})
