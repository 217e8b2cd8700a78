"""Bulk user provisioning (POST /api/users/provision): set-based statements over one batch of
the uploaded directory at a time, inside the one transaction of the whole run.

Users seen in the file are remembered in a temporary table of the transaction (not in
Python memory), which also tells a user listed twice from one listed once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

LOCK = "SELECT pg_advisory_xact_lock(hashtext('commons:provision'), $1::int)"

SEEN_TABLE = """
CREATE TEMPORARY TABLE IF NOT EXISTS provision_seen (id bigint PRIMARY KEY) ON COMMIT DROP
"""

MARK_SEEN = """
INSERT INTO provision_seen (id) SELECT unnest($1::bigint[])
ON CONFLICT (id) DO NOTHING
RETURNING id
"""

# Columns provisioning reads and writes.
_COLUMNS = """
u.id, u.email, u.username, u.first_name, u.last_name, u.role, u.state, u.title,
u.contact_info, u.unique_identifier, u.employee_number
"""

MATCHES = f"""
SELECT {_COLUMNS} FROM users u
WHERE u.community_id = $1
  AND (u.unique_identifier = ANY($2::text[]) OR u.employee_number = ANY($3::text[])
       OR lower(u.email) = ANY($4::text[]))
"""

TAKEN_USERNAMES = """
SELECT lower(username) AS name FROM users
WHERE community_id = $1 AND lower(username) = ANY($2::text[])
"""

INSERT_MANY = """
INSERT INTO users (community_id, email, username, first_name, last_name, role, title,
                   contact_info, unique_identifier, employee_number)
SELECT $1, v.email, v.username, v.first_name, v.last_name, v.role, v.title, v.contact_info,
       v.unique_identifier, v.employee_number
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
            $8::jsonb[], $9::text[], $10::text[])
     AS v(email, username, first_name, last_name, role, title, contact_info,
          unique_identifier, employee_number)
RETURNING id, lower(email) AS email
"""

UPDATE_MANY = """
UPDATE users u SET email = v.email, first_name = v.first_name, last_name = v.last_name,
       role = v.role, title = v.title, contact_info = v.contact_info,
       unique_identifier = v.unique_identifier, employee_number = v.employee_number,
       state = 'active', updated_at = now()
FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
            $8::jsonb[], $9::text[], $10::text[])
     AS v(id, email, first_name, last_name, role, title, contact_info, unique_identifier,
          employee_number)
WHERE u.community_id = $1 AND u.id = v.id
"""

CUSTOM_VALUES = """
SELECT user_id, custom_field_id, value FROM custom_field_values
WHERE user_id = ANY($1::bigint[])
"""

UPSERT_VALUES = """
INSERT INTO custom_field_values (user_id, custom_field_id, value)
SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[])
ON CONFLICT (user_id, custom_field_id) DO UPDATE SET value = EXCLUDED.value
"""

DELETE_VALUES = """
DELETE FROM custom_field_values v
USING unnest($1::bigint[], $2::bigint[]) AS d(user_id, field_id)
WHERE v.user_id = d.user_id AND v.custom_field_id = d.field_id
"""

FIELDS = "SELECT id, lower(name) AS name FROM custom_fields WHERE community_id = $1"

ADD_FIELD = """
INSERT INTO custom_fields (community_id, name, position)
SELECT $1, $2, coalesce(max(position), 0) + 1 FROM custom_fields WHERE community_id = $1
ON CONFLICT (community_id, lower(name)) DO UPDATE SET name = custom_fields.name
RETURNING id
"""

INVITED = """
SELECT DISTINCT lower(email) AS email FROM group_invitations
WHERE community_id = $1 AND lower(email) = ANY($2::text[])
"""

DEACTIVATE_ABSENT = """
UPDATE users u SET state = 'inactive', session_epoch = u.session_epoch + 1, updated_at = now()
WHERE u.community_id = $1 AND u.state = 'active' AND u.id <> $2
  AND NOT EXISTS (SELECT 1 FROM provision_seen s WHERE s.id = u.id)
