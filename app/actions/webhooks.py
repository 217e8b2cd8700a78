"""Incoming group webhooks (decisions.md, "Group webhook integrations").

Rules:
- A group admin (or a community admin) lists, creates and deletes a group's webhooks; other
  members get 403, whoever may not see the group 404. No webhook is made in an archived group
  (403). `webhook[name]` is required.
- A webhook has a random identifier and a random 256-bit secret, shown once (in the create
  response, also inside `url`) and kept as its SHA-256.
- The incoming call `POST /api/webhooks/<identifier>/<secret>` carries no other credentials.
  An identifier unknown in this community or a wrong secret (compared in constant time) is a
  404 and creates nothing. Then the call counts against the webhook's rate limit (60 a minute
  by default: 429 with Retry-After beyond it). `message[body]` is required (422);
  `message[attachment]` is a file (multipart) or a base64 `data:` URI string.
- The message is posted in the group by the webhook's creator (messages need a real author),
  through the messages' creation action without requiring membership, with `source` named after
  the webhook. It is a 403 when the creator is no longer active or can no longer read the
  group, or when the group is archived (the caller holds the secret: nothing to hide).
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from dataclasses import dataclass
from typing import Any

import asyncpg

from app.access import access_group
from app.actions.attachments import delete_blobs, store_file
from app.actions.content_filters import check_text
from app.actions.external_systems import hash_secret, new_secret, secret_matches
from app.actions.messages import NewMessage, insert_message
from app.actions.work import work
from app.context import Viewer
from app.errors import Forbidden, Invalid, NotFound, RateLimited
from app.params import Page, UploadedFile
from app.ratelimit import RateLimiter
from app.render.messages import SOURCES
from app.uploads import InvalidDataUri, data_uri_filename, too_large
from realtime.hub import Hub
from storage import attachments as attachment_storage
from storage import messages as message_storage
from storage import users as user_storage
from storage import webhooks as storage
from storage.blobs import BlobStore
from storage.db import connection

MAX_NAME = 100
WEBHOOK_SOURCE = "webhook"
ATTACHMENT = "message[attachment]"
_DATA_URI = re.compile(r"^data:([^,]*?),(.*)$", re.DOTALL)


# --- managing a group's webhooks ------------------------------------------------------------


async def list_webhooks(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, page: Page
) -> list[asyncpg.Record]:
    async with connection(pool) as conn:
        group = await access_group(conn, viewer, group_id, admin=True)
        return await storage.of_group(conn, viewer.community_id, group["id"], page.offset,
                                      page.limit)


@dataclass(frozen=True)
class CreatedWebhook:
    row: asyncpg.Record
    secret: str


async def create_webhook(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, name: str | None
) -> CreatedWebhook:
    name = (name or "").strip()
    async with work(pool, None, viewer.community_id) as w:
        group = await access_group(w.conn, viewer, group_id, admin=True)
        if group["state"] == "archived":
            raise Forbidden("This group is archived: it takes no new webhooks")
        if not name:
            raise Invalid.field("webhook[name]", "can't be blank")
        if len(name) > MAX_NAME:
            raise Invalid.field("webhook[name]", f"is too long (maximum is {MAX_NAME} characters)")
        secret = new_secret()
        row = await storage.insert(
            w.conn, viewer.community_id, group["id"], name=name, identifier=secrets.token_hex(12),
            secret_hash=hash_secret(secret), created_by=viewer.id,
        )
    return CreatedWebhook(row, secret)


async def delete_webhook(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, webhook_id: int
) -> None:
    async with work(pool, None, viewer.community_id) as w:
        group = await access_group(w.conn, viewer, group_id, admin=True)
        if not await storage.delete(w.conn, viewer.community_id, group["id"], webhook_id):
            raise NotFound("Webhook not found")


# --- the incoming call ------------------------------------------------------------------------


def decode_data_uri(value: str, max_bytes: int) -> UploadedFile:
    """`data:<type>;base64,<data>` as a file named `attachment.<ext>`; a 422 on
    message[attachment] for anything else, a 413 over max_bytes."""
    match = _DATA_URI.match(value.strip())
    if not match:
        raise Invalid.field(ATTACHMENT, "must be a file or a base64 data URI")
    meta, payload = match.groups()
    params = [p.strip().lower() for p in meta.split(";")]
    if "base64" not in params[1:]:
        raise Invalid.field(ATTACHMENT, "must be a base64 data URI")
    content_type = params[0] or "application/octet-stream"
    payload = re.sub(r"\s+", "", payload)
    if len(payload) * 3 // 4 > max_bytes + 3:
        raise too_large(max_bytes)
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise Invalid.field(ATTACHMENT, "is not valid base64") from None
    if len(data) > max_bytes:
        raise too_large(max_bytes)
    if not data:
        raise Invalid.field(ATTACHMENT, "is empty")
    return UploadedFile.from_bytes(data_uri_filename(content_type), content_type, data)


def attachment_of(value: Any, max_bytes: int) -> UploadedFile | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, InvalidDataUri):  # a JSON data URI, decoded as it arrived
        raise Invalid.field(ATTACHMENT, value.reason)
    if isinstance(value, UploadedFile):
        if value.size > max_bytes:
            raise too_large(max_bytes)
        return value
    if isinstance(value, str):
        return decode_data_uri(value, max_bytes)
    raise Invalid.field(ATTACHMENT, "must be a file or a base64 data URI")


def source_of(name: str) -> str:
    """The message's `source` is named after the webhook (a name that is one of the known
    sources would pass for it: those get the generic webhook source)."""
    return WEBHOOK_SOURCE if name in SOURCES else name


@dataclass(frozen=True)
class Incoming:
    body: str | None
    attachment: Any = None


async def verify(
    pool: asyncpg.Pool,
    limiter: RateLimiter,
    community_id: int,
    identifier: str,
    secret: str,
    *,
    rate_limit: int,
) -> asyncpg.Record:
    """The webhook these path values name (404 otherwise), counted against its rate limit."""
    hook = await storage.by_identifier(pool, community_id, identifier[:200])
    if not secret_matches(secret, hook["secret_hash"] if hook is not None else None) \
            or hook is None:
        raise NotFound("Webhook not found")
    retry = await limiter.hit(f"webhook:{hook['id']}", rate_limit)
    if retry is not None:
        raise RateLimited(retry, "Too many calls of this webhook; try again later")
    return hook


async def post_incoming(
    pool: asyncpg.Pool,
    blobs: BlobStore,
    hook: asyncpg.Record,
    base: str,
    incoming: Incoming,
    *,
    max_bytes: int,
    hub: Hub | None = None,
) -> int:
    """Post the incoming message of a verified webhook; its id (notifications are published
    with `hub` after commit)."""
    community_id = hook["community_id"]
    body = incoming.body or ""
    if not body.strip():
        raise Invalid.field("message[body]", "can't be blank")
    upload = attachment_of(incoming.attachment, max_bytes)

    creator = await user_storage.by_id(pool, community_id, hook["created_by"])
    if creator is None or creator["state"] != "active":
        raise Forbidden("The webhook's creator is no longer active")
    viewer = Viewer(id=creator["id"], community_id=community_id, role=creator["role"],
                    row=creator)
    group = await message_storage.group_for_posting(
        pool, community_id, viewer.id, viewer.is_external, hook["group_id"]
    )
    if group is None or not group["readable"]:
        raise Forbidden("The webhook's creator can no longer post in this group")
    if group["state"] == "archived":
        raise Forbidden("This group is archived: nothing can be posted in it")

    stored = await store_file(pool, blobs, viewer, upload, max_bytes=max_bytes) \
        if upload is not None else None
    try:
        async with work(pool, hub, community_id) as w:
            await check_text(w.conn, community_id, body, field="message[body]")
            message_id = await insert_message(w, viewer, base, NewMessage(
                body=body, group_id=hook["group_id"],
                attachment_ids=[stored["id"]] if stored is not None else [],
                source=source_of(hook["name"]), require_membership=False,
            ))
    except BaseException:
        if stored is not None:
            async with connection(pool) as conn:
                deleted = await attachment_storage.delete(conn, community_id, stored["id"])
            if deleted is not None:
                await delete_blobs(blobs, [deleted])
        raise
    return message_id
