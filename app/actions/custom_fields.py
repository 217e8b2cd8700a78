"""Custom profile fields: admins define them; every member reads them."""

from __future__ import annotations

import asyncpg

from app.access import require_admin
from app.actions.work import work
from app.context import Viewer
from app.errors import Conflict, Invalid, NotFound
from storage import custom_fields
from storage.db import Conn


async def list_fields(conn: Conn, viewer: Viewer) -> list[asyncpg.Record]:
    return await custom_fields.list_fields(conn, viewer.community_id)


async def field(conn: Conn, viewer: Viewer, field_id: int) -> asyncpg.Record:
    """The field, or NotFound (also for another community's)."""
    row = await custom_fields.by_id(conn, viewer.community_id, field_id)
    if row is None:
        raise NotFound("Custom field not found")
    return row


def _conflict() -> Conflict:
    return Conflict("Name has already been taken", fields={"name": ["has already been taken"]})


async def create_field(
    pool: asyncpg.Pool, viewer: Viewer, name: str | None, order: int | None
) -> asyncpg.Record:
    require_admin(viewer)
    if not name or not name.strip():
        raise Invalid.field("name", "can't be blank")
    try:
        async with work(pool, None, viewer.community_id) as w:
            return await custom_fields.insert(w.conn, viewer.community_id, name.strip(), order)
    except asyncpg.UniqueViolationError:
        raise _conflict() from None


async def update_field(
    pool: asyncpg.Pool, viewer: Viewer, field_id: int, name: str | None, order: int | None
) -> asyncpg.Record:
    require_admin(viewer)
    if name is not None and not name.strip():
        raise Invalid.field("name", "can't be blank")
    try:
        async with work(pool, None, viewer.community_id) as w:
            row = await custom_fields.update(
                w.conn, viewer.community_id, field_id, name.strip() if name else None, order
            )
    except asyncpg.UniqueViolationError:
        raise _conflict() from None
    if row is None:
        raise NotFound("Custom field not found")
    return row


async def delete_field(pool: asyncpg.Pool, viewer: Viewer, field_id: int) -> None:
    require_admin(viewer)
    async with work(pool, None, viewer.community_id) as w:
        if not await custom_fields.delete(w.conn, viewer.community_id, field_id):
            raise NotFound("Custom field not found")
