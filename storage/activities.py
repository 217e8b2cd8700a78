"""Conversation activities: remarks (verb post) and membership/name changes (join, leave,
update). Every read returns the activity columns plus its actor's (prefixed `actor_`), so one
renderer serves every list.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import asyncpg

from storage.db import Conn
from storage.rows import ActivityRow

COLUMNS = """
a.id, a.community_id, a.conversation_id, a.actor_id, a.verb, a.text, a.html, a.longitude,
a.latitude, a.client_provided_guid, a.shared_message_id, a.created_at,
u.first_name AS actor_first_name, u.last_name AS actor_last_name,
u.username AS actor_username, u.avatar_id AS actor_avatar_id, u.state AS actor_state
"""

_FROM = "FROM conversation_activities a JOIN users u ON u.id = a.actor_id"

# Every activity `a` moves its conversation's latest activity.
_TOUCHED = """touched AS (
    UPDATE conversations c
    SET latest_activity_id = greatest(coalesce(c.latest_activity_id, 0), a.id),
        last_activity_at = greatest(c.last_activity_at, a.created_at)
    FROM a WHERE c.id = a.conversation_id
)"""

# A membership or name change (verb join, leave, update) and its bookkeeping, in one
# statement, for callers that hold the conversation's row lock. created_at is the insert time
# (not the transaction's start), so that activities written one after another under the
# conversation's lock are also in time order.
INSERT = f"""
WITH a AS (
    INSERT INTO conversation_activities AS a (community_id, conversation_id, actor_id, verb,
        text, created_at)
    VALUES ($1, $2, $3, $4, $5, clock_timestamp())
    RETURNING a.*
), {_TOUCHED}
SELECT {COLUMNS} FROM a JOIN users u ON u.id = a.actor_id
"""

# A remark ($3 the author) in one statement: the conversation's row lock, taken only if the
# author is a current member (their membership row locked too, so that a leave committed while
# this waited is seen: a row that no longer qualifies is dropped by the lock's re-check), then
# the remark (its id drawn after the lock: ids in commit order, docs/conversations.md; created_at
# as INSERT's) with its bookkeeping: the conversation unhidden for the other members and read by
# its author. No row: not a member. A row with a null id: the guid was already used (nothing
# written). `conversation_name` and `other_member_ids` are for the push. The other members are
# those of this statement's snapshot, taken before the lock: a member who joined while it
# waited is not pushed this remark (they see it in the conversation).
POST_REMARK = f"""
WITH conv AS (
    SELECT c.id, c.name FROM conversations c
    JOIN conversation_members m ON m.conversation_id = c.id AND m.user_id = $3
        AND m.left_at IS NULL
    WHERE c.community_id = $1 AND c.id = $2
    FOR UPDATE OF c, m
), a AS (
    INSERT INTO conversation_activities AS a (community_id, conversation_id, actor_id, verb,
        text, html, longitude, latitude, client_provided_guid, shared_message_id, created_at)
    SELECT $1, conv.id, $3, 'post', $4, $5, $6, $7, $8, $9, clock_timestamp() FROM conv
    ON CONFLICT (conversation_id, actor_id, client_provided_guid)
        WHERE client_provided_guid IS NOT NULL DO NOTHING
    RETURNING a.*
), {_TOUCHED}, unhidden AS (
    UPDATE conversation_members m SET hidden = false FROM a
    WHERE m.conversation_id = a.conversation_id
      AND m.user_id <> a.actor_id AND m.left_at IS NULL AND m.hidden
), read_own AS (
    UPDATE conversation_members m SET last_read_activity_id = a.id, hidden = false FROM a
    WHERE m.conversation_id = a.conversation_id
      AND m.user_id = a.actor_id AND m.left_at IS NULL
)
SELECT conv.name AS conversation_name, {COLUMNS},
    ARRAY(
        SELECT m.user_id FROM conversation_members m
        WHERE m.conversation_id = a.conversation_id AND m.left_at IS NULL
          AND m.user_id <> a.actor_id
        ORDER BY m.user_id
    ) AS other_member_ids
FROM conv LEFT JOIN (a JOIN users u ON u.id = a.actor_id) ON true
"""

BY_ID = f"SELECT {COLUMNS} {_FROM} WHERE a.conversation_id = $1 AND a.id = $2"
BY_IDS = f"SELECT {COLUMNS} {_FROM} WHERE a.id = ANY($1::bigint[])"
BY_GUID = f"""
SELECT {COLUMNS} {_FROM}
WHERE a.conversation_id = $1 AND a.actor_id = $2 AND a.client_provided_guid = $3
"""
# newest first, from activity $4 on (what the reader may see)
PAGE = f"""
SELECT {COLUMNS} {_FROM}
WHERE a.conversation_id = $1 AND a.id >= $4
ORDER BY a.id DESC
OFFSET $2 LIMIT $3
"""


async def insert(
    conn: asyncpg.Connection,
    community_id: int,
    conversation_id: int,
    actor_id: int,
    verb: str,
    *,
    text: str | None = None,
) -> ActivityRow:
    """A membership or name change (as every read returns it, with its actor's columns) with
    the conversation's bookkeeping, in one statement (INSERT). Inside the transaction that
    holds the conversation's row lock; a remark is `post_remark`."""
    row = await conn.fetchrow(INSERT, community_id, conversation_id, actor_id, verb, text)
    assert row is not None  # an INSERT ... VALUES always makes its row
    return cast("ActivityRow", row)


async def post_remark(
    conn: asyncpg.Connection,
    community_id: int,
    conversation_id: int,
    author_id: int,
    *,
    text: str | None,
    html: str | None,
    longitude: float | None,
    latitude: float | None,
    client_provided_guid: str | None,
    shared_message_id: int | None,
) -> asyncpg.Record | None:
    """A remark with everything POST_REMARK does, in one statement of the caller's
    transaction, which holds the conversation's row lock from then on: None when the author
    is not a current member; else the row as every read returns it plus `conversation_name`
    and `other_member_ids`,
    its `id` null when the author already posted this guid here (nothing written)."""
    return await conn.fetchrow(
        POST_REMARK, community_id, conversation_id, author_id, text, html, longitude, latitude,
        client_provided_guid, shared_message_id,
    )


async def by_id(conn: Conn, conversation_id: int, activity_id: int) -> ActivityRow | None:
    return cast("ActivityRow | None", await conn.fetchrow(BY_ID, conversation_id, activity_id))


async def by_ids(conn: Conn, ids: Sequence[int]) -> dict[int, asyncpg.Record]:
    if not ids:
        return {}
    return {r["id"]: r for r in await conn.fetch(BY_IDS, list(ids))}


async def by_guid(
    conn: Conn, conversation_id: int, actor_id: int, guid: str
) -> ActivityRow | None:
    return cast("ActivityRow | None", await conn.fetchrow(BY_GUID, conversation_id, actor_id, guid))


async def page(
    conn: Conn, conversation_id: int, offset: int, limit: int, visible_from: int = 0
) -> list[ActivityRow]:
    """`visible_from`: the reader's conversation_members.visible_from_activity_id."""
    return cast(
        "list[ActivityRow]", await conn.fetch(PAGE, conversation_id, offset, limit, visible_from)
    )
