"""Groups, their streams and pins, and the queries behind every group list.

Every query that returns groups returns the same FULL columns (member count, admin ids, the
viewer's role and pending request, stream ids, the viewer's chat read state), each computed in
the same statement, so a page of any size costs one query. Placeholders: `$1` is always the
community id, `$2` the viewer's id and, where visibility is checked, `$3` whether the viewer is
an external contributor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import asyncpg

from storage.chat_messages import unread_sql
from storage.db import Conn
from storage.group_visibility import is_member_sql, listed_sql, readable_sql
from storage.names import first_free
from storage.rows import AccessGroupRow, GroupRow

# The columns of the short forms (app/render/groups_short.py), over alias `g`.
SHORT_COLUMNS = (
    "g.id, g.name, g.groupname, g.permission, g.chat_enabled, g.post_enabled, g.avatar_id, "
    "g.state"
)

# The viewer's group chat state (table group_chat_reads, migration 0003) as one json value, or
# NULL when they are not a member. A member without a row has never viewed the chat: every
# push switch on. The group chat code owns these values and may change how they are computed
# here: the unread count is counted when read (storage.chat_messages.unread_sql).
CHAT_READ = f"""
(SELECT json_build_object(
    'last_viewed_at', coalesce(floor(extract(epoch FROM cr.last_viewed_at))::bigint, 0),
    'unread_count',
        {unread_sql("g.id", "$2", "greatest(cr.last_viewed_at, gm_c.created_at)")},
    'push_notifications_enabled', coalesce(cr.push_notifications_enabled, true),
    'push_notification_on_group_chat_message',
        coalesce(cr.push_notification_on_group_chat_message, true),
    'push_notification_on_chat_mention', coalesce(cr.push_notification_on_chat_mention, true))
 FROM group_memberships gm_c
 LEFT JOIN group_chat_reads cr ON cr.group_id = gm_c.group_id AND cr.user_id = gm_c.user_id
 WHERE gm_c.group_id = g.id AND gm_c.user_id = $2 AND g.chat_enabled)
"""

FULL = f"""
{SHORT_COLUMNS}, g.community_id, g.description, g.allow_access_request, g.group_type,
g.creator_id, g.created_at, g.updated_at, g.archived_at,
(SELECT s.id FROM streams s WHERE s.group_id = g.id AND s.kind = 'group') AS post_stream_id,
(SELECT s.id FROM streams s WHERE s.group_id = g.id AND s.kind = 'group_chat')
    AS chat_stream_id,
(SELECT count(*) FROM group_memberships m WHERE m.group_id = g.id)::int AS member_count,
ARRAY(SELECT m.user_id FROM group_memberships m WHERE m.group_id = g.id AND m.role = 'admin'
      ORDER BY m.user_id) AS admin_ids,
(SELECT m.role FROM group_memberships m WHERE m.group_id = g.id AND m.user_id = $2)
    AS viewer_role,
EXISTS (SELECT 1 FROM group_membership_requests r WHERE r.group_id = g.id AND r.user_id = $2)
    AS viewer_requested,
{CHAT_READ} AS chat_read
"""

_READABLE = readable_sql("g", "$2", "$3")
_LISTED = listed_sql("g", "$2", "$3")
_IS_MEMBER = is_member_sql("g", "$2")

# One group with whether the viewer may read it or only see that it exists; $4 the id.
BY_ID = f"""
SELECT {FULL}, {_READABLE} AS readable, {_LISTED} AS listed
FROM groups g WHERE g.community_id = $1 AND g.id = $4
"""
# By id ($4, may be NULL) or, failing that, by groupname ($5).
BY_ID_OR_NAME = f"""
SELECT {FULL}, {_READABLE} AS readable, {_LISTED} AS listed
FROM groups g
WHERE g.community_id = $1 AND (g.id = $4 OR lower(g.groupname) = lower($5))
ORDER BY coalesce(g.id = $4, false) DESC
LIMIT 1
"""

# GET /api/groups and its relatives. $4 include private groups that accept requests,
# $5 can_join_only, $6 can_request_membership_only, $7 tsquery text (NULL = any name),
# $8 users who must all be members (empty = anyone), $9 offset, $10 limit.
LIST = f"""
SELECT {FULL} FROM groups g
WHERE g.community_id = $1
  AND CASE WHEN $4 THEN {_LISTED} ELSE {_READABLE} END
  AND (NOT $5 OR (g.permission = 'public' AND g.state = 'active' AND NOT $3
                  AND NOT {_IS_MEMBER}))
  AND (NOT $6 OR (g.permission <> 'public' AND g.allow_access_request AND g.state = 'active'
                  AND NOT $3 AND NOT {_IS_MEMBER}))
  AND ($7::text IS NULL OR to_tsvector('simple', g.name) @@ to_tsquery('simple', $7))
  AND (cardinality($8::bigint[]) = 0
       OR (SELECT count(*) FROM group_memberships m
           WHERE m.group_id = g.id AND m.user_id = ANY($8::bigint[])) = cardinality($8))
