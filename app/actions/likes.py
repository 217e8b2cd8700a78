"""Likes of messages and comments. Anything readable but your own can be liked (403 for your
own, and in an archived group); liking twice gives back the first like, never a second one.
Only the liker removes a like (403 for anyone else's)."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from app.access import access_comment, access_message, may_comment, may_like
from app.actions.work import work
from app.context import Viewer
from app.errors import Forbidden, NotFound
from storage import likes as like_storage
from storage.db import Conn


@dataclass(frozen=True)
class Liked:
    row: asyncpg.Record
    created: bool
    parent_likes_count: int


async def _target(
    conn: Conn, viewer: Viewer, message_id: int, comment_id: int | None
) -> tuple[asyncpg.Record, int]:
    """Check the viewer reads the message (and that the comment is on it): the message and the
    id of the liked thing's author."""
    if comment_id is None:
        message = await access_message(conn, viewer, message_id)
        return message, message["user_id"]
    message, comment = await access_comment(conn, viewer, message_id, comment_id)
    return message, comment["user_id"]


async def like(
    pool: asyncpg.Pool, viewer: Viewer, message_id: int, comment_id: int | None = None
) -> Liked:
    """Like a message (comment_id None) or a comment. No notification: the interface's filters
    have no kind for likes."""
    async with work(pool, None, viewer.community_id) as w:
        message, author = await _target(w.conn, viewer, message_id, comment_id)
        if not may_like(viewer, author):
            raise Forbidden("You can't like your own message or comment")
        if not may_comment(viewer, message):
            raise Forbidden("This group is archived: its messages can't be liked")
        row = await like_storage.like(w.conn, viewer.community_id, viewer.id, message_id,
                                      comment_id)
        count = await like_storage.count(w.conn, message_id, comment_id)
    return Liked(row, bool(row["created"]), count)


async def access_like(
    conn: Conn, viewer: Viewer, message_id: int, comment_id: int | None, like_id: int
) -> asyncpg.Record:
    await _target(conn, viewer, message_id, comment_id)
    row = await like_storage.by_id(conn, viewer.community_id, message_id, comment_id, like_id)
    if row is None:
        raise NotFound("Like not found")
    return row


async def unlike(
    pool: asyncpg.Pool, viewer: Viewer, message_id: int, comment_id: int | None, like_id: int
) -> None:
    async with work(pool, None, viewer.community_id) as w:
        row = await access_like(w.conn, viewer, message_id, comment_id, like_id)
        if row["user_id"] != viewer.id:
            raise Forbidden("You can only remove your own like")
        await like_storage.delete(w.conn, viewer.community_id, like_id)


async def likers(
    conn: Conn, viewer: Viewer, message_id: int, comment_id: int | None, offset: int, limit: int
) -> list[asyncpg.Record]:
    """FULL user rows of who likes it (oldest like first)."""
    await _target(conn, viewer, message_id, comment_id)
    return await like_storage.likers(
        conn, viewer.community_id, viewer.id, message_id, comment_id, offset, limit
    )
