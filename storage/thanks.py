"""Thanks: who thanked whom, with which badge, and the announcement message of each.

Who may see a thanks: every internal user of the community; an external contributor only the
thanks they sent or received (the announcement has no group, and the messages rule says the
same of it). List queries take `$1` community, `$2` viewer, `$3` whether the viewer is an
external contributor.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from storage import messages as message_storage
from storage.db import Conn

COLUMNS = "t.id, t.community_id, t.user_id, t.badge_id, t.body, t.message_id, t.created_at"

VISIBLE = """
(NOT $3 OR t.user_id = $2
 OR EXISTS (SELECT 1 FROM thanks_recipients tv WHERE tv.thanks_id = t.id AND tv.user_id = $2))
"""

INSERT = f"""
INSERT INTO thanks AS t (community_id, user_id, badge_id, body, message_id)
VALUES ($1, $2, $3, $4, $5)
RETURNING {COLUMNS}
"""
INSERT_RECIPIENTS = """
INSERT INTO thanks_recipients (thanks_id, user_id, community_id, position)
SELECT $1, r.user_id, $2, r.position
FROM unnest($3::bigint[]) WITH ORDINALITY AS r (user_id, position)
"""

BY_ID = f"""
SELECT {COLUMNS} FROM thanks t WHERE t.community_id = $1 AND t.id = $4 AND {VISIBLE}
"""

# $4 received by this user (NULL = anyone), $5 created after (NULL = ever), $6 offset, $7 limit
LIST = f"""
SELECT {COLUMNS} FROM thanks t
WHERE t.community_id = $1 AND {VISIBLE}
  AND ($4::bigint IS NULL OR EXISTS (
        SELECT 1 FROM thanks_recipients tr WHERE tr.thanks_id = t.id AND tr.user_id = $4))
  AND ($5::timestamptz IS NULL OR t.created_at > $5)
ORDER BY t.created_at DESC, t.id DESC
OFFSET $6 LIMIT $7
"""

# The thanks announced by these messages ($2), whoever the viewer.
BY_MESSAGES = f"""
SELECT {COLUMNS} FROM thanks t WHERE t.community_id = $1 AND t.message_id = ANY($2::bigint[])
"""

RECIPIENTS = """
SELECT thanks_id, user_id FROM thanks_recipients
WHERE thanks_id = ANY($1::bigint[])
ORDER BY thanks_id, position
"""

# Announcement messages of thanks with badge $4 (received by $5 when not NULL) that the viewer
# may read, newest interaction first, as message rows (storage.messages ROW). $6 offset,
# $7 limit.
BADGE_MESSAGES = f"""
SELECT {message_storage.ROW} FROM {message_storage.FROM}
WHERE m.community_id = $1 AND {message_storage.READABLE}
  AND EXISTS (
        SELECT 1 FROM thanks t
        WHERE t.message_id = m.id AND t.community_id = $1 AND t.badge_id = $4
          AND ($5::bigint IS NULL OR EXISTS (
                SELECT 1 FROM thanks_recipients tr
                WHERE tr.thanks_id = t.id AND tr.user_id = $5)))
ORDER BY m.last_interacted_at DESC, m.id DESC
OFFSET $6 LIMIT $7
"""


async def insert(
    conn: asyncpg.Connection,
    community_id: int,
    *,
    user_id: int,
    badge_id: int | None,
    body: str,
    message_id: int | None,
    recipient_ids: Sequence[int],
) -> asyncpg.Record:
    row = await conn.fetchrow(INSERT, community_id, user_id, badge_id, body, message_id)
    assert row is not None
    await conn.execute(INSERT_RECIPIENTS, row["id"], community_id, list(recipient_ids))
    return row


async def visible_by_id(
    conn: Conn, community_id: int, viewer_id: int, external: bool, thanks_id: int
) -> asyncpg.Record | None:
    return await conn.fetchrow(BY_ID, community_id, viewer_id, external, thanks_id)


async def list_thanks(
    conn: Conn,
    community_id: int,
    viewer_id: int,
    external: bool,
    *,
    recipient_id: int | None,
    since: datetime | None,
    offset: int,
    limit: int,
) -> list[asyncpg.Record]:
    return await conn.fetch(
        LIST, community_id, viewer_id, external, recipient_id, since, offset, limit
    )


async def by_messages(
    conn: Conn, community_id: int, message_ids: Sequence[int]
) -> list[asyncpg.Record]:
    if not message_ids:
        return []
    return await conn.fetch(BY_MESSAGES, community_id, list(message_ids))


async def recipients(conn: Conn, thanks_ids: Sequence[int]) -> dict[int, list[int]]:
    """Recipient user ids of each thanks, in the order given."""
    out: dict[int, list[int]] = {}
    if not thanks_ids:
        return out
    for row in await conn.fetch(RECIPIENTS, list(thanks_ids)):
        out.setdefault(row["thanks_id"], []).append(row["user_id"])
    return out


async def badge_messages(
    conn: Conn,
    community_id: int,
    viewer_id: int,
    external: bool,
    *,
    badge_id: int,
    recipient_id: int | None,
    offset: int,
    limit: int,
) -> list[asyncpg.Record]:
    return await conn.fetch(
        BADGE_MESSAGES, community_id, viewer_id, external, badge_id, recipient_id, offset, limit
    )
