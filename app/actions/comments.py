"""Comments: adding (bumps the thread in every stream), editing (its author only), deleting
(its author, an admin of the message's group, or a community admin), and reading a thread in a
fixed number of queries.

Commenting needs to read the message; nothing is written in an archived group (403). A
comment's @mentions become recipients of the thread and its #tags topics of the thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from app.access import access_comment, access_message, may_comment, may_delete_comment
from app.actions.attachments import claim_attachments, delete_blobs
from app.actions.messages import attachments_of, posted_users, process_body
from app.actions.notifications import notify_new_comment
from app.actions.work import Work, work
from app.context import Viewer
from app.errors import Forbidden, Invalid, NotFound
from app.render.attachments import attachments_and_media_files
from app.render.comments import comment
from app.render.feed import FeedData
from realtime.hub import Hub
from storage import attachments as attachment_storage
from storage import comments as comment_storage
from storage import likes as like_storage
from storage import messages as message_storage
from storage import topics as topic_storage
from storage import users as user_storage
from storage.blobs import BlobStore
from storage.db import Conn
from storage.rows import MentionableUserRow, NewCommentRow

MAX_TEXT = 50_000


async def load_comments(
    conn: Conn,
    viewer: Viewer,
    rows: Sequence[asyncpg.Record],
    base: str,
    likes_per_comment: int,
) -> FeedData:
    """What comments of one thread show: their likes, users, links, attachments, recipients
    and tags (at most 7 queries whatever their number)."""
    data = FeedData(base, viewer)
    if not rows:
        return data
    ids = [c["id"] for c in rows]
    likes = await like_storage.top(
        conn, viewer.id, [], ids, per_message=0, per_comment=likes_per_comment
    )
    user_ids = {c["user_id"] for c in rows} | {lk["user_id"] for lk in likes}
    resource_ids = {i for c in rows for i in c["external_resource_ids"] or ()}
    resources = await message_storage.resources(conn, viewer.community_id, list(resource_ids))
    files, media = await attachments_of(conn, base, "comment", ids)
    await load_comment_recipients_and_tags(conn, viewer, rows, data, user_ids)
    users = await user_storage.by_ids(conn, viewer.community_id, list(user_ids))
    data.users = {u["id"]: u for u in users}
    data.resources = {r["id"]: r for r in resources}
    data.attachments, data.media_files = files, media
    top: dict[tuple[int, int | None], list[asyncpg.Record]] = {}
    for lk in likes:
        top.setdefault((lk["message_id"], lk["comment_id"]), []).append(lk)
    data.likes = top
    return data


async def load_comment_recipients_and_tags(
    conn: Conn, viewer: Viewer, comments: Sequence[asyncpg.Record], data: FeedData,
    user_ids: set[int],
) -> None:
    """Fill data.comment_recipients and data.comment_tags (two queries, none without
    comments); adds the recipient users to `user_ids` and loads the groups the caller has not
    (one more query when a comment names a group)."""
    if not comments:
        return
    message_ids = [c["message_id"] for c in comments]
    comment_ids = [c["id"] for c in comments]
    found = await message_storage.comment_recipients(conn, message_ids, comment_ids)
    by_comment: dict[int, list[asyncpg.Record]] = {}
    for r in found:
        by_comment.setdefault(r["comment_id"], []).append(r)
        if r["user_id"] is not None:
            user_ids.add(r["user_id"])
    data.comment_recipients = by_comment
    data.comment_tags = await topic_storage.of_comments(conn, message_ids, comment_ids)
    missing = {r["group_id"] for r in found if r["group_id"] is not None} - set(data.groups)
    if missing:
        groups = await message_storage.groups(
            conn, viewer.community_id, viewer.id, viewer.is_external, list(missing))
        data.groups = {**data.groups, **{g["id"]: g for g in groups}}


async def render_comments(
    conn: Conn,
    viewer: Viewer,
    message: asyncpg.Record,
    rows: Sequence[asyncpg.Record],
    base: str,
    likes_per_comment: int = 100,
) -> list[dict[str, Any]]:
    data = await load_comments(conn, viewer, rows, base, likes_per_comment)
    return [comment(c, message, data) for c in rows]


async def list_comments(
    conn: Conn, viewer: Viewer, base: str, message_id: int, offset: int, limit: int,
    likes_per_comment: int = 100,
) -> list[dict[str, Any]]:
    """A page of a thread's comments, oldest first."""
    message = await access_message(conn, viewer, message_id)
    rows = await comment_storage.of_message(conn, message_id, offset, limit)
    return await render_comments(conn, viewer, message, rows, base, likes_per_comment)


async def render_comment(
    conn: Conn, viewer: Viewer, base: str, message_id: int, comment_id: int
) -> dict[str, Any]:
    message, row = await access_comment(conn, viewer, message_id, comment_id)
    return (await render_comments(conn, viewer, message, [row], base))[0]


def _text(text: str | None, has_attachments: bool) -> str:
    value = text or ""
    if not value.strip() and not has_attachments:
        raise Invalid.field("comment[text]", "can't be blank")
    if len(value) > MAX_TEXT:
        raise Invalid.field("comment[text]", f"is too long (maximum is {MAX_TEXT} characters)")
    return value


@dataclass(frozen=True)
class NewComment:
    text: str | None
    attachment_ids: Sequence[int] = ()


@dataclass
class PostedComment:
    """A comment just posted, and what its author's rendering needs of what the posting
    already knows (so that the 201 reads only what it did not)."""

    message: asyncpg.Record  # as access_message read it
    row: NewCommentRow
    recipients: list[dict[str, int | None]]
    attachments: list[asyncpg.Record]
    users: list[MentionableUserRow]  # those its @names may mean


