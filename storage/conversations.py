"""Conversations and their members: membership, member-set keys, read and hidden state.

A member is a conversation_members row with `left_at IS NULL`; every query here filters on it.
Rows returned for a viewer (`MEMBER_VIEW`) carry the conversation columns plus the viewer's own
read state (hidden, last_read_activity_id, and unread_count counted from the activities).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import cast

import asyncpg

from storage.db import Conn
from storage.rows import ConversationRow, MemberConversationRow
from storage.users import BASIC

_CONVERSATION = """
c.id, c.community_id, c.name, c.private, c.member_set_key, c.creator_id,
c.latest_activity_id, c.last_activity_at, c.created_at, c.updated_at, c.private_history_end
"""

# Remarks by others after what the member acknowledged, counted when read rather than kept
# per member: a remark then writes one row, not one per member of a large conversation.
UNREAD_OF_MEMBER = """
(SELECT count(*) FROM conversation_activities a
 WHERE a.conversation_id = m.conversation_id AND a.id > m.last_read_activity_id
   AND a.verb = 'post' AND a.actor_id <> m.user_id)::int
"""


def unread_remarks_of(community: str, user: str) -> str:
    """All of the user's unread remarks (the sum of UNREAD_OF_MEMBER over the conversations
    they are in), as an SQL expression over two SQL expressions."""
    return (f"(SELECT coalesce(sum({UNREAD_OF_MEMBER}), 0) FROM conversation_members m"
            f" WHERE m.user_id = {user} AND m.community_id = {community}"
            " AND m.left_at IS NULL)::int")


MEMBER_VIEW = (
    _CONVERSATION
    + f", {UNREAD_OF_MEMBER} AS unread_count, m.hidden, m.last_read_activity_id, m.joined_at,"
    " m.visible_from_activity_id"
)

# $1 community, $2 conversation, $3 viewer
FOR_MEMBER = f"""
SELECT {MEMBER_VIEW}
FROM conversations c
JOIN conversation_members m ON m.conversation_id = c.id AND m.user_id = $3 AND m.left_at IS NULL
WHERE c.community_id = $1 AND c.id = $2
"""
FOR_MEMBER_LOCKED = FOR_MEMBER + " FOR UPDATE OF c"

BY_ID = f"SELECT {_CONVERSATION} FROM conversations c WHERE c.community_id = $1 AND c.id = $2"

# The most recently active conversation holding this member set (several may).
BY_MEMBER_SET_KEY = f"""
SELECT {_CONVERSATION} FROM conversations c WHERE c.community_id = $1 AND c.member_set_key = $2
ORDER BY c.last_activity_at DESC, c.id DESC
LIMIT 1
"""
# Serializes finding-or-creating a member set until the transaction ends.
LOCK_MEMBER_SET = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"

INSERT = f"""
INSERT INTO conversations AS c (community_id, name, private, member_set_key, creator_id)
VALUES ($1, $2, $3, $4, $5)
RETURNING {_CONVERSATION}
"""

# A one-to-one conversation about to grow: what was said so far stays the two members' own.
CLOSE_PRIVATE_HISTORY = """
UPDATE conversations SET private_history_end = coalesce(latest_activity_id, 0)
WHERE id = $1 AND private
"""

# Adds new members and brings back those who had left (their read state starts at the
# conversation's latest activity: what was said before they came back is not "unread"). A
# newcomer sees the activities after the conversation's one-to-one past; one who comes back
# keeps what they could see before.
ADD_MEMBERS = """
INSERT INTO conversation_members AS m (conversation_id, user_id, community_id,
                                       last_read_activity_id, visible_from_activity_id)
SELECT $2, u, $1, coalesce(c.latest_activity_id, 0),
       CASE WHEN c.private_history_end > 0 THEN c.private_history_end + 1 ELSE 0 END
FROM unnest($3::bigint[]) AS u, conversations c WHERE c.id = $2
ON CONFLICT (conversation_id, user_id) DO UPDATE
    SET left_at = NULL, joined_at = now(), hidden = false,
        last_read_activity_id = EXCLUDED.last_read_activity_id,
        visible_from_activity_id = least(m.visible_from_activity_id,
                                         EXCLUDED.visible_from_activity_id)
    WHERE m.left_at IS NOT NULL
