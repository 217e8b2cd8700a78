"""Remarks: posting into a conversation, and rendering activities in a fixed number of queries.

POST /api/conversations/:id/remarks runs as design.md "One request, end to end" says: one unit
of work (access, the remark, its attachments, unread counters, push jobs, the event appended
last), then after commit the event is published. The activity is rendered once, and that same
JSON is the event data and the response; its slow parts are made before the conversation's row
is locked (see post_in_transaction).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from app.access import CONVERSATION_NOT_FOUND, access_conversation
from app.actions import attachments as attachment_actions
from app.actions.messages import Limits, load_feed
from app.actions.notifications import remark_push
from app.actions.work import Work, work
from app.context import Viewer
from app.errors import Invalid, NotFound
from app.markup.entities import extract_mentions
from app.markup.html import MentionTarget, render_html
from app.params import UploadedFile
from app.render.activities import activity
from app.render.attachments import attachment as render_attachment
from app.render.messages import is_shareable, message
from app.urls import user_tooltip_url, user_url
from realtime.channels import conversation_channel
from realtime.events import NewEvent
from realtime.hub import Hub
from storage import activities, messages
from storage import attachments as attachment_store
from storage.blobs import BlobStore
from storage.db import Conn

# attachments.subject_type of a remark's attachments
REMARK_SUBJECT = "remark"
# a shared message shows no comments and no likes
SHARED_LIMITS = Limits(comments=0, likes=0, comment_likes=0)
MAX_TEXT = 20_000


@dataclass
class Remark:
    """A validated remark; `files` are uploads to store before the transaction."""

    text: str = ""
    attachment_ids: list[int] = field(default_factory=list)
    files: list[UploadedFile] = field(default_factory=list)
    longitude: float | None = None
    latitude: float | None = None
    shared_message_id: int | None = None
    client_provided_guid: str | None = None

    @property
    def empty(self) -> bool:
        return not self.text.strip() and not self.attachment_ids and not self.files


def check_remark(remark: Remark, param: str = "remark") -> None:
    if remark.empty:
        raise Invalid(
            "A remark needs text, attachments or both",
            fields={f"{param}[text]": ["can't be blank"]},
        )
    if len(remark.text) > MAX_TEXT:
        raise Invalid.field(f"{param}[text]", f"is too long (maximum is {MAX_TEXT} characters)")
    if (remark.longitude is None) != (remark.latitude is None):
        raise Invalid.field(f"{param}[location]", "needs both longitude and latitude")


async def render_activities(
    conn: asyncpg.Connection | asyncpg.Pool,
    viewer: Viewer,
    rows: Sequence[asyncpg.Record],
    base: str,
) -> list[dict[str, Any]]:
    """Activities with their attachments and shared messages: the same queries for any page."""
    attached = await attachment_store.for_subjects(
        conn, REMARK_SUBJECT, [r["id"] for r in rows if r["verb"] == "post"]
    )
    shared_ids = [r["shared_message_id"] for r in rows if r["shared_message_id"] is not None]
    shared = await shared_messages(conn, viewer, shared_ids, base)
    return [
        activity(
            r, base,
            attachments=[render_attachment(a, base) for a in attached.get(r["id"], ())],
            shared_message=shared.get(r["shared_message_id"]),
        )
        for r in rows
    ]


async def shared_messages(
    conn: asyncpg.Connection | asyncpg.Pool, viewer: Viewer, ids: Sequence[int], base: str
) -> dict[int, dict[str, Any]]:
    """The shared messages the viewer may read, rendered without likes, comments and
    shared_message, by id (one they may not read is left out: null)."""
    if not ids:
        return {}
    rows = await messages.readable_by_ids(
        conn, viewer.community_id, viewer.id, viewer.is_external, list(dict.fromkeys(ids))
    )
    data = await load_feed(conn, viewer, rows, base, SHARED_LIMITS)
    return {r["id"]: message(r, data, shared=True) for r in rows}


async def body_html(conn: Conn, viewer: Viewer, base: str, text: str) -> str:
    """The html of a remark or chat message: Markdown, with `@username` mentions of the
    community's users made links (one query, only when the text mentions someone)."""
    if not text:
        return ""
    targets: dict[str, MentionTarget] = {}
    names = extract_mentions(text)
    if names:
        for u in await messages.mentionable_users(conn, viewer.community_id, names):
            targets[u["username"].lower()] = MentionTarget(
                "user", u["id"], u["username"], user_url(base, u["id"], u["username"]),
                user_tooltip_url("", u["id"], u["username"]),
            )
    return render_html(text, base_url=base, mentions=targets)


async def check_shareable(conn: asyncpg.Connection, viewer: Viewer, message_id: int) -> None:
    """A message the viewer may read and whose `shareable` is true; otherwise a 422 (the same
    for a message they may not read, so nothing leaks)."""
    row = await messages.by_id(conn, viewer.community_id, viewer.id, viewer.is_external,
                               message_id)
    if row is None or not row["readable"] or not is_shareable(row):
        raise Invalid.field("remark[shared_message_id]", "is not a message you can share")