async def create_comment(
    pool: asyncpg.Pool, viewer: Viewer, base: str, message_id: int, new: NewComment,
    hub: Hub | None = None,
) -> int:
    """Comment in its own unit of work (its events published with `hub`); the comment's id."""
    async with work(pool, hub, viewer.community_id) as w:
        posted = await _post(w, viewer, base, message_id, new)
    return posted.row["id"]


async def create_and_render(
    pool: asyncpg.Pool, viewer: Viewer, base: str, message_id: int, new: NewComment,
    hub: Hub | None = None,
) -> dict[str, Any]:
    """POST /api/messages/:id/comments: the comment rendered for its author from what the
    posting wrote and read, as messages.create_and_render answers a message (likes made
    after the commit are not part of the answer)."""
    async with work(pool, hub, viewer.community_id) as w:
        posted = await _post(w, viewer, base, message_id, new)
    return comment(posted.row, posted.message, await _posted_data(pool, viewer, posted, base))


async def _post(
    w: Work, viewer: Viewer, base: str, message_id: int, new: NewComment
) -> PostedComment:
    conn = w.conn
    text = _text(new.text, bool(new.attachment_ids))
    message = await access_message(conn, viewer, message_id)
    if not may_comment(viewer, message):
        raise Forbidden("This group is archived: nothing can be posted in it")
    body = await process_body(conn, viewer, base, text, checked=text, field="comment[text]",
                              write_topics=False)
    row = await comment_storage.insert(
        conn, viewer.community_id, message_id=message_id, user_id=viewer.id, text=text,
        html_body=body.html, external_resource_ids=body.resource_ids,
        recipients=body.mentions, topic_names=body.tags,
    )
    if row is None:  # deleted since it was read
        raise NotFound("Message not found")
    attached: list[asyncpg.Record] = []
    if new.attachment_ids:
        attached = await claim_attachments(conn, viewer, new.attachment_ids, "comment", row["id"])
    w.emit(*await notify_new_comment(
        conn, viewer.community_id, message_id, row["id"], viewer.id, body.mentioned_user_ids,
        text=text, message_title=message["title"],
    ))
    return PostedComment(
        message, row, message_storage.stored_recipients(body.mentions),
        sorted(attached, key=lambda a: a["id"]), body.users,
    )


async def _posted_data(conn: Conn, viewer: Viewer, posted: PostedComment, base: str) -> FeedData:
    """load_comments of a comment just posted, reading only what the posting does not know:
    its links, the users and groups it names that were not read with its mentions (none
    usually), and the author when the viewer carries no row."""
    cid, row = viewer.community_id, posted.row
    data = FeedData(base, viewer)
    data.users = await posted_users(conn, viewer, posted.users, posted.recipients)
    group_ids = [r["group_id"] for r in posted.recipients if r["group_id"] is not None]
    if group_ids:
        groups = await message_storage.groups(conn, cid, viewer.id, viewer.is_external, group_ids)
        data.groups = {g["id"]: g for g in groups}
    resources = await message_storage.resources(conn, cid, row["external_resource_ids"] or [])
    data.resources = {r["id"]: r for r in resources}
    data.comment_recipients = {row["id"]: list(posted.recipients)}
    data.comment_tags = {row["id"]: list(row["tag_names"])} if row["tag_names"] else {}
    if posted.attachments:
        rendered, files = attachments_and_media_files(posted.attachments, base)
        data.attachments = {("comment", row["id"]): rendered}
        data.media_files = {("comment", row["id"]): files}
    return data


async def update_comment(
    pool: asyncpg.Pool, viewer: Viewer, base: str, message_id: int, comment_id: int,
    text: str | None,
) -> None:
    async with work(pool, None, viewer.community_id) as w:
        conn = w.conn
        message, row = await access_comment(conn, viewer, message_id, comment_id)
        if row["user_id"] != viewer.id:
            raise Forbidden("Only the comment's author can edit it")
        if not may_comment(viewer, message):
            raise Forbidden("This group is archived: its comments can't be changed")
        if text is None:
            return
        has_files = bool(await attachment_storage.for_subjects(conn, "comment", [comment_id]))
        value = _text(text, has_files)
        body = await process_body(conn, viewer, base, value, checked=value,
                                  field="comment[text]")
        await comment_storage.update(
            conn, viewer.community_id, comment_id, text=value, html_body=body.html,
            external_resource_ids=body.resource_ids,
        )
        await message_storage.clear_comment_recipients(conn, comment_id)
        await message_storage.add_recipients(
            conn, viewer.community_id, message_id, body.mentions, comment_id=comment_id
        )
        await topic_storage.set_message_topics(
            conn, viewer.community_id, message_id, body.topic_ids, comment_id=comment_id
        )


async def delete_comment(
    pool: asyncpg.Pool, viewer: Viewer, message_id: int, comment_id: int,
    blobs: BlobStore | None = None,
) -> None:
    async with work(pool, None, viewer.community_id) as w:
        conn = w.conn
        message, row = await access_comment(conn, viewer, message_id, comment_id)
        if not may_delete_comment(viewer, row, message):
            raise Forbidden(
                "Only the comment's author, a group admin or a community admin can delete it"
            )
        files = await attachment_storage.delete_for_subjects(
            conn, viewer.community_id, "comment", [comment_id]
        )
        if not await comment_storage.delete(conn, viewer.community_id, comment_id):
            raise NotFound("Comment not found")
        if blobs is not None and files:
            store = blobs
            w.after(lambda: delete_blobs(store, files))