RETURNING m.user_id
"""

REMOVE_MEMBER = """
UPDATE conversation_members SET left_at = now()
WHERE conversation_id = $1 AND user_id = $2 AND left_at IS NULL
"""

MEMBER_IDS = """
SELECT user_id FROM conversation_members
WHERE conversation_id = $1 AND left_at IS NULL ORDER BY user_id
"""

# After the members changed: the key of the new set, and private exactly for two members.
SET_MEMBER_SET = """
UPDATE conversations SET member_set_key = $2, private = $3, updated_at = now() WHERE id = $1
"""

RENAME = "UPDATE conversations SET name = $2, updated_at = now() WHERE id = $1"

# The viewer's conversations, latest activity first. $1 community, $2 viewer,
# $3 only unread, $4 hidden ones (true) or visible ones (false), $5 offset, $6 limit.
LIST_FOR_USER = f"""
SELECT {MEMBER_VIEW}
FROM conversation_members m JOIN conversations c ON c.id = m.conversation_id
WHERE m.user_id = $2 AND m.left_at IS NULL AND c.community_id = $1
  AND (NOT $3::boolean OR EXISTS (
      SELECT 1 FROM conversation_activities a
      WHERE a.conversation_id = m.conversation_id AND a.id > m.last_read_activity_id
        AND a.verb = 'post' AND a.actor_id <> m.user_id))
  AND m.hidden = $4::boolean
ORDER BY c.last_activity_at DESC, c.id DESC
OFFSET $5 LIMIT $6
"""

# Current members of many conversations, in joining order.
MEMBERS_OF = f"""
SELECT m.conversation_id, {BASIC}
FROM conversation_members m JOIN users u ON u.id = m.user_id
WHERE m.conversation_id = ANY($1::bigint[]) AND m.left_at IS NULL
ORDER BY m.conversation_id, m.joined_at, u.id
"""

LIST_MEMBERS = f"""
SELECT {BASIC}
FROM conversation_members m JOIN users u ON u.id = m.user_id
WHERE m.conversation_id = $1 AND m.left_at IS NULL
ORDER BY m.joined_at, u.id
OFFSET $2 LIMIT $3
"""

ACKNOWLEDGE = """
UPDATE conversation_members m SET
    last_read_activity_id = greatest(m.last_read_activity_id,
                                     coalesce(c.latest_activity_id, 0))
FROM conversations c
WHERE c.id = m.conversation_id AND m.conversation_id = $1 AND m.user_id = $2
  AND m.left_at IS NULL AND m.last_read_activity_id < coalesce(c.latest_activity_id, 0)
"""
ACKNOWLEDGE_ALL = """
UPDATE conversation_members m SET
    last_read_activity_id = greatest(m.last_read_activity_id,
                                     coalesce(c.latest_activity_id, 0))
FROM conversations c
WHERE c.id = m.conversation_id AND m.user_id = $2 AND m.left_at IS NULL
  AND m.community_id = $1 AND m.last_read_activity_id < coalesce(c.latest_activity_id, 0)
"""

SET_HIDDEN = """
UPDATE conversation_members SET hidden = $3
WHERE conversation_id = $1 AND user_id = $2 AND left_at IS NULL
"""


def member_set_key(private: bool, user_ids: Sequence[int]) -> str:
    """`p:<digest>` for a one-to-one conversation, `s:<digest>` for a shared one, the digest
    being SHA-256 of the sorted member ids: a fixed size whatever the number of members (the
    ids themselves would outgrow an index entry past a few hundred members)."""
    ids = ",".join(str(i) for i in sorted(set(user_ids)))
    return ("p:" if private else "s:") + hashlib.sha256(ids.encode()).hexdigest()


async def for_member(
    conn: Conn, community_id: int, conversation_id: int, user_id: int, *, lock: bool = False
) -> MemberConversationRow | None:
    """The conversation with `user_id`'s read state, when they are a current member."""
    sql = FOR_MEMBER_LOCKED if lock else FOR_MEMBER
    return cast("MemberConversationRow | None", await conn.fetchrow(
        sql, community_id, conversation_id, user_id,
    ))


