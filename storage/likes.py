"""Likes of messages (comment_id NULL) and of comments: one per user and target."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from storage.db import Conn
from storage.users import FULL

COLUMNS = "l.id, l.user_id, l.message_id, l.comment_id, l.created_at"

# Insert unless the user already likes it; `created` tells which. Under a concurrent insert of
# the same like the statement may return nothing (the other row is not in its snapshot): the
# caller then reads it with EXISTING.
LIKE_MESSAGE = f"""
WITH ins AS (
    INSERT INTO likes AS l (community_id, user_id, message_id) VALUES ($1, $2, $3)
    ON CONFLICT (message_id, user_id) WHERE comment_id IS NULL DO NOTHING
    RETURNING {COLUMNS}
)
SELECT *, true AS created FROM ins
UNION ALL
SELECT {COLUMNS}, false FROM likes l
WHERE l.message_id = $3 AND l.user_id = $2 AND l.comment_id IS NULL
LIMIT 1
"""
LIKE_COMMENT = f"""
WITH ins AS (
    INSERT INTO likes AS l (community_id, user_id, message_id, comment_id)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (comment_id, user_id) WHERE comment_id IS NOT NULL DO NOTHING
    RETURNING {COLUMNS}
)
SELECT *, true AS created FROM ins
UNION ALL
SELECT {COLUMNS}, false FROM likes l WHERE l.comment_id = $4 AND l.user_id = $2
LIMIT 1
"""
EXISTING = f"""
SELECT {COLUMNS}, false AS created FROM likes l
WHERE l.message_id = $1 AND l.user_id = $2 AND l.comment_id IS NOT DISTINCT FROM $3
"""

# One like of a message ($3 NULL) or comment, by id ($4).
BY_ID = f"""
SELECT {COLUMNS} FROM likes l
WHERE l.community_id = $1 AND l.message_id = $2 AND l.comment_id IS NOT DISTINCT FROM $3
  AND l.id = $4
"""
DELETE = "DELETE FROM likes WHERE community_id = $1 AND id = $2"

COUNT = """
SELECT count(*)::int FROM likes
WHERE message_id = $1 AND comment_id IS NOT DISTINCT FROM $2
"""

# The most relevant likes of many messages ($1) and comments ($2): the viewer's ($3) own
# first, then the newest; at most $4 per message and $5 per comment.
TOP = f"""
SELECT id, user_id, message_id, comment_id, created_at FROM (
    SELECT {COLUMNS}, row_number() OVER (
        PARTITION BY l.message_id, l.comment_id
        ORDER BY (l.user_id = $3) DESC, l.created_at DESC, l.id DESC) AS rn
    FROM likes l
    WHERE (l.comment_id IS NULL AND l.message_id = ANY($1::bigint[]))
       OR l.comment_id = ANY($2::bigint[])
) ranked
WHERE rn <= CASE WHEN comment_id IS NULL THEN $4::int ELSE $5::int END
ORDER BY message_id, comment_id NULLS FIRST, rn
"""

# Who likes a message or comment, as FULL user rows ($1 community, $2 viewer), oldest first.
LIKERS = f"""
SELECT {FULL} FROM likes l JOIN users u ON u.id = l.user_id
WHERE l.community_id = $1 AND l.message_id = $3 AND l.comment_id IS NOT DISTINCT FROM $4
ORDER BY l.created_at, l.id
OFFSET $5 LIMIT $6
"""


async def like(
    conn: asyncpg.Connection,
    community_id: int,
    user_id: int,
    message_id: int,
    comment_id: int | None = None,
) -> asyncpg.Record:
    """The user's like of the message (or comment), new or existing; row has `created`."""
    if comment_id is None:
        row = await conn.fetchrow(LIKE_MESSAGE, community_id, user_id, message_id)
    else:
        row = await conn.fetchrow(LIKE_COMMENT, community_id, user_id, message_id, comment_id)
    if row is None:
        row = await conn.fetchrow(EXISTING, message_id, user_id, comment_id)
    assert row is not None
    return row


async def by_id(
    conn: Conn, community_id: int, message_id: int, comment_id: int | None, like_id: int
) -> asyncpg.Record | None:
    return await conn.fetchrow(BY_ID, community_id, message_id, comment_id, like_id)


async def delete(conn: asyncpg.Connection, community_id: int, like_id: int) -> bool:
    return bool((await conn.execute(DELETE, community_id, like_id)).endswith(" 1"))


async def count(conn: Conn, message_id: int, comment_id: int | None) -> int:
    value: int = await conn.fetchval(COUNT, message_id, comment_id)
    return value


async def top(
    conn: Conn,
    viewer_id: int,
    message_ids: Sequence[int],
    comment_ids: Sequence[int],
    *,
    per_message: int,
    per_comment: int,
) -> list[asyncpg.Record]:
    return await conn.fetch(
        TOP, list(message_ids), list(comment_ids), viewer_id, per_message, per_comment
    )


async def likers(
    conn: Conn,
    community_id: int,
    viewer_id: int,
    message_id: int,
    comment_id: int | None,
    offset: int,
    limit: int,
) -> list[asyncpg.Record]:
    return await conn.fetch(
        LIKERS, community_id, viewer_id, message_id, comment_id, offset, limit
    )