ORDER BY lower(g.name), g.id
OFFSET $9 LIMIT $10
"""

# Groups the viewer pinned and may still see, in the order pinned. $4 offset, $5 limit.
PINNED = f"""
SELECT {FULL} FROM group_pins p JOIN groups g ON g.id = p.group_id
WHERE g.community_id = $1 AND p.user_id = $2 AND {_LISTED}
ORDER BY p.created_at, g.id
OFFSET $4 LIMIT $5
"""

# The viewer's own groups (GET /api/group_memberships). $3 offset, $4 limit.
OF_VIEWER = f"""
SELECT {FULL} FROM group_memberships mm JOIN groups g ON g.id = mm.group_id
WHERE g.community_id = $1 AND mm.user_id = $2
ORDER BY lower(g.name), g.id
OFFSET $3 LIMIT $4
"""

INSERT = """
INSERT INTO groups (community_id, name, groupname, description, permission,
                    allow_access_request, chat_enabled, creator_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING id
"""
TAKEN_GROUPNAMES = """
SELECT lower(groupname) AS g FROM groups
WHERE community_id = $1 AND lower(groupname) LIKE lower($2) || '%'
"""
NAME_TAKEN = """
SELECT EXISTS (SELECT 1 FROM groups WHERE community_id = $1 AND lower(name) = lower($2)
               AND id IS DISTINCT FROM $3)
"""
DELETE = "DELETE FROM groups WHERE community_id = $1 AND id = $2"
ARCHIVE = """
UPDATE groups SET state = 'archived', archived_at = coalesce(archived_at, now()),
                  updated_at = now()
WHERE community_id = $1 AND id = $2
"""
LOCK = "SELECT id FROM groups WHERE community_id = $1 AND id = $2 FOR UPDATE"

ENSURE_STREAM = """
INSERT INTO streams (community_id, kind, group_id, name) VALUES ($1, $2, $3, $4)
ON CONFLICT (group_id, kind) WHERE group_id IS NOT NULL DO NOTHING
"""
RENAME_STREAMS = """
UPDATE streams SET name = $3
WHERE community_id = $1 AND group_id = $2 AND kind IN ('group', 'group_chat')
"""

PIN = """
INSERT INTO group_pins (user_id, group_id) VALUES ($1, $2)
ON CONFLICT (user_id, group_id) DO NOTHING
"""
UNPIN = "DELETE FROM group_pins WHERE user_id = $1 AND group_id = $2"

# Columns PUT /api/groups/:id may change; the action maps parameters onto these names.
UPDATABLE = (
    "name", "description", "permission", "allow_access_request", "chat_enabled",
    "post_enabled", "avatar_id",
)


async def by_id(
    conn: Conn, community_id: int, viewer_id: int, external: bool, group_id: int
) -> AccessGroupRow | None:
    """The FULL row plus `readable` and `listed` for this viewer; None if not in community."""
    return cast("AccessGroupRow | None", await conn.fetchrow(
        BY_ID, community_id, viewer_id, external, group_id,
    ))


async def by_id_or_name(
    conn: Conn, community_id: int, viewer_id: int, external: bool, group_id: int | None,
    groupname: str,
) -> AccessGroupRow | None:
    return cast("AccessGroupRow | None", await conn.fetchrow(
        BY_ID_OR_NAME, community_id, viewer_id, external, group_id, groupname
    ))


async def list_groups(
    conn: Conn,
    community_id: int,
    viewer_id: int,
    external: bool,
    *,
    include_requestable: bool = False,
    can_join_only: bool = False,
    can_request_only: bool = False,
    tsquery: str | None = None,
    member_ids: Sequence[int] = (),
    offset: int,
    limit: int,
) -> list[GroupRow]:
    """Groups the viewer may read (or also see, with `include_requestable`), by name.

    `member_ids`: only groups of which every one of these users is a member.
    """
    return cast("list[GroupRow]", await conn.fetch(
        LIST, community_id, viewer_id, external, include_requestable or can_request_only,
        can_join_only, can_request_only, tsquery, sorted(set(member_ids)), offset, limit,
    ))


async def pinned(
    conn: Conn, community_id: int, viewer_id: int, external: bool, offset: int, limit: int
) -> list[GroupRow]:
    return cast(
        "list[GroupRow]", await conn.fetch(PINNED, community_id, viewer_id, external, offset, limit)
    )


async def of_viewer(
    conn: Conn, community_id: int, viewer_id: int, offset: int, limit: int
) -> list[GroupRow]:
    """The viewer's own groups, by name (their role in each is `viewer_role`)."""
    return cast(
        "list[GroupRow]", await conn.fetch(OF_VIEWER, community_id, viewer_id, offset, limit)
    )


async def free_groupname(conn: Conn, community_id: int, wanted: str) -> str:
    """`wanted`, or `wanted2`, `wanted3`... whichever is not yet taken (case-insensitive)."""
    taken = {r["g"] for r in await conn.fetch(TAKEN_GROUPNAMES, community_id, wanted)}
    return first_free(wanted, taken)


async def name_taken(
    conn: Conn, community_id: int, name: str, except_id: int | None = None
) -> bool:
    return bool(await conn.fetchval(NAME_TAKEN, community_id, name, except_id))


async def insert(
    conn: asyncpg.Connection,
    community_id: int,
    *,
    name: str,
    groupname: str,
    description: str | None,
    permission: str,
    allow_access_request: bool,
    chat_enabled: bool,
    creator_id: int | None,
) -> int:
    """A new group and its group stream (and chat stream when chat is on); returns its id."""
    group_id: int = await conn.fetchval(
        INSERT, community_id, name, groupname, description, permission, allow_access_request,
        chat_enabled, creator_id,
    )
    await ensure_stream(conn, community_id, group_id, "group", name)
    if chat_enabled:
        await ensure_stream(conn, community_id, group_id, "group_chat", name)
    return group_id


async def update(
    conn: asyncpg.Connection, community_id: int, group_id: int, changes: dict[str, Any]
) -> None:
    """Set the given columns (names from UPDATABLE only)."""
    names = [n for n in changes if n in UPDATABLE]
    if not names:
        return
    sets = ", ".join(f"{n} = ${i + 3}" for i, n in enumerate(names))
    await conn.execute(
        f"UPDATE groups SET {sets}, updated_at = now() WHERE community_id = $1 AND id = $2",
        community_id, group_id, *(changes[n] for n in names),
    )


async def ensure_stream(
    conn: asyncpg.Connection, community_id: int, group_id: int, kind: str, name: str
) -> None:
    """The group's stream of `kind` ('group' or 'group_chat'), created unless it exists."""
    await conn.execute(ENSURE_STREAM, community_id, kind, group_id, name)


async def rename_streams(
    conn: asyncpg.Connection, community_id: int, group_id: int, name: str
) -> None:
    await conn.execute(RENAME_STREAMS, community_id, group_id, name)


async def delete(conn: asyncpg.Connection, community_id: int, group_id: int) -> bool:
    """Memberships, requests, pins, invitations and streams go with it (cascades)."""
    return bool((await conn.execute(DELETE, community_id, group_id)).endswith(" 1"))


async def archive(conn: asyncpg.Connection, community_id: int, group_id: int) -> None:
    await conn.execute(ARCHIVE, community_id, group_id)


async def lock(conn: asyncpg.Connection, community_id: int, group_id: int) -> None:
    """Serialize membership changes of one group (last-admin checks) until commit."""
    await conn.execute(LOCK, community_id, group_id)


async def pin(conn: asyncpg.Connection, user_id: int, group_id: int) -> None:
    await conn.execute(PIN, user_id, group_id)


async def unpin(conn: asyncpg.Connection, user_id: int, group_id: int) -> None:
    await conn.execute(UNPIN, user_id, group_id)
