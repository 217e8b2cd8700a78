"""Fetch-or-raise permission checks: another community's or an invisible object is a 404."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import asyncpg

from app.context import Viewer
from app.errors import Forbidden, NotFound
from app.params import parse_id
from storage import comments as comment_storage
from storage import conversations, groups, users
from storage import messages as message_storage
from storage import polls as poll_storage
from storage import streams as stream_storage
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


async def access_group(
    conn: Conn, viewer: Viewer, group_id: int | str, *, admin: bool = False
) -> asyncpg.Record:
    """The FULL group row (storage.groups, plus `readable` and `listed`) if the viewer may see
    the group: a 404 for another community's group or a private one that neither has them as a
    member nor accepts requests (community admins see every group of their community).
    `group_id` may be a groupname when a str that is not an id. `admin=True` also requires a
    group admin (community admins count as one): a 403 otherwise."""
    if isinstance(group_id, int):
        row = await groups.by_id(conn, viewer.community_id, viewer.id, viewer.is_external,
                                 group_id)
    else:
        row = await groups.by_id_or_name(conn, viewer.community_id, viewer.id,
                                         viewer.is_external, parse_id(group_id), group_id)
    if row is None or not (row["listed"] or viewer.is_admin):
        raise NotFound("Group not found")
    if admin and not is_group_admin(viewer, row):
        raise Forbidden("Only a group admin can do that")
    return row


def is_group_admin(viewer: Viewer, group: Mapping[str, Any]) -> bool:
    """Whether the viewer administers the group (a FULL group row of storage.groups)."""
    return group["viewer_role"] == "admin" or viewer.is_admin


CONVERSATION_NOT_FOUND = "Conversation not found"  # non-members and strangers alike


async def access_conversation(
    conn: Conn, viewer: Viewer, conversation_id: int, *, lock: bool = False
) -> asyncpg.Record:
    """The conversation (storage.conversations MEMBER_VIEW, with the viewer's read state) if the
    viewer is a current member; a 404 for anyone else, community admins included. `lock=True`
    (inside a transaction) locks the conversation row until commit: writers of one conversation
    go one at a time."""
    row = await conversations.for_member(
        conn, viewer.community_id, conversation_id, viewer.id, lock=lock
    )
    if row is None:
        raise NotFound(CONVERSATION_NOT_FOUND)
    return row


# --- the feed: messages, comments, polls, streams ---------------------------------------------

FeedRow = Mapping[str, Any]


async def access_message(conn: Conn, viewer: Viewer, message_id: int) -> asyncpg.Record:
    """The message row (storage.messages ROW) if the viewer may read it; else a 404."""
    row = await message_storage.by_id(
        conn, viewer.community_id, viewer.id, viewer.is_external, message_id
    )
    if row is None or not row["readable"]:
        raise NotFound("Message not found")
    return row


async def access_comment(
    conn: Conn, viewer: Viewer, message_id: int, comment_id: int
) -> tuple[asyncpg.Record, asyncpg.Record]:
    """(message, comment) if the viewer may read the message and the comment is on it."""
    message = await access_message(conn, viewer, message_id)
    comment = await comment_storage.by_id(conn, viewer.community_id, message_id, comment_id)
    if comment is None:
        raise NotFound("Comment not found")
    return message, comment


async def access_poll(conn: Conn, viewer: Viewer, poll_id: int) -> asyncpg.Record:
    """A poll bound to a message the viewer may read, or the viewer's own unbound poll."""
    row = await poll_storage.by_id(conn, viewer.community_id, viewer.id, poll_id)
    if row is None:
        raise NotFound("Poll not found")
    if row["message_id"] is None:
        if row["user_id"] != viewer.id:
            raise NotFound("Poll not found")
    else:
        await access_message(conn, viewer, row["message_id"])
    return row


async def access_stream(conn: Conn, viewer: Viewer, stream_id: int) -> asyncpg.Record:
    """One of the viewer's system streams, or the stream of a group they may read."""
    row = await stream_storage.by_id(
        conn, viewer.community_id, viewer.id, viewer.is_external, stream_id
    )
    if row is None:
        raise NotFound("Stream not found")
    return row


def may_edit_message(viewer: Viewer, message: FeedRow) -> bool:
    """Its author, an admin of its group, or a community admin (also who may delete it)."""
    return (
        message["user_id"] == viewer.id
        or viewer.is_admin
        or message["viewer_group_role"] == "admin"
    )


def may_comment(viewer: Viewer, message: FeedRow) -> bool:
    """Anyone who reads it, unless its group is archived."""
    return message["group_state"] != "archived"


def may_like(viewer: Viewer, author_id: int) -> bool:
    """Anything readable but your own (and not in an archived group: see may_comment)."""
    return author_id != viewer.id


def may_edit_comment(viewer: Viewer, comment: FeedRow) -> bool:
    return bool(comment["user_id"] == viewer.id)


def may_delete_comment(
    viewer: Viewer, comment: FeedRow, message: FeedRow
) -> bool:
    """Its author, an admin of the message's group, or a community admin."""
    return (
        comment["user_id"] == viewer.id
        or viewer.is_admin
        or message["viewer_group_role"] == "admin"
    )
