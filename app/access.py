"""Fetch-or-raise permission checks: another community's or an invisible object is a 404."""

from __future__ import annotations

import asyncpg

from app.context import Viewer
from app.errors import Forbidden, NotFound
from storage import users
from storage.db import Conn


async def access_user(conn: Conn, viewer: Viewer, user_id: int) -> asyncpg.Record:
    row = await users.by_id(conn, viewer.community_id, user_id)
    if row is None:
        raise NotFound("User not found")
    return row


def require_admin(viewer: Viewer) -> None:
    if not viewer.is_admin:
        raise Forbidden("Only a community admin can do that")


def require_self_or_admin(viewer: Viewer, user_id: int) -> None:
    if viewer.id != user_id and not viewer.is_admin:
        raise Forbidden("You can only do that for yourself")