async def by_id(conn: Conn, community_id: int, conversation_id: int) -> ConversationRow | None:
    """The conversation whoever asks (no membership check: for the actions' own use)."""
    return cast("ConversationRow | None", await conn.fetchrow(BY_ID, community_id, conversation_id))


async def by_member_set_key(conn: Conn, community_id: int, key: str) -> ConversationRow | None:
    """The most recently active conversation with this member set."""
    return cast("ConversationRow | None", await conn.fetchrow(BY_MEMBER_SET_KEY, community_id, key))


async def lock_member_set(conn: asyncpg.Connection, key: str) -> None:
    """Until the transaction ends, nobody else finds-or-creates this member set."""
    await conn.execute(LOCK_MEMBER_SET, key)


async def insert(
    conn: asyncpg.Connection, community_id: int, *, name: str | None, private: bool,
    key: str, creator_id: int,
) -> asyncpg.Record:
    row = await conn.fetchrow(INSERT, community_id, name, private, key, creator_id)
    assert row is not None
    return row


async def close_private_history(conn: asyncpg.Connection, conversation_id: int) -> None:
    """Before a one-to-one conversation grows: newcomers see only what follows."""
    await conn.execute(CLOSE_PRIVATE_HISTORY, conversation_id)


async def add_members(
    conn: asyncpg.Connection, community_id: int, conversation_id: int, user_ids: Sequence[int]
) -> list[int]:
    """Add (or bring back) users; returns the ids that were not current members before."""
    rows = await conn.fetch(ADD_MEMBERS, community_id, conversation_id, list(user_ids))
    return [r["user_id"] for r in rows]


async def remove_member(conn: asyncpg.Connection, conversation_id: int, user_id: int) -> bool:
    status = await conn.execute(REMOVE_MEMBER, conversation_id, user_id)
    return bool(status.endswith(" 1"))


async def member_ids(conn: Conn, conversation_id: int) -> list[int]:
    return [r["user_id"] for r in await conn.fetch(MEMBER_IDS, conversation_id)]


async def set_member_set(
    conn: asyncpg.Connection, conversation_id: int, key: str | None, private: bool
) -> None:
    await conn.execute(SET_MEMBER_SET, conversation_id, key, private)


async def rename(conn: asyncpg.Connection, conversation_id: int, name: str | None) -> None:
    await conn.execute(RENAME, conversation_id, name)


async def list_for_user(
    conn: Conn, community_id: int, user_id: int, *, unread_only: bool, hidden: bool,
    offset: int, limit: int,
) -> list[MemberConversationRow]:
    return cast("list[MemberConversationRow]", await conn.fetch(
        LIST_FOR_USER, community_id, user_id, unread_only, hidden, offset, limit
    ))


async def members_of(
    conn: Conn, conversation_ids: Sequence[int]
) -> dict[int, list[asyncpg.Record]]:
    """Current members (BASIC user rows) of each conversation, in one query."""
    out: dict[int, list[asyncpg.Record]] = {cid: [] for cid in conversation_ids}
    if not conversation_ids:
        return out
    for row in await conn.fetch(MEMBERS_OF, list(conversation_ids)):
        out[row["conversation_id"]].append(row)
    return out


async def list_members(
    conn: Conn, conversation_id: int, offset: int, limit: int
) -> list[asyncpg.Record]:
    return await conn.fetch(LIST_MEMBERS, conversation_id, offset, limit)


async def acknowledge(conn: asyncpg.Connection, conversation_id: int, user_id: int) -> bool:
    """Whether this read something new."""
    status = await conn.execute(ACKNOWLEDGE, conversation_id, user_id)
    return status != "UPDATE 0"


async def acknowledge_all(conn: asyncpg.Connection, community_id: int, user_id: int) -> int:
    status = await conn.execute(ACKNOWLEDGE_ALL, community_id, user_id)
    return int(status.rsplit(" ", 1)[-1])


async def set_hidden(
    conn: asyncpg.Connection, conversation_id: int, user_id: int, hidden: bool
) -> None:
    await conn.execute(SET_HIDDEN, conversation_id, user_id, hidden)
