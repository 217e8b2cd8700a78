"""Flags (bookmarks): any message the viewer reads; flagging twice gives back the first flag.
The flagged messages make the viewer's Bookmarked stream."""

from __future__ import annotations

import asyncpg

from app.access import access_message
from app.actions.work import work
from app.context import Viewer
from app.errors import NotFound
from storage import flags as flag_storage


async def flag(pool: asyncpg.Pool, viewer: Viewer, message_id: int) -> tuple[int, bool]:
    """(flag id, whether it was created now)."""
    async with work(pool, None, viewer.community_id) as w:
        w.private_to(viewer.id)  # a bookmark is seen by its owner only
        await access_message(w.conn, viewer, message_id)
        row = await flag_storage.flag(w.conn, viewer.community_id, viewer.id, message_id)
    return row["id"], bool(row["created"])


async def unflag(pool: asyncpg.Pool, viewer: Viewer, message_id: int, flag_id: int) -> None:
    """Remove one of the viewer's own flags (anyone else's is not found)."""
    async with work(pool, None, viewer.community_id) as w:
        w.private_to(viewer.id)
        await access_message(w.conn, viewer, message_id)
        if not await flag_storage.delete_own(
            w.conn, viewer.community_id, viewer.id, message_id, flag_id
        ):
            raise NotFound("Flag not found")
