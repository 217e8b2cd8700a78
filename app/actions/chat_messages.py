"""Group chat: posting, listing, marking read.

Rules (decided): the chat of a group is for its members. A group the viewer may not see is a
404; a visible group they don't belong to is a 403; a group without chat is a 422; posting into
an archived group is a 403 (reading it stays possible). A message has a body, attachments or
both. Posting marks the chat read for its author (the others' unread counts are counted when
read, so a post costs the same in any group size); PATCH marks it read up to now. The
`chat_message.created` event goes to `group:<id>`. Push: one job per message, fanned out to
the members' devices by `commons worker` (docs/notifications.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from app.actions import attachments as attachment_actions
from app.actions.notifications import enqueue_chat_push
from app.actions.remarks import body_html
from app.actions.work import work
from app.context import Viewer
from app.errors import Forbidden, Invalid, NotFound
from app.render.attachments import attachment as render_attachment
from app.render.chat_messages import chat_message
from realtime.channels import group_channel
from realtime.events import NewEvent
from realtime.hub import Hub
from storage import attachments as attachment_store
from storage import chat_messages, users

# attachments.subject_type of a chat message's attachments
CHAT_SUBJECT = "chat_message"
MAX_BODY = 20_000


async def access_chat(
    conn: asyncpg.Connection | asyncpg.Pool, viewer: Viewer, group_id: int
) -> asyncpg.Record:
    """The group (id, chat_enabled, state, viewer_role) if the viewer may use its chat. The
    same rules as access_group (a group the viewer may not see is a 404, community admins see
    every group), read without the group's per-member columns, so that a chat message costs
    the same in any group size."""
    group = await chat_messages.access(
        conn, viewer.community_id, viewer.id, viewer.is_external, group_id
    )
    if group is None or not (group["listed"] or viewer.is_admin):
        raise NotFound("Group not found")
    if group["viewer_role"] is None:
        raise Forbidden("Only members of the group can use its chat")
    if not group["chat_enabled"]:
        raise Invalid("Chat is not enabled for this group",
                      fields={"group_id": ["has no chat"]})
    return group


async def render_chat_messages(
    conn: asyncpg.Connection | asyncpg.Pool,
    viewer: Viewer,
    rows: Sequence[asyncpg.Record],
    base: str,
) -> list[dict[str, Any]]:
    """Chat messages with authors and attachments: the same queries for any page."""
    authors = {
        u["id"]: u for u in await users.by_ids(
            conn, viewer.community_id, chat_messages.author_ids(rows)
        )
    }
    attached = await attachment_store.for_subjects(conn, CHAT_SUBJECT, [r["id"] for r in rows])
    return [
        chat_message(
            r, base, user=authors[r["user_id"]],
            attachments=[render_attachment(a, base) for a in attached.get(r["id"], ())],
        )
        for r in rows
    ]


async def post_chat_message(
    pool: asyncpg.Pool,
    hub: Hub,
    viewer: Viewer,
    group_id: int,
    body: str | None,
    attachment_ids: Sequence[int],
    base: str,
) -> dict[str, Any]:
    text = (body or "").strip()
    if not text and not attachment_ids:
        raise Invalid.field("chat_message[body]", "can't be blank")
    if len(text) > MAX_BODY:
        raise Invalid.field("chat_message[body]",
                            f"is too long (maximum is {MAX_BODY} characters)")
    async with work(pool, hub, viewer.community_id) as w:
        group = await access_chat(w.conn, viewer, group_id)
        if group["state"] != "active":
            raise Forbidden("This group is archived: its chat is read-only")
        html = await body_html(w.conn, viewer, base, text)
        row = await chat_messages.insert(w.conn, viewer.community_id, group["id"], viewer.id,
                                         text, html)
        if attachment_ids:
            await attachment_actions.claim_attachments(
                w.conn, viewer, list(attachment_ids), CHAT_SUBJECT, row["id"]
            )
        await chat_messages.mark_read(w.conn, viewer.community_id, group["id"], viewer.id)
        rendered = (await render_chat_messages(w.conn, viewer, [row], base))[0]
        await enqueue_chat_push(w.conn, group, row, rendered["user"])  # one job, any size
        w.emit(NewEvent(group_channel(group["id"]), "chat_message.created", rendered))
    return rendered


async def list_chat_messages(
    pool: asyncpg.Pool,
    viewer: Viewer,
    group_id: int,
    base: str,
    *,
    before_id: int | None,
    since: datetime | None,
    offset: int,
    limit: int,
) -> list[dict[str, Any]]:
    group = await access_chat(pool, viewer, group_id)
    rows = await chat_messages.page(
        pool, group["id"], before_id=before_id, since=since, offset=offset, limit=limit
    )
    return await render_chat_messages(pool, viewer, rows, base)


async def mark_chat_read(pool: asyncpg.Pool, viewer: Viewer, group_id: int) -> None:
    async with work(pool, None, viewer.community_id) as w:
        w.private_to(viewer.id)  # the viewer's read state
        group = await access_chat(w.conn, viewer, group_id)
        await chat_messages.mark_read(w.conn, viewer.community_id, group["id"], viewer.id)
