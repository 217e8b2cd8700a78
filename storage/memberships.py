"""Group memberships, membership requests and e-mail invitations.

A membership's `role` is 'admin' or 'member'; an external contributor is a member whose user
role is 'external_contributor' (rows here carry it as `user_role`). Member and request lists
return the FULL user columns of storage.users (`$1` community id, `$2` viewer id), so
app.actions.users.full_users renders them.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from storage import users
from storage.db import Conn

_COLUMNS = "m.id, m.group_id, m.user_id, m.role, u.role AS user_role"

BY_USER = f"""
SELECT {_COLUMNS} FROM group_memberships m JOIN users u ON u.id = m.user_id
WHERE m.group_id = $1 AND m.user_id = $2
"""
BY_ID = f"""
SELECT {_COLUMNS} FROM group_memberships m JOIN users u ON u.id = m.user_id
WHERE m.group_id = $1 AND m.id = $2
"""
BY_USERS = f"""
SELECT {_COLUMNS} FROM group_memberships m JOIN users u ON u.id = m.user_id
WHERE m.group_id = $1 AND m.user_id = ANY($2::bigint[])
"""
# New memberships for ($3 user ids, $4 roles); existing ones are left as they are.
INSERT_MANY = """
INSERT INTO group_memberships (community_id, group_id, user_id, role)
SELECT $1, $2, x.user_id, x.role FROM unnest($3::bigint[], $4::text[]) AS x(user_id, role)
ON CONFLICT (group_id, user_id) DO NOTHING
RETURNING user_id
"""
SET_ROLE = "UPDATE group_memberships SET role = $3 WHERE group_id = $1 AND id = $2"
DELETE = "DELETE FROM group_memberships WHERE group_id = $1 AND user_id = $2"
ADMIN_COUNT = """
SELECT count(*)::int FROM group_memberships WHERE group_id = $1 AND role = 'admin'
"""
HAS_EXTERNAL = """
SELECT EXISTS (SELECT 1 FROM group_memberships m JOIN users u ON u.id = m.user_id
               WHERE m.group_id = $1 AND u.role = 'external_contributor')
"""

# Members as FULL users. $3 group, $4 admins only, $5 admins first, $6 offset, $7 limit,
# $8 one user (NULL = all).
MEMBERS = f"""
SELECT {users.FULL}, m.id AS membership_id, m.role AS membership_role
FROM group_memberships m JOIN users u ON u.id = m.user_id
WHERE m.community_id = $1 AND m.group_id = $3 AND (NOT $4 OR m.role = 'admin')
  AND ($8::bigint IS NULL OR m.user_id = $8)
ORDER BY CASE WHEN $5 AND m.role = 'admin' THEN 0 ELSE 1 END,
         lower(u.first_name), lower(u.last_name), u.id
OFFSET $6 LIMIT $7
"""

# --- membership requests ---
REQUEST = """
INSERT INTO group_membership_requests (community_id, group_id, user_id) VALUES ($1, $2, $3)
ON CONFLICT (group_id, user_id) DO UPDATE SET group_id = EXCLUDED.group_id
RETURNING id, group_id, user_id, created_at
"""
REQUEST_BY_ID = """
SELECT id, group_id, user_id, created_at FROM group_membership_requests
WHERE group_id = $1 AND id = $2
"""
DELETE_REQUEST = "DELETE FROM group_membership_requests WHERE group_id = $1 AND id = $2"
CANCEL_REQUEST = "DELETE FROM group_membership_requests WHERE group_id = $1 AND user_id = $2"
DELETE_REQUESTS_OF = """
DELETE FROM group_membership_requests WHERE group_id = $1 AND user_id = ANY($2::bigint[])
"""
# Pending requests as FULL users, oldest first. $3 group, $4 offset, $5 limit,
# $6 one user (NULL = all).
REQUESTS = f"""
SELECT {users.FULL}, r.id AS request_id, r.group_id AS request_group_id,
       r.created_at AS requested_at
FROM group_membership_requests r JOIN users u ON u.id = r.user_id
WHERE r.community_id = $1 AND r.group_id = $3 AND ($6::bigint IS NULL OR r.user_id = $6)
ORDER BY r.created_at, r.id
OFFSET $4 LIMIT $5
"""

# --- e-mail invitations ---
# ($3 e-mails, $4 roles); inviting again replaces the role.
INVITE_MANY = """
INSERT INTO group_invitations (community_id, group_id, email, role, invited_by)
SELECT $1, $2, x.email, x.role, $5 FROM unnest($3::text[], $4::text[]) AS x(email, role)
ON CONFLICT (group_id, lower(email)) DO UPDATE SET role = EXCLUDED.role
"""
INVITATIONS = """
SELECT id, group_id, email, role FROM group_invitations WHERE group_id = $1 ORDER BY id
"""
# Every invitation to the address (in the user's community) is consumed, and becomes a
# membership of the user: only into active groups, and for an external contributor only into
# groups that admit external contributors.
ACCEPT = """
WITH inv AS (
    DELETE FROM group_invitations i
    WHERE i.community_id = $1 AND lower(i.email) = lower($3)
      AND EXISTS (SELECT 1 FROM users u WHERE u.id = $2 AND u.community_id = $1)
    RETURNING i.group_id, i.role
)
INSERT INTO group_memberships (community_id, group_id, user_id, role)
SELECT $1, inv.group_id, u.id, inv.role
FROM inv JOIN groups g ON g.id = inv.group_id JOIN users u ON u.id = $2 AND u.community_id = $1
WHERE g.state = 'active'
  AND (g.permission = 'external_contributor' OR u.role <> 'external_contributor')
