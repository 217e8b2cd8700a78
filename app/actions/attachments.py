"""Attachments: uploading, reading rights, claiming by messages/comments/remarks/chat, thumbnails,
deleting, and profile photos.

Reading rights (`can_read_attachment`): never across communities; the uploader always; an
unclaimed upload nobody else (not even a community admin: it is a draft); a claimed one whoever
may read what claimed it (attachment_subject_readable() in SQL, the same rule the lists use):
an avatar everyone in the community, a message its readers (group members, or every internal
user for public groups and messages without a group), comments/remarks/chat messages the
readers their migration defines, until then the uploader only. Deleting: the uploader or a
community admin (who may delete what they cannot read, as moderation); anyone else gets 403
when they can read it and 404 when they cannot.

Thumbnails are made lazily, on the first request for any thumbnail of an image (all four at
once, decoded once, off the event loop), stored in the blob store and recorded in
`attachments.thumbnails`. A file that is not an image has no thumbnails: asking for one is a
404 (the original is always there). Media files are the image attachments.

For other engineers: upload files in their own step (`store_file` for an UploadedFile from
`read_params`, or POST /api/attachments), then inside the subject's transaction
`claim_attachments(conn, viewer, ids, "comment", comment_id)`; render with
`storage.attachments.for_subjects` + `app.render.attachments`. When a subject is deleted:
`rows = await storage.attachments.delete_for_subjects(conn, ...)` in the transaction and
`await delete_blobs(blobs, rows)` after commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mimetypes
import re
import unicodedata
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from app.access import access_user, require_self_or_admin
from app.actions.work import work
from app.context import Viewer
from app.errors import Forbidden, Invalid, NotFound
from app.images import (
    INLINE_TYPES,
    SNIFF_BYTES,
    ImageInfo,
    ThumbnailError,
    make_thumbnails,
    sniff,
)
from app.params import Page, UploadedFile
from app.render.attachments import display_filename, is_image
from app.uploads import too_large as too_large  # the views take it from here
from storage import attachments, users
from storage.blobs import (
    CHUNK_SIZE,
    DEFAULT_CONTENT_TYPE,
    BlobNotFound,
    BlobReader,
    BlobStore,
    BlobTooLarge,
    content_disposition,
)
from storage.db import Conn

log = logging.getLogger("commons.attachments")

SUBJECT_TYPES = attachments.SUBJECT_TYPES
# Thumbnails are made from originals up to this size (larger images are served, not resized).
MAX_THUMBNAIL_SOURCE_BYTES = 50 * 1024 * 1024
MAX_FILENAME = 200
# An upload not attached to anything within this time is deleted by prune_unclaimed.
UNCLAIMED_LIFETIME = timedelta(days=2)
CLAIM_PROBLEM = "must be your own attachments that are not attached to anything yet"

_MIME = mimetypes.MimeTypes()  # Python's own table only: the same answer on every machine
_MIME_RE = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*$")
_UNSAFE_CHARS = re.compile(r"[^\w.\-]+")


# --- names and types -------------------------------------------------------------------------


def sanitize_filename(raw: str | None) -> str:
    """The last path component, with anything but letters, digits, `_`, `.` and `-` made `_`
    (as the original service did: `Widget 11.pdf` -> `Widget_11.pdf`)."""
    name = unicodedata.normalize("NFC", (raw or "").replace("\\", "/").rsplit("/", 1)[-1])
    name = _UNSAFE_CHARS.sub("_", name).strip("._") or "file"
    if len(name) > MAX_FILENAME:
        stem, dot, ext = name.rpartition(".")
        keep = f".{ext[:20]}" if dot and stem else ""
        name = name[: MAX_FILENAME - len(keep)] + keep
    return name


def content_type_of(filename: str, declared: str | None, image: ImageInfo | None) -> str:
    """What the bytes say (an image Pillow recognized), else the extension, else the type the
    client declared, else application/octet-stream."""
    if image is not None:
        return image.content_type
    guessed = _MIME.guess_type(filename, strict=False)[0]
    if guessed:
        return guessed
    value = (declared or "").split(";", 1)[0].strip().lower()
    if _MIME_RE.match(value):
        return value
    return DEFAULT_CONTENT_TYPE


def new_storage_key(community_id: int) -> str:
    return f"c{community_id}/attachments/{uuid.uuid4().hex}/original"


def thumbnail_key(storage_key: str, name: str, content_type: str) -> str:
    ext = "png" if content_type == "image/png" else "jpg"
    return f"{storage_key.rsplit('/', 1)[0]}/{name}.{ext}"


# --- uploading -------------------------------------------------------------------------------


async def upload_stream(
    pool: asyncpg.Pool,
    blobs: BlobStore,
    viewer: Viewer,
    *,
    filename: str | None,
    declared_type: str | None,
    chunks: AsyncIterable[bytes],
    max_bytes: int,
) -> asyncpg.Record:
    """Store an upload as it arrives and record it, unclaimed. Over max_bytes: TooLarge (413)
    with nothing stored. Only the first SNIFF_BYTES are held, to recognize an image."""
    name = sanitize_filename(filename)
    iterator = aiter(chunks)
    head = bytearray()
    while len(head) < SNIFF_BYTES:
        try:
            chunk = await anext(iterator)
        except StopAsyncIteration:
            break
        head += chunk
        if len(head) > max_bytes:
            raise too_large(max_bytes)
    image = sniff(bytes(head))
    content_type = content_type_of(name, declared_type, image)

    async def everything() -> AsyncIterator[bytes]:
        yield bytes(head)
        async for rest in iterator:
            yield rest

    key = new_storage_key(viewer.community_id)
    try:
        size = await blobs.put_stream(
            key, everything(), content_type=content_type, max_bytes=max_bytes
        )
    except BlobTooLarge:
        raise too_large(max_bytes) from None
    return await _record_unclaimed(pool, blobs, viewer, name, content_type, image, key, size)


async def _record_unclaimed(
    pool: asyncpg.Pool, blobs: BlobStore, viewer: Viewer, name: str, content_type: str,
    image: ImageInfo | None, key: str, size: int,
) -> asyncpg.Record:
    """The row of a stored upload, unclaimed (the blob is deleted if that fails)."""
    sized = image if image is not None and image.thumbnailable else None
    try:
        return await attachments.insert(
            pool, viewer.community_id, viewer.id, filename=name, content_type=content_type,
            byte_size=size, storage_key=key,
            width=sized.width if sized else None, height=sized.height if sized else None,
        )
    except BaseException:
        await delete_keys(blobs, [key])
        raise


async def store_file(
    pool: asyncpg.Pool,
    blobs: BlobStore,
    viewer: Viewer,
    upload: UploadedFile,
    *,
    max_bytes: int | None = None,
) -> asyncpg.Record:
    """An unclaimed attachment from a file that `read_params` decoded (e.g. `comment[attachment]`
    or `remark[attachments][]`), streamed from its spooled copy; claim it afterwards with
    claim_attachments."""
    limit = max_bytes if max_bytes is not None else max(upload.size, 1)
    if upload.size > limit:
        raise too_large(limit)
    name = sanitize_filename(upload.filename)
    image = sniff(await upload.head(SNIFF_BYTES))
    content_type = content_type_of(name, upload.content_type, image)
    key = new_storage_key(viewer.community_id)
    size = await put_upload(blobs, key, upload, content_type=content_type, max_bytes=limit)
    return await _record_unclaimed(pool, blobs, viewer, name, content_type, image, key, size)


async def put_upload(
    blobs: BlobStore, key: str, upload: UploadedFile, *, content_type: str,
    max_bytes: int | None,
) -> int:
    """Store a spooled upload under key; its size. Moved into the store without a copy where
    the store can (a local one on the same file system), else streamed. Over max_bytes: 413
    with nothing stored."""
    if max_bytes is not None and upload.size > max_bytes:
        raise too_large(max_bytes)
    fd = upload.fileno()
    if fd is not None:
        size = await blobs.adopt_file(key, fd)
        if size is not None:
            return size
    try:
        return await blobs.put_stream(
            key, upload.chunks(), content_type=content_type, max_bytes=max_bytes
        )
    except BlobTooLarge:
        raise too_large(max_bytes or upload.size) from None


# --- claiming --------------------------------------------------------------------------------


async def claim_attachments(
    conn: Conn, viewer: Viewer, ids: Sequence[int], subject_type: str, subject_id: int
) -> list[asyncpg.Record]:
    """Inside the subject's transaction: attach the viewer's own unclaimed attachments `ids`
    to it; their rows in the order of ids. Any other id (someone else's, already attached,
    unknown, another community's) is a 422 on `attachment_ids`, and the caller's transaction
    rolls back."""
    if subject_type not in SUBJECT_TYPES:
        raise ValueError(f"unknown subject type {subject_type!r}")
    wanted = list(dict.fromkeys(int(i) for i in ids))
    if not wanted:
        return []
    rows = await attachments.claim(
        conn, viewer.community_id, viewer.id, wanted, subject_type, subject_id
    )
    if len(rows) != len(wanted):
        raise Invalid.field("attachment_ids", CLAIM_PROBLEM)
    return rows


# --- reading ---------------------------------------------------------------------------------


async def can_read_attachment(conn: Conn, viewer: Viewer, row: Mapping[str, Any]) -> bool:
    """May the viewer read this attachment row (see the module docstring)?"""
    if row["community_id"] != viewer.community_id:
        return False
    if row["uploader_id"] == viewer.id:
        return True
    if row["subject_type"] is None:
        return False
    return await attachments.subject_readable(
        conn, row["subject_type"], row["subject_id"], row["community_id"], viewer.id,
        viewer.is_external,
    )


async def access_attachment(conn: Conn, viewer: Viewer, attachment_id: int) -> asyncpg.Record:
    """The attachment if the viewer may read it, else 404 (one query)."""
    row = await attachments.by_id_for_viewer(
        conn, viewer.community_id, attachment_id, viewer.id, viewer.is_external
    )
    if row is None or not row["readable"]:
        raise NotFound("Attachment not found")
    return row


@dataclass(frozen=True)
class Variant:
    """One stored form of an attachment: the original or a thumbnail."""

    key: str
    content_type: str
    filename: str

    @property
    def inline(self) -> bool:
        """Shown in the browser (safe raster images) rather than downloaded."""
        return self.content_type in INLINE_TYPES

    @property
    def disposition(self) -> str:
        """Its Content-Disposition header."""
        return content_disposition(self.filename, inline=self.inline)


READ_CHUNK = CHUNK_SIZE
"""How much to read at a time when streaming a file in or out."""


@contextlib.asynccontextmanager
async def open_variant(blobs: BlobStore, found: Variant) -> AsyncIterator[BlobReader]:
    """The stored bytes of `found`; NotFound when the file is missing."""
    try:
        async with blobs.open(found.key) as blob:
            yield blob
    except BlobNotFound:
        raise NotFound("The attachment's file is missing") from None


async def user_attachments(
    conn: Conn, viewer: Viewer, user_id: int, page: Page
) -> list[asyncpg.Record]:
    """What the user uploaded that the viewer may read, newest first."""
    user = await access_user(conn, viewer, user_id)
    return await attachments.by_uploader(
        conn, viewer.community_id, viewer.id, viewer.is_external, user["id"],
        page.offset, page.limit,
    )


async def group_attachments(
    conn: Conn, viewer: Viewer, group_id: int, page: Page
) -> list[asyncpg.Record]:
    """The attachments of the group's messages, newest first. A group the viewer cannot see is
    a 404; one they see but whose content they cannot read (private, requests allowed) a 403."""
    group = await attachments.group_for_viewer(
        conn, viewer.community_id, group_id, viewer.id, viewer.is_external
    )
    if group is None or not group["listed"]:
        raise NotFound("Group not found")
    if not group["readable"]:
        raise Forbidden("Only members of this group can see its attachments")
    return await attachments.by_group(conn, viewer.community_id, group["id"], page.offset,
                                      page.limit)


async def variant_blob(
    pool: asyncpg.Pool, blobs: BlobStore, row: Mapping[str, Any], variant: str
) -> Variant:
    """Where the original or a thumbnail of a readable attachment is; thumbnails are made on
    the first request. A file that is not an image has no thumbnails: 404."""
    filename = display_filename(row)
    if variant == "original":
        return Variant(row["storage_key"], row["content_type"], filename)
    if not is_image(row):
        raise NotFound("This attachment is not an image and has no thumbnails")
    thumbnails = row["thumbnails"] or {}
    if variant not in thumbnails:
        thumbnails = await _make_thumbnails(pool, blobs, row)
    made = thumbnails[variant]
    stem = filename.rsplit(".", 1)[0] if "." in filename else filename
    ext = "png" if made["content_type"] == "image/png" else "jpg"
    return Variant(made["key"], made["content_type"], f"{stem}_{variant}.{ext}")


async def _make_thumbnails(
    pool: asyncpg.Pool, blobs: BlobStore, row: Mapping[str, Any]
) -> dict[str, Any]:
    if row["byte_size"] > MAX_THUMBNAIL_SOURCE_BYTES:
        raise NotFound("This image is too large for thumbnails")
    data = await blobs.read(row["storage_key"], max_bytes=MAX_THUMBNAIL_SOURCE_BYTES)
    try:
        made = await asyncio.to_thread(make_thumbnails, data, row["width"], row["height"])
    except ThumbnailError:
        log.warning("attachment %s: thumbnails failed", row["id"], exc_info=True)
        raise NotFound("This image has no thumbnails") from None
    entries: dict[str, Any] = {}
    for thumb in made:
        entries[thumb.name] = {
            "key": thumbnail_key(row["storage_key"], thumb.name, thumb.content_type),
            "content_type": thumb.content_type,
            "byte_size": len(thumb.data),
            "width": thumb.width,
            "height": thumb.height,
        }
    # Two first requests at once both make and write the same keys: harmless.
    await asyncio.gather(*(
        blobs.put_bytes(entries[t.name]["key"], t.data, content_type=t.content_type)
        for t in made
    ))
    await attachments.add_thumbnails(pool, row["community_id"], row["id"], entries)
    return {**(row["thumbnails"] or {}), **entries}


# --- deleting --------------------------------------------------------------------------------


async def delete_keys(blobs: BlobStore, keys: Sequence[str]) -> None:
    """Best effort: a blob left behind is only wasted space, never a visible file."""
    try:
        await blobs.delete(keys)
    except Exception:
        log.exception("could not delete blobs %s", list(keys))


async def delete_blobs(blobs: BlobStore, rows: Sequence[Mapping[str, Any]]) -> None:
    """After commit: remove the originals and thumbnails of deleted attachment rows."""
    keys = [key for row in rows for key in attachments.blob_keys(row)]
    if keys:
        await delete_keys(blobs, keys)


async def delete_attachment(
    pool: asyncpg.Pool, blobs: BlobStore, viewer: Viewer, attachment_id: int
) -> asyncpg.Record:
    async with work(pool, None, viewer.community_id) as w:
        row = await attachments.by_id_for_viewer(
            w.conn, viewer.community_id, attachment_id, viewer.id, viewer.is_external
        )
        if row is None:
            raise NotFound("Attachment not found")
        if row["uploader_id"] != viewer.id and not viewer.is_admin:
            if not row["readable"]:
                raise NotFound("Attachment not found")
            raise Forbidden("Only the uploader or a community admin can delete an attachment")
        deleted = await attachments.delete(w.conn, viewer.community_id, attachment_id)
        if deleted is None:
            raise NotFound("Attachment not found")
        if deleted["subject_type"] == "avatar":
            owner = await users.by_id(w.conn, viewer.community_id, deleted["subject_id"])
            if owner is not None and owner["avatar_id"] == deleted["id"]:
                await users.update(w.conn, viewer.community_id, owner["id"], {"avatar_id": None})
        w.after(lambda: delete_blobs(blobs, [deleted]))
    return deleted


async def prune_unclaimed(
    pool: asyncpg.Pool,
    blobs: BlobStore,
    *,
    older_than: timedelta = UNCLAIMED_LIFETIME,
    batch: int = 500,
) -> int:
    """Delete uploads nobody attached to anything within `older_than` (a job for
    `commons worker`); how many."""
    before = datetime.now(UTC) - older_than
    rows = await attachments.delete_unclaimed(pool, before, batch)
    await delete_blobs(blobs, rows)
    return len(rows)


# --- profile photos --------------------------------------------------------------------------


async def avatar_image(upload: UploadedFile) -> ImageInfo:
    """What the upload holds if it can be an avatar; else 422 on `user[profile_photo][data]`
    (checked before a user is created with it, so a bad photo creates nobody)."""
    image = sniff(await upload.head(SNIFF_BYTES))
    if image is None or not image.thumbnailable:
        raise Invalid.field(
            "user[profile_photo][data]", "must be a PNG, JPEG, GIF, WebP, BMP or TIFF image"
        )
    return image


async def store_avatar(
    pool: asyncpg.Pool,
    blobs: BlobStore,
    viewer: Viewer,
    user_id: int,
    upload: UploadedFile,
    *,
    max_bytes: int | None = None,
) -> int:
    """`user[profile_photo][data]`: make the image the user's avatar (the user themselves or a
    community admin); the new attachment's id. The previous avatar is deleted. Not an image:
    422 on `user[profile_photo][data]`."""
    require_self_or_admin(viewer, user_id)
    await access_user(pool, viewer, user_id)
    image = await avatar_image(upload)
    key = new_storage_key(viewer.community_id)
    size = await put_upload(blobs, key, upload, content_type=image.content_type,
                            max_bytes=max_bytes)
    try:
        async with work(pool, None, viewer.community_id) as w:
            user = await access_user(w.conn, viewer, user_id)
            row = await attachments.insert(
                w.conn, viewer.community_id, user_id, filename=sanitize_filename(upload.filename),
                content_type=image.content_type, byte_size=size, storage_key=key,
                width=image.width, height=image.height, subject_type="avatar",
                subject_id=user_id,
            )
            await users.update(w.conn, viewer.community_id, user_id, {"avatar_id": row["id"]})
            if user["avatar_id"] is not None:
                previous = await attachments.by_id(w.conn, viewer.community_id, user["avatar_id"])
                if previous is not None and previous["subject_type"] == "avatar" \
                        and previous["subject_id"] == user_id:
                    old = await attachments.delete(w.conn, viewer.community_id, previous["id"])
                    if old is not None:
                        w.after(lambda: delete_blobs(blobs, [old]))
    except BaseException:
        await delete_keys(blobs, [key])
        raise
    avatar_id: int = row["id"]
    return avatar_id
