"""Client devices: push registrations (migration 0009).

A device is identified by (community, registration_id, notification_type). Registering a token
that is already registered updates that row, also when another user of the community
registered it before: the device now belongs to whoever registered it last.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from storage.db import Conn

COLUMNS = """
d.id, d.community_id, d.user_id, d.registration_id, d.notification_type, d.platform,
d.push_enabled, d.push_mentions, d.push_announcements, d.push_replies,
d.push_conversation_activity, d.os_version, d.client_version, d.created_at, d.updated_at
"""

OF_USER = f"""
SELECT {COLUMNS} FROM client_devices d
WHERE d.community_id = $1 AND d.user_id = $2
ORDER BY d.id
"""
# the user's devices other than (registration_id $3, notification_type $4)
COUNT_OTHERS_OF_USER = """
SELECT count(*)::int FROM client_devices
WHERE community_id = $1 AND user_id = $2
  AND NOT (registration_id = $3 AND notification_type = $4)
"""

# A switch left out ($n null) keeps its value for the same owner, and starts at true for a new
# device or a new owner. os_version / client_version: kept unless given (for the same owner).
UPSERT = f"""
INSERT INTO client_devices AS d (community_id, user_id, registration_id, notification_type,
    platform, push_enabled, push_mentions, push_announcements, push_replies,
    push_conversation_activity, os_version, client_version)
VALUES ($1, $2, $3, $4, $5, coalesce($6, true), coalesce($7, true), coalesce($8, true),
        coalesce($9, true), coalesce($10, true), $11, $12)
ON CONFLICT (community_id, registration_id, notification_type) DO UPDATE SET
    user_id = EXCLUDED.user_id,
    platform = EXCLUDED.platform,
    push_enabled = coalesce($6, CASE WHEN d.user_id = $2 THEN d.push_enabled ELSE true END),
    push_mentions = coalesce($7, CASE WHEN d.user_id = $2 THEN d.push_mentions ELSE true END),
    push_announcements = coalesce(
        $8, CASE WHEN d.user_id = $2 THEN d.push_announcements ELSE true END),
    push_replies = coalesce($9, CASE WHEN d.user_id = $2 THEN d.push_replies ELSE true END),
    push_conversation_activity = coalesce(
        $10, CASE WHEN d.user_id = $2 THEN d.push_conversation_activity ELSE true END),
    os_version = CASE WHEN $11::text IS NOT NULL OR d.user_id <> $2 THEN $11 ELSE d.os_version END,
    client_version = CASE WHEN $12::text IS NOT NULL OR d.user_id <> $2 THEN $12
                          ELSE d.client_version END,
    updated_at = now()
RETURNING {COLUMNS}
"""

DELETE_OF_USER = """
DELETE FROM client_devices
WHERE community_id = $1 AND user_id = $2 AND registration_id = $3 AND notification_type = $4
"""
DELETE_BY_IDS = "DELETE FROM client_devices WHERE id = ANY($1::bigint[])"


@dataclass(frozen=True, slots=True)
class DeviceFields:
    """A registration; None leaves a switch or version as it is (true for a new device)."""

    registration_id: str
    notification_type: str
    platform: str
    push_enabled: bool | None = None
    push_mentions: bool | None = None
    push_announcements: bool | None = None
    push_replies: bool | None = None
    push_conversation_activity: bool | None = None
    os_version: str | None = None
    client_version: str | None = None


async def of_user(conn: Conn, community_id: int, user_id: int) -> list[asyncpg.Record]:
    return await conn.fetch(OF_USER, community_id, user_id)


async def count_others_of_user(
    conn: Conn, community_id: int, user_id: int, registration_id: str, notification_type: str
) -> int:
    """How many devices the user has besides this one."""
    return int(await conn.fetchval(
        COUNT_OTHERS_OF_USER, community_id, user_id, registration_id, notification_type
    ))


async def upsert(
    conn: Conn, community_id: int, user_id: int, fields: DeviceFields
) -> asyncpg.Record:
    row = await conn.fetchrow(
        UPSERT, community_id, user_id, fields.registration_id, fields.notification_type,
        fields.platform, fields.push_enabled, fields.push_mentions, fields.push_announcements,
        fields.push_replies, fields.push_conversation_activity, fields.os_version,
        fields.client_version,
    )
    assert row is not None
    return row


async def delete_of_user(
    conn: Conn, community_id: int, user_id: int, registration_id: str, notification_type: str
) -> bool:
    status = await conn.execute(
        DELETE_OF_USER, community_id, user_id, registration_id, notification_type
    )
    return status.endswith(" 1")


async def delete_by_ids(conn: Conn, ids: Sequence[int]) -> int:
    """Forget devices whose tokens a push provider rejected (their pending jobs go too)."""
    if not ids:
        return 0
    status = await conn.execute(DELETE_BY_IDS, list(set(ids)))
    return int(status.rsplit(" ", 1)[-1])