ON CONFLICT (group_id, user_id) DO NOTHING
RETURNING group_id
"""


async def by_user(conn: Conn, group_id: int, user_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(BY_USER, group_id, user_id)


async def by_id(conn: Conn, group_id: int, membership_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(BY_ID, group_id, membership_id)


async def by_users(
    conn: Conn, group_id: int, user_ids: Sequence[int]
) -> dict[int, asyncpg.Record]:
    if not user_ids:
        return {}
    rows = await conn.fetch(BY_USERS, group_id, list(user_ids))
    return {r["user_id"]: r for r in rows}


async def insert_many(
    conn: asyncpg.Connection,
    community_id: int,
    group_id: int,
    members: Sequence[tuple[int, str]],
) -> list[int]:
    """Add (user id, role) pairs; users who already belong keep their membership. Returns the
    ids of the users who were not members before."""
    if not members:
        return []
    rows = await conn.fetch(
        INSERT_MANY, community_id, group_id, [m[0] for m in members], [m[1] for m in members]
    )
    return [r["user_id"] for r in rows]


async def insert(
    conn: asyncpg.Connection, community_id: int, group_id: int, user_id: int, role: str
) -> bool:
    return bool(await insert_many(conn, community_id, group_id, [(user_id, role)]))


async def set_role(conn: asyncpg.Connection, group_id: int, membership_id: int, role: str) -> None:
    await conn.execute(SET_ROLE, group_id, membership_id, role)


async def delete(conn: asyncpg.Connection, group_id: int, user_id: int) -> bool:
    return bool((await conn.execute(DELETE, group_id, user_id)).endswith(" 1"))


async def admin_count(conn: Conn, group_id: int) -> int:
    count: int = await conn.fetchval(ADMIN_COUNT, group_id)
    return count


async def list_members(
    conn: Conn,
    community_id: int,
    viewer_id: int,
    group_id: int,
    *,
    admins_only: bool,
    admins_first: bool,
    offset: int,
    limit: int,
) -> list[asyncpg.Record]:
    """FULL user rows plus `membership_id` and `membership_role`, by name."""
    return await conn.fetch(
        MEMBERS, community_id, viewer_id, group_id, admins_only, admins_first, offset, limit,
        None,
    )


async def member(
    conn: Conn, community_id: int, viewer_id: int, group_id: int, user_id: int
) -> asyncpg.Record | None:
    """One member as list_members returns them."""
    return await conn.fetchrow(
        MEMBERS, community_id, viewer_id, group_id, False, False, 0, 1, user_id
    )


async def has_external_members(conn: Conn, group_id: int) -> bool:
    return bool(await conn.fetchval(HAS_EXTERNAL, group_id))


async def request(
    conn: asyncpg.Connection, community_id: int, group_id: int, user_id: int
) -> asyncpg.Record:
    """The user's pending request to join, made now unless one is pending already."""
    row = await conn.fetchrow(REQUEST, community_id, group_id, user_id)
    assert row is not None
    return row


async def request_by_id(conn: Conn, group_id: int, request_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(REQUEST_BY_ID, group_id, request_id)


async def delete_request(conn: asyncpg.Connection, group_id: int, request_id: int) -> bool:
    return bool((await conn.execute(DELETE_REQUEST, group_id, request_id)).endswith(" 1"))


async def cancel_request(conn: asyncpg.Connection, group_id: int, user_id: int) -> bool:
    return bool((await conn.execute(CANCEL_REQUEST, group_id, user_id)).endswith(" 1"))


async def delete_requests_of(
    conn: asyncpg.Connection, group_id: int, user_ids: Sequence[int]
) -> None:
    """Pending requests of users who just became members are fulfilled."""
    if user_ids:
        await conn.execute(DELETE_REQUESTS_OF, group_id, list(user_ids))


async def list_requests(
    conn: Conn, community_id: int, viewer_id: int, group_id: int, offset: int, limit: int
) -> list[asyncpg.Record]:
    """FULL user rows plus `request_id`, `request_group_id` and `requested_at`."""
    return await conn.fetch(REQUESTS, community_id, viewer_id, group_id, offset, limit, None)


async def request_of(
    conn: Conn, community_id: int, viewer_id: int, group_id: int, user_id: int
) -> asyncpg.Record | None:
    """The user's pending request as list_requests returns it."""
    return await conn.fetchrow(REQUESTS, community_id, viewer_id, group_id, 0, 1, user_id)


async def invite_many(
    conn: asyncpg.Connection,
    community_id: int,
    group_id: int,
    invitations: Sequence[tuple[str, str]],
    invited_by: int | None,
) -> None:
    """Pending (e-mail, role) invitations of people who are not users yet."""
    if invitations:
        await conn.execute(
            INVITE_MANY, community_id, group_id, [i[0] for i in invitations],
            [i[1] for i in invitations], invited_by,
        )


async def invitations(conn: Conn, group_id: int) -> list[asyncpg.Record]:
    return await conn.fetch(INVITATIONS, group_id)


async def accept_invitations(
    conn: asyncpg.Connection, community_id: int, user_id: int, email: str
) -> list[int]:
    """Turn the pending group invitations of `email` into memberships of the user `user_id`.

    Call it in the transaction that creates the user (or changes their e-mail address). The
    invitations are consumed (also those it cannot honour: archived groups, and groups that
    admit no external contributors when the user is one); returns the ids of the groups joined.
    Nothing happens when the user is not of `community_id`.
    """
    rows = await conn.fetch(ACCEPT, community_id, user_id, email)
    return [r["group_id"] for r in rows]


async def user_ids(conn: asyncpg.Connection, group_id: int) -> list[int]:
    rows = await conn.fetch("SELECT user_id FROM group_memberships WHERE group_id = $1",
                            group_id)
    return [r["user_id"] for r in rows]
