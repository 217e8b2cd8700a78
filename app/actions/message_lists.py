"""What a message list shows (its `MessageQuery` scope, handed to
`app.actions.messages.list_messages`) and the stream it marks read when its first page is read.

`MessageQuery` is the scope type of the message lists; views build it from here, never from
storage.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import asyncpg

from app.access import access_stream
from app.actions.work import write_one
from app.context import Viewer
from app.errors import NotFound
from storage import external_systems
from storage import messages as message_storage
from storage import streams as stream_storage
from storage import topics as topic_storage
from storage.db import Conn
from storage.messages import MessageQuery as MessageQuery  # the views build scopes with it

COMPANY = MessageQuery(stream="company")
HOME = MessageQuery(stream="home", sticky_first=True)
EVERYTHING = MessageQuery()
"""Every message the viewer may read."""


def query_of_stream(stream: Any) -> MessageQuery:
    """The scope of one of the viewer's streams (a group's, or a system stream)."""
    if stream["kind"] == "group":
        return MessageQuery(group_id=stream["group_id"])
    if stream["kind"] in message_storage.STREAM_KINDS:
        return MessageQuery(stream=stream["kind"],
                            sticky_first=stream["kind"] in ("home", "company"))
    raise NotFound("Stream not found")


async def stream_query(conn: Conn, viewer: Viewer, stream_id: int) -> MessageQuery:
    return query_of_stream(await access_stream(conn, viewer, stream_id))


# Marking a stream read is a unit of work of one statement (`write_one`: autocommit, no BEGIN
# or COMMIT) that bumps no version: a stream's read state shows in GET /api/streams only, which
# polls no ETag (docs/polling.md).


async def open_stream(
    pool: asyncpg.Pool, viewer: Viewer, stream_id: int, *, mark_read: bool
) -> asyncpg.Record:
    """One of the viewer's streams (NotFound otherwise); `mark_read`: read up to now, by the
    statement that finds it (its row as found)."""
    if not mark_read:
        return await access_stream(pool, viewer, stream_id)
    rows = await write_one(pool, viewer.community_id, stream_storage.by_id_marking_read(
        viewer.community_id, viewer.id, viewer.is_external, stream_id), private_to=())
    if not rows:
        raise NotFound("Stream not found")  # as access_stream
    return rows[0]


async def mark_home_read(conn: asyncpg.Connection, viewer: Viewer) -> int:
    """Mark the viewer's Home read; answers their count of groups, read by the same statement
    (the plan of the Home page read next on `conn` depends on it: an `Opening` of
    app.actions.messages.list_messages)."""
    rows = await write_one(conn, viewer.community_id, stream_storage.marking_home_read(
        viewer.community_id, viewer.id), private_to=())
    return int(rows[0][0])


async def open_group(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, *, mark_read: bool
) -> MessageQuery:
    """The scope of a group's stream the viewer may read (NotFound otherwise); `mark_read`:
    its stream is read up to now."""
    if not mark_read:
        await _readable_group(pool, viewer, group_id)
        return MessageQuery(group_id=group_id)
    rows = await write_one(pool, viewer.community_id, stream_storage.group_marking_read(
        viewer.community_id, viewer.id, viewer.is_external, group_id), private_to=())
    if not rows or not rows[0]["readable"]:
        raise NotFound("Group not found")  # as _readable_group
    return MessageQuery(group_id=group_id)


async def _readable_group(conn: Conn, viewer: Viewer, group_id: int) -> None:
    group = await message_storage.group_for_posting(
        conn, viewer.community_id, viewer.id, viewer.is_external, group_id
    )
    if group is None or not group["readable"]:
        raise NotFound("Group not found")


async def group_of_stream(conn: Conn, viewer: Viewer, stream_id: int) -> int | None:
    """Where posting into a stream puts the message: its group (None: a system stream)."""
    stream = await access_stream(conn, viewer, stream_id)
    if stream["kind"] not in ("group", *message_storage.STREAM_KINDS):
        raise NotFound("Stream not found")
    return stream["group_id"] if stream["kind"] == "group" else None


async def access_external_system(conn: Conn, viewer: Viewer, system_id: int) -> None:
    """Another community's system (or none) is a 404, not an empty list that confirms it."""
    if await external_systems.by_id(conn, viewer.community_id, system_id) is None:
        raise NotFound("External system not found")


def narrowed(
    scope: MessageQuery, *, since: datetime | None, tag: str | None, **extra: Any
) -> MessageQuery:
    """The scope plus the filters every list takes (since, tag) and `extra` fields."""
    changes: dict[str, Any] = dict(extra)
    if since is not None:
        changes["since"] = since
    if tag is not None:
        changes["topic"] = topic_storage.normalize(tag)
    return replace(scope, **changes)


def search(text: str) -> MessageQuery:
    """Full-text search among what the viewer may read."""
    return MessageQuery(stream="company", search=text)
