"""Badges: the community's badges, read by every member."""

from __future__ import annotations

import asyncpg

from app.context import Viewer
from app.errors import NotFound
from storage import badges
from storage.db import Conn


async def list_badges(conn: Conn, viewer: Viewer) -> list[asyncpg.Record]:
    return await badges.list_badges(conn, viewer.community_id)


async def badge(conn: Conn, viewer: Viewer, badge_id: int) -> asyncpg.Record:
    """The badge, or NotFound (also for another community's)."""
    row = await badges.by_id(conn, viewer.community_id, badge_id)
    if row is None:
        raise NotFound("Badge not found")
    return row