RETURNING u.id
"""

ACTIVE_ADMINS = """
SELECT count(*) FROM users WHERE community_id = $1 AND role = 'tenant_admin' AND state = 'active'
"""


async def begin(conn: asyncpg.Connection, community_id: int) -> None:
    """One provisioning run per community at a time (until this transaction ends)."""
    await conn.execute(LOCK, community_id % 2_000_000_000)
    await conn.execute(SEEN_TABLE)


async def mark_seen(conn: asyncpg.Connection, user_ids: Sequence[int]) -> set[int]:
    """Remember these users as present in the file; returns those not seen before."""
    if not user_ids:
        return set()
    return {r["id"] for r in await conn.fetch(MARK_SEEN, list(user_ids))}


async def matches(
    conn: asyncpg.Connection, community_id: int, unique_identifiers: Sequence[str],
    employee_numbers: Sequence[str], emails: Sequence[str],
) -> list[asyncpg.Record]:
    return await conn.fetch(
        MATCHES, community_id, list(unique_identifiers), list(employee_numbers),
        [e.lower() for e in emails],
    )


async def taken_usernames(
    conn: asyncpg.Connection, community_id: int, candidates: Sequence[str]
) -> set[str]:
    if not candidates:
        return set()
    rows = await conn.fetch(TAKEN_USERNAMES, community_id, [c.lower() for c in candidates])
    return {r["name"] for r in rows}


def _columns(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> list[list[Any]]:
    return [[row[name] for row in rows] for name in names]


async def insert_many(
    conn: asyncpg.Connection, community_id: int, rows: Sequence[dict[str, Any]]
) -> dict[str, int]:
    """Create users from dicts of the INSERT_MANY columns; lower(email) -> new id."""
    if not rows:
        return {}
    columns = _columns(rows, (
        "email", "username", "first_name", "last_name", "role", "title", "contact_info",
        "unique_identifier", "employee_number",
    ))
    return {r["email"]: r["id"] for r in await conn.fetch(INSERT_MANY, community_id, *columns)}


async def update_many(
    conn: asyncpg.Connection, community_id: int, rows: Sequence[dict[str, Any]]
) -> None:
    """Rewrite users (dicts of the UPDATE_MANY columns, with `id`) and make them active."""
    if not rows:
        return
    columns = _columns(rows, (
        "id", "email", "first_name", "last_name", "role", "title", "contact_info",
        "unique_identifier", "employee_number",
    ))
    await conn.execute(UPDATE_MANY, community_id, *columns)


async def custom_values(
    conn: asyncpg.Connection, user_ids: Sequence[int]
) -> dict[int, dict[int, str]]:
    out: dict[int, dict[int, str]] = {}
    if not user_ids:
        return out
    for row in await conn.fetch(CUSTOM_VALUES, list(user_ids)):
        out.setdefault(row["user_id"], {})[row["custom_field_id"]] = row["value"]
    return out


async def set_custom_values(
    conn: asyncpg.Connection, upserts: Sequence[tuple[int, int, str]],
    deletes: Sequence[tuple[int, int]],
) -> None:
    if upserts:
        await conn.execute(UPSERT_VALUES, *(list(c) for c in zip(*upserts, strict=True)))
    if deletes:
        await conn.execute(DELETE_VALUES, *(list(c) for c in zip(*deletes, strict=True)))


async def custom_fields(conn: asyncpg.Connection, community_id: int) -> dict[str, int]:
    """lower(name) -> id of the community's custom fields."""
    return {r["name"]: r["id"] for r in await conn.fetch(FIELDS, community_id)}


async def add_custom_field(conn: asyncpg.Connection, community_id: int, name: str) -> int:
    field_id: int = await conn.fetchval(ADD_FIELD, community_id, name)
    return field_id


async def invited(
    conn: asyncpg.Connection, community_id: int, emails: Sequence[str]
) -> set[str]:
    """Which of these addresses (lower case) hold pending group invitations."""
    if not emails:
        return set()
    return {r["email"] for r in await conn.fetch(INVITED, community_id, list(emails))}


async def deactivate_absent(
    conn: asyncpg.Connection, community_id: int, keep_id: int
) -> list[int]:
    """Active users not in the file become inactive (never `keep_id`) and their sessions end
    (a new session epoch); their ids."""
    return [r["id"] for r in await conn.fetch(DEACTIVATE_ABSENT, community_id, keep_id)]


async def analyze_users(conn: asyncpg.Connection) -> None:
    """Fresh planner statistics of users, counting the rows this transaction inserted: without
    them a community that grows from a few users to 100,000 in one run has every batch's
    lookup planned as a sequential scan (quadratic time)."""
    await conn.execute("ANALYZE users")


async def active_admins(conn: asyncpg.Connection, community_id: int) -> int:
    count: int = await conn.fetchval(ACTIVE_ADMINS, community_id)
    return count
