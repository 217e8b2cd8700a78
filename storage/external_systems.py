"""External systems: their rows and API client credentials (migrations/0010_integrations.sql).

The client secret is kept as its SHA-256 only (the action hashes and compares it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import asyncpg

from storage.db import Conn

COLUMNS = """
s.id, s.community_id, s.name, s.description, s.system_url, s.state, s.external_system_type,
s.sharepoint_version, s.not_in_company_stream, s.avatar_id, s.profile_photo_url,
s.client_identifier, s.created_by, s.created_at, s.updated_at
"""

LIST = f"""
SELECT {COLUMNS} FROM external_systems s
WHERE s.community_id = $1
ORDER BY s.id
OFFSET $2 LIMIT $3
"""

BY_ID = f"SELECT {COLUMNS} FROM external_systems s WHERE s.community_id = $1 AND s.id = $2"
BY_ID_FOR_UPDATE = BY_ID + " FOR UPDATE"

# The credentials check: the row and its secret's hash, by client identifier, in a community.
BY_CLIENT_IDENTIFIER = f"""
SELECT {COLUMNS}, s.client_secret_hash FROM external_systems s
WHERE s.community_id = $1 AND s.client_identifier = $2
"""

INSERT = f"""
INSERT INTO external_systems AS s (
    community_id, name, description, system_url, external_system_type, sharepoint_version,
    not_in_company_stream, profile_photo_url, client_identifier, client_secret_hash, created_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
RETURNING {COLUMNS}
"""

# Columns an update may set (the action maps parameters onto these names).
UPDATABLE = (
    "name", "description", "system_url", "state", "external_system_type", "sharepoint_version",
    "not_in_company_stream", "avatar_id", "profile_photo_url",
)


async def list_page(
    conn: Conn, community_id: int, offset: int, limit: int
) -> list[asyncpg.Record]:
    return await conn.fetch(LIST, community_id, offset, limit)


async def by_id(
    conn: Conn, community_id: int, system_id: int, *, lock: bool = False
) -> asyncpg.Record | None:
    """The system; `lock=True` (inside a transaction) locks its row until commit."""
    return await conn.fetchrow(BY_ID_FOR_UPDATE if lock else BY_ID, community_id, system_id)


async def by_client_identifier(
    conn: Conn, community_id: int, client_identifier: str
) -> asyncpg.Record | None:
    return await conn.fetchrow(BY_CLIENT_IDENTIFIER, community_id, client_identifier)


async def insert(
    conn: Conn,
    community_id: int,
    *,
    name: str,
    description: str | None,
    system_url: str,
    external_system_type: str,
    sharepoint_version: str | None,
    not_in_company_stream: bool,
    profile_photo_url: str | None,
    client_identifier: str,
    client_secret_hash: str,
    created_by: int,
) -> asyncpg.Record:
    row = await conn.fetchrow(
        INSERT, community_id, name, description, system_url, external_system_type,
        sharepoint_version, not_in_company_stream, profile_photo_url, client_identifier,
        client_secret_hash, created_by,
    )
    assert row is not None
    return row


async def update(
    conn: Conn, community_id: int, system_id: int, changes: Mapping[str, Any]
) -> asyncpg.Record | None:
    """Set the UPDATABLE columns named in `changes` (and updated_at); the new row."""
    unknown = set(changes) - set(UPDATABLE)
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    names = list(changes)
    sets = ", ".join(f"{name} = ${i + 3}" for i, name in enumerate(names))
    sql = f"""
    UPDATE external_systems AS s SET {sets + ', ' if sets else ''}updated_at = now()
    WHERE s.community_id = $1 AND s.id = $2
    RETURNING {COLUMNS}
    """
    return await conn.fetchrow(sql, community_id, system_id, *(changes[n] for n in names))
