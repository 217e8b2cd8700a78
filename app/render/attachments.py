"""The JSON forms of an attachment (key order as keys.md): `attachment` (messages, comments,
POST /api/attachments, the attachment lists) and `media_file` (`message.media_files[]`, the
image attachments of a message or comment).

Rows carry storage.attachments.COLUMNS. The displayed filename is `<id>-<name>`, as the real
payloads print it. `public_filename` and `url` of a media file point at this service's content
route, which checks the reader and streams the bytes (or, through GET
/api/attachments/:id, redirects to a short-lived presigned URL), so no URL in a JSON body
expires.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

from app.images import THUMBNAILS, thumbnail_size
from app.urls import attachment_url

Row = Mapping[str, Any]


def display_filename(row: Row) -> str:
    return f"{row['id']}-{row['filename']}"


def file_extension(filename: str) -> str:
    stem, dot, ext = filename.rpartition(".")
    return ext.lower() if dot and stem and ext else ""


def is_image(row: Row) -> bool:
    """Image attachments (Pillow read their size at upload) are media files."""
    return row["width"] is not None and row["height"] is not None


def content_url(base: str, row: Row, variant: str = "original") -> str:
    """GET /api/attachments/:id/:thumbnail/:filename."""
    return f"{base}/api/attachments/{row['id']}/{variant}/{display_filename(row)}"


def media_file_url(base: str, row: Row, variant: str) -> str:
    """GET /api/media_files/:id/:thumbnail/:filename."""
    return f"{base}/api/media_files/{row['id']}/{variant}/{display_filename(row)}"


def attachment(row: Row, base: str) -> dict[str, Any]:
    name = display_filename(row)
    return {
        "id": row["id"],
        "url": attachment_url(base, row["id"]),
        "filename": name,
        "public_filename": content_url(base, row),
        "external_host_type": None,
        "file_extension": file_extension(row["filename"]),
        "content_type": row["content_type"],
        "html_filename": html.escape(name),
    }


def media_file(row: Row, base: str) -> dict[str, Any]:
    """An image attachment in `message.media_files[]` (call only for `is_image(row)` rows)."""
    width, height = row["width"], row["height"]
    metadata = {}
    for name in THUMBNAILS:
        w, h = thumbnail_size(name, width, height)
        metadata[name] = {"width": w, "height": h}
    return {
        "title": display_filename(row),
        "description": None,
        "thumbnails": {name: media_file_url(base, row, name) for name in THUMBNAILS},
        "thumbnail_metadata": metadata,
        "page_url": None,
        "url": content_url(base, row),
        "content_type": row["content_type"],
        "attachment_id": row["id"],
        "external_resource_id": None,
        # listed by interface.md, absent from the captured payloads: last (decisions.md); a
        # media file is its image attachment, so it shares the attachment's id
        "id": row["id"],
        "canonical": False,
        "file_name": display_filename(row),
        "width": width,
        "height": height,
    }


def attachments_and_media_files(
    rows: Iterable[Row], base: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`attachments` and `media_files` of one message or comment from its attachment rows (as
    storage.attachments.for_subjects groups them): every row is an attachment, the images are
    also media files."""
    rows = list(rows)
    return [attachment(r, base) for r in rows], [media_file(r, base) for r in rows if is_image(r)]
