"""Badges: the images thanks carry. Each community starts with a default set."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from storage.db import Conn

COLUMNS = "b.id, b.community_id, b.image_key, b.name, b.description, b.position"

CREATE_DEFAULTS = "SELECT commons_create_default_badges($1)"
LIST = f"SELECT {COLUMNS} FROM badges b WHERE b.community_id = $1 ORDER BY b.position, b.id"
BY_ID = f"SELECT {COLUMNS} FROM badges b WHERE b.community_id = $1 AND b.id = $2"
BY_IDS = f"""
SELECT {COLUMNS} FROM badges b WHERE b.community_id = $1 AND b.id = ANY($2::bigint[])
"""


async def create_default_badges(conn: Conn, community_id: int) -> None:
    """The default set of a new community (defined in migrations/0008_thanks_badges.sql)."""
    await conn.execute(CREATE_DEFAULTS, community_id)


async def list_badges(conn: Conn, community_id: int) -> list[asyncpg.Record]:
    return await conn.fetch(LIST, community_id)


async def by_id(conn: Conn, community_id: int, badge_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(BY_ID, community_id, badge_id)


async def by_ids(
    conn: Conn, community_id: int, badge_ids: Sequence[int]
) -> dict[int, asyncpg.Record]:
    if not badge_ids:
        return {}
    rows = await conn.fetch(BY_IDS, community_id, list(set(badge_ids)))
    return {r["id"]: r for r in rows}