@dataclass(frozen=True)
class Uploads:
    """Where remark[attachments][] files go: the blob store and the size limit."""

    blobs: BlobStore
    max_bytes: int


async def store_uploads(
    pool: asyncpg.Pool, uploads: Uploads | None, viewer: Viewer, files: Sequence[UploadedFile]
) -> list[int]:
    """Store uploaded files as (unclaimed) attachments before the transaction, which claims
    them; the files of a request that fails later stay unclaimed drafts of their uploader."""
    if not files:
        return []
    if uploads is None:
        raise Invalid.field("remark[attachments]", "can't be uploaded here")
    ids: list[int] = []
    for upload in files:
        row = await attachment_actions.store_file(
            pool, uploads.blobs, viewer, upload, max_bytes=uploads.max_bytes
        )
        ids.append(int(row["id"]))
    return ids


async def post_in_transaction(
    w: Work, viewer: Viewer, conversation_id: int, remark: Remark, base: str
) -> tuple[dict[str, Any], bool]:
    """Post `remark` into the conversation in `w`: (activity JSON, created).

    The conversation's row lock, which keeps its activities in commit order (unread counts and
    the ordering of lists rely on it), is held from the insert to the commit. Everything slow
    comes before it: the Markdown, the mention lookup, the shared message's rendering. Under
    the lock only writes happen and the activity is assembled from parts made before, plus the
    inserted row and its claimed attachments (docs/conversations.md, "Rendering and the
    conversation lock"). The membership is checked once, by the statement that takes the lock
    and writes the remark (storage.activities.post_remark), unless the remark reads something
    first (a guid's earlier remark, a shared message): then also before, so that a non-member
    learns nothing of them. A non-member's text is rendered for nothing and refused with the
    same 404.

    A remark whose client_provided_guid this author already used in this conversation is not
    posted again: the first one is returned, with no event, and created=False.
    """
    conn = w.conn
    guid = remark.client_provided_guid
    if guid or remark.shared_message_id is not None:
        # before the reads below: a non-member learns nothing of them (404)
        await access_conversation(conn, viewer, conversation_id)
    if guid:
        existing = await activities.by_guid(conn, conversation_id, viewer.id, guid)
        if existing is not None:
            return (await render_activities(conn, viewer, [existing], base))[0], False
    shared: dict[str, Any] | None = None
    if remark.shared_message_id is not None:
        await check_shareable(conn, viewer, remark.shared_message_id)
        shared = (await shared_messages(conn, viewer, [remark.shared_message_id], base)).get(
            remark.shared_message_id)
    text = remark.text.strip()
    html = await body_html(conn, viewer, base, text)
    # the lock, the membership again under it (a member may have left meanwhile) and the
    # remark with its bookkeeping: one statement
    row = await activities.post_remark(
        conn, viewer.community_id, conversation_id, viewer.id,
        text=text, html=html, longitude=remark.longitude, latitude=remark.latitude,
        client_provided_guid=guid, shared_message_id=remark.shared_message_id,
    )
    if row is None:
        raise NotFound(CONVERSATION_NOT_FOUND)
    if row["id"] is None:  # the same guid, committed meanwhile by a concurrent retry
        assert guid is not None
        existing = await activities.by_guid(conn, conversation_id, viewer.id, guid)
        assert existing is not None
        return (await render_activities(conn, viewer, [existing], base))[0], False
    attached = await attachment_actions.claim_attachments(
        conn, viewer, remark.attachment_ids, REMARK_SUBJECT, row["id"]
    ) if remark.attachment_ids else []
    push = remark_push(row)  # the other members' devices
    rendered = activity(  # attachments in id order, as every read lists them
        row, base, shared_message=shared,
        attachments=[render_attachment(a, base) for a in sorted(attached, key=lambda a: a["id"])],
    )
    w.emit(NewEvent(conversation_channel(conversation_id), "remark.created", rendered))
    if push is not None:
        w.emit(push)
    return rendered, True


async def post_remark(
    pool: asyncpg.Pool,
    hub: Hub,
    viewer: Viewer,
    conversation_id: int,
    remark: Remark,
    base: str,
    uploads: Uploads | None = None,
) -> tuple[dict[str, Any], bool]:
    """POST /api/conversations/:id/remarks: (the Activity JSON, whether it was created now)."""
    check_remark(remark)
    if remark.files:  # no files stored for someone who may not post here
        await access_conversation(pool, viewer, conversation_id)
    uploaded = await store_uploads(pool, uploads, viewer, remark.files)
    remark.attachment_ids = [*remark.attachment_ids, *uploaded]
    async with work(pool, hub, viewer.community_id) as w:
        return await post_in_transaction(w, viewer, conversation_id, remark, base)
