"""Streams: the viewer's system streams (Home, @Mentions, Bookmarked, Sent, Company; made on
first use) and the stream of each group they belong to. External contributors have no Company
stream, and no primary (Home) stream until they belong to a group."""

from __future__ import annotations

from typing import Any

import asyncpg

from app.actions.work import work
from app.context import Viewer
from app.render.streams import stream
from storage import messages as message_storage
from storage import streams as stream_storage


async def list_streams(
    pool: asyncpg.Pool, viewer: Viewer, base: str, stream_names: str = "current"
) -> list[dict[str, Any]]:
    """System streams in their fixed order, then group streams by group name (4 queries).
    `stream_names`: the community's ('current' or 'classic')."""
    async with work(pool, None, viewer.community_id) as w:
        # only creates the viewer's missing streams: no list with an ETag changes
        w.private_to()
        await stream_storage.ensure(w.conn, viewer.community_id, viewer.id, viewer.is_external)
        rows = await stream_storage.of_viewer(
            w.conn, viewer.community_id, viewer.id, viewer.is_external
        )
        group_ids = [r["group_id"] for r in rows if r["group_id"] is not None]
        groups = {g["id"]: g for g in await message_storage.groups(
            w.conn, viewer.community_id, viewer.id, viewer.is_external, group_ids)}
    return [stream(r, base, groups.get(r["group_id"]), stream_names) for r in rows]


async def primary_stream(
    pool: asyncpg.Pool, viewer: Viewer, base: str, stream_names: str = "current"
) -> dict[str, Any] | None:
    """The Home stream, or None for an external contributor who belongs to no group."""
    if viewer.is_external and not await stream_storage.belongs_to_a_group(
        pool, viewer.community_id, viewer.id
    ):
        return None
    for item in await list_streams(pool, viewer, base, stream_names):
        if item["default"]:
            return item
    return None
