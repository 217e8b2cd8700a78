"""Meeting types (a default set per community) and meetings with their attendees."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from storage.db import Conn
from storage.group_visibility import readable_sql
from storage.users import BASIC

TYPE_COLUMNS = "t.id, t.key, t.name, t.description, t.default_duration_minutes, t.position"
COLUMNS = """
m.id, m.community_id, m.meeting_type_id, m.user_id, m.group_id, m.title, m.description,
m.location, m.starts_at, m.ends_at, m.created_at
"""
GROUP_COLUMNS = """
g.id, g.name, g.groupname, g.permission, g.chat_enabled, g.post_enabled, g.avatar_id, g.state
"""

CREATE_DEFAULT_TYPES = "SELECT commons_create_default_meeting_types($1)"
LIST_TYPES = f"""
SELECT {TYPE_COLUMNS} FROM meeting_types t
WHERE t.community_id = $1 AND t.enabled
ORDER BY t.position, t.id
"""
TYPE_BY_KEY = f"""
SELECT {TYPE_COLUMNS} FROM meeting_types t
WHERE t.community_id = $1 AND t.enabled AND lower(t.key) = lower($2)
"""
TYPE_BY_ID = f"""
SELECT {TYPE_COLUMNS} FROM meeting_types t
WHERE t.community_id = $1 AND t.enabled AND t.id = $2
"""
TYPE_OF = f"SELECT {TYPE_COLUMNS} FROM meeting_types t WHERE t.community_id = $1 AND t.id = $2"

GROUP_BY_ID = f"SELECT {GROUP_COLUMNS} FROM groups g WHERE g.community_id = $1 AND g.id = $2"

INSERT = f"""
INSERT INTO meetings AS m (community_id, meeting_type_id, user_id, group_id, title,
                           description, location, starts_at, ends_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING {COLUMNS}
"""
INSERT_ATTENDEES = """
INSERT INTO meeting_attendees (meeting_id, user_id, community_id, position)
SELECT $1, a.user_id, $2, a.position
FROM unnest($3::bigint[]) WITH ORDINALITY AS a (user_id, position)
"""
# The meeting when the viewer ($2, external $3) may see it: organizer, attendee, or reader of
# its group.
VISIBLE_BY_ID = f"""
SELECT {COLUMNS} FROM meetings m
LEFT JOIN groups g ON g.id = m.group_id
WHERE m.community_id = $1 AND m.id = $4
  AND (m.user_id = $2
       OR EXISTS (SELECT 1 FROM meeting_attendees a WHERE a.meeting_id = m.id AND a.user_id = $2)
       OR (g.id IS NOT NULL AND {readable_sql("g", "$2", "$3")}))
"""
ATTENDEES = f"""
SELECT {BASIC} FROM meeting_attendees a JOIN users u ON u.id = a.user_id
WHERE a.meeting_id = $1
ORDER BY a.position
"""

async def create_default_meeting_types(conn: Conn, community_id: int) -> None:
    """The default set of a new community (defined in migrations/0008_thanks_badges.sql)."""
    await conn.execute(CREATE_DEFAULT_TYPES, community_id)


async def list_types(conn: Conn, community_id: int) -> list[asyncpg.Record]:
    return await conn.fetch(LIST_TYPES, community_id)


async def type_by_key(conn: Conn, community_id: int, key: str) -> asyncpg.Record | None:
    return await conn.fetchrow(TYPE_BY_KEY, community_id, key)


async def type_by_id(conn: Conn, community_id: int, type_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(TYPE_BY_ID, community_id, type_id)


async def type_of(conn: Conn, community_id: int, type_id: int) -> asyncpg.Record | None:
    """A meeting's type, enabled or not."""
    return await conn.fetchrow(TYPE_OF, community_id, type_id)


async def group_by_id(conn: Conn, community_id: int, group_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(GROUP_BY_ID, community_id, group_id)


async def insert(
    conn: asyncpg.Connection,
    community_id: int,
    *,
    meeting_type_id: int,
    user_id: int,
    group_id: int | None,
    title: str,
    description: str,
    location: str,
    starts_at: datetime,
    ends_at: datetime,
    attendee_ids: Sequence[int],
) -> asyncpg.Record:
    row = await conn.fetchrow(
        INSERT, community_id, meeting_type_id, user_id, group_id, title, description, location,
        starts_at, ends_at,
    )
    assert row is not None
    if attendee_ids:
        await conn.execute(INSERT_ATTENDEES, row["id"], community_id, list(attendee_ids))
    return row


async def visible_by_id(
    conn: Conn, community_id: int, viewer_id: int, external: bool, meeting_id: int
) -> asyncpg.Record | None:
    return await conn.fetchrow(VISIBLE_BY_ID, community_id, viewer_id, external, meeting_id)


async def attendees(conn: Conn, meeting_id: int) -> list[asyncpg.Record]:
    return await conn.fetch(ATTENDEES, meeting_id)
