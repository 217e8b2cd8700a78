"""Incoming group webhooks (table group_webhooks, migrations/0010_integrations.sql).

The secret is kept as its SHA-256 only; the action compares it in constant time.
"""

from __future__ import annotations

import asyncpg

from storage.db import Conn

COLUMNS = "w.id, w.community_id, w.group_id, w.name, w.identifier, w.created_by, w.created_at"

OF_GROUP = f"""
SELECT {COLUMNS} FROM group_webhooks w
WHERE w.community_id = $1 AND w.group_id = $2
ORDER BY w.id
OFFSET $3 LIMIT $4
"""

# The incoming call: the webhook and its secret's hash, by identifier, in a community.
BY_IDENTIFIER = f"""
SELECT {COLUMNS}, w.secret_hash FROM group_webhooks w
WHERE w.community_id = $1 AND w.identifier = $2
"""

INSERT = f"""
INSERT INTO group_webhooks AS w (community_id, group_id, name, identifier, secret_hash,
                                 created_by)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING {COLUMNS}
"""

DELETE = "DELETE FROM group_webhooks WHERE community_id = $1 AND group_id = $2 AND id = $3"


async def of_group(
    conn: Conn, community_id: int, group_id: int, offset: int, limit: int
) -> list[asyncpg.Record]:
    return await conn.fetch(OF_GROUP, community_id, group_id, offset, limit)


async def by_identifier(
    conn: Conn, community_id: int, identifier: str
) -> asyncpg.Record | None:
    return await conn.fetchrow(BY_IDENTIFIER, community_id, identifier)


async def insert(
    conn: Conn, community_id: int, group_id: int, *, name: str, identifier: str,
    secret_hash: str, created_by: int,
) -> asyncpg.Record:
    row = await conn.fetchrow(INSERT, community_id, group_id, name, identifier, secret_hash,
                              created_by)
    assert row is not None
    return row


async def delete(conn: Conn, community_id: int, group_id: int, webhook_id: int) -> bool:
    return bool((await conn.execute(DELETE, community_id, group_id, webhook_id)).endswith(" 1"))
