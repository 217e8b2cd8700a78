"""Attachments: upload (multipart, streamed), download (302 to the file, or the bytes streamed),
thumbnails and media files, delete, and the lists of a user's and a group's attachments."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import unquote

from aiohttp import BodyPartReader, MultipartReader, hdrs, web
from pydantic import BaseModel, Field

from app.actions import attachments as actions
from app.context import REQUEST_ID, community_of, viewer_of
from app.errors import (
    Invalid,
    NotFound,
    TooLarge,
    UnsupportedMediaType,
)
from app.images import VARIANTS
from app.params import LOOSE, parse, parse_page, path_id
from app.render.attachments import attachment, content_url, is_image
from app.resources import blobs_of, pool_of, settings_of
from app.responses import created, json_response
from app.uploads import clean_header, multipart_reader, next_part, read_chunk

UPLOAD_FIELD = "attachment"
# Room for the multipart boundaries, part headers and small fields around the file.
MULTIPART_SLACK = 1024 * 1024
CACHE_CONTENT = "private, max-age=3600"


class AttachmentQuery(BaseModel):
    model_config = LOOSE
    thumbnail: str | None = Field(None, description="original (default), stream, "
                                  "stream_square, square45 or scaled480")


class AttachmentUpload(BaseModel):
    """multipart/form-data with the file in `attachment` (documentation only)."""

    model_config = LOOSE
    attachment: str = Field(description="the file (multipart file part)")



def _is_upload_field(name: str | None) -> bool:
    return name is not None and (name == UPLOAD_FIELD or name.startswith(UPLOAD_FIELD + "["))


async def _part_chunks(part: BodyPartReader) -> AsyncIterator[bytes]:
    while chunk := await read_chunk(part, actions.READ_CHUNK):
        yield chunk


async def _skip(part: BodyPartReader | MultipartReader, budget: int) -> int:
    """Read past a part that is not the file; its size (over `budget`: 413)."""
    if isinstance(part, MultipartReader):
        await part.release()
        return 0
    size = 0
    async for chunk in _part_chunks(part):
        size += len(chunk)
        if size > budget:
            raise TooLarge()
    return size


async def upload_attachment(request: web.Request) -> web.Response:
    """POST /api/attachments: the file is streamed to the blob store as it arrives; over the
    limit (COMMONS_MAX_UPLOAD_MB, 100 MB) it is a 413 and nothing is kept."""
    viewer = viewer_of(request)
    if request.content_type != "multipart/form-data":
        raise UnsupportedMediaType(
            "Send the file as multipart/form-data, in the field `attachment`"
        )
    max_bytes = settings_of(request).max_upload_bytes
    length = request.content_length
    if length is not None and length > max_bytes + MULTIPART_SLACK:
        raise actions.too_large(max_bytes)
    reader = await multipart_reader(request)
    budget = MULTIPART_SLACK  # for the other fields
    while (part := await next_part(reader)) is not None:
        if isinstance(part, BodyPartReader) and part.filename is not None \
                and _is_upload_field(clean_header(part.name or "")):
            row = await actions.upload_stream(
                pool_of(request), blobs_of(request), viewer,
                # browsers send `"` as %22; some clients percent-encode the whole name
                filename=unquote(clean_header(part.filename)),
                declared_type=clean_header(part.headers.get(hdrs.CONTENT_TYPE, "")) or None,
                chunks=_part_chunks(part), max_bytes=max_bytes,
            )
            return created({"attachment": attachment(row, community_of(request).base_url)})
        budget -= await _skip(part, budget)
    raise Invalid.field(UPLOAD_FIELD, "can't be blank")


def _variant_param(raw: str | None) -> str:
    value = (raw or "original").strip() or "original"
    if value not in VARIANTS:
        raise Invalid.field("thumbnail", f"must be one of {', '.join(VARIANTS)}")
    return value


async def show_attachment(request: web.Request) -> web.Response:
    """GET /api/attachments/:attachment_id: 302 to the bytes (a presigned URL on S3, the
    content route on local disk)."""
    query = await parse(request, AttachmentQuery)
    variant = _variant_param(query.thumbnail)
    viewer = viewer_of(request)
    pool = pool_of(request)
    blobs = blobs_of(request)
    row = await actions.access_attachment(pool, viewer, path_id(request, "attachment_id"))
    found = await actions.variant_blob(pool, blobs, row, variant)
    url = await blobs.download_url(
        found.key, filename=found.filename, content_type=found.content_type, inline=found.inline
    )
    if url is None:
        url = content_url(community_of(request).base_url, row, variant)
    return web.Response(
        status=302, headers={hdrs.LOCATION: url, hdrs.CACHE_CONTROL: "private, no-store"}
    )


async def _stream(request: web.Request, found: actions.Variant) -> web.StreamResponse:
    async with actions.open_variant(blobs_of(request), found) as blob:
        response = web.StreamResponse(headers={
            hdrs.CONTENT_TYPE: found.content_type,
            hdrs.CONTENT_DISPOSITION: found.disposition,
            hdrs.CACHE_CONTROL: CACHE_CONTENT,
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; sandbox",
            "X-Request-Id": request.get(REQUEST_ID, ""),
        })
        response.content_length = blob.size
        await response.prepare(request)
        async for chunk in blob.chunks:
            await response.write(chunk)
        await response.write_eof()
        return response


def _variant_path(request: web.Request) -> str:
    variant = request.match_info["thumbnail"]
    if variant not in VARIANTS:
        raise NotFound(f"No such thumbnail; one of {', '.join(VARIANTS)}")
    return variant


async def download_attachment(request: web.Request) -> web.StreamResponse:
    """GET /api/attachments/:attachment_id/:thumbnail/:filename: the bytes (the filename is
    only for the reader's eyes)."""
    variant = _variant_path(request)
    pool = pool_of(request)
    blobs = blobs_of(request)
    row = await actions.access_attachment(
        pool, viewer_of(request), path_id(request, "attachment_id")
    )
    return await _stream(request, await actions.variant_blob(pool, blobs, row, variant))


async def download_media_file(request: web.Request) -> web.StreamResponse:
    """GET /api/media_files/:id/:thumbnail/:filename: a media file is an image attachment, so
    this is its original or thumbnail; another attachment is a 404."""
    variant = _variant_path(request)
    pool = pool_of(request)
    blobs = blobs_of(request)
    row = await actions.access_attachment(pool, viewer_of(request), path_id(request, "id"))
    if not is_image(row):
        raise NotFound("Media file not found")
    return await _stream(request, await actions.variant_blob(pool, blobs, row, variant))


async def delete_attachment(request: web.Request) -> web.Response:
    row = await actions.delete_attachment(
        pool_of(request), blobs_of(request), viewer_of(request),
        path_id(request, "attachment_id"),
    )
    return json_response({"attachment": attachment(row, community_of(request).base_url)})


async def list_user_attachments(request: web.Request) -> web.Response:
    """What the user uploaded that the viewer may read, newest first."""
    page = await parse_page(request)
    viewer = viewer_of(request)
    rows = await actions.user_attachments(
        pool_of(request), viewer, path_id(request, "user_id"), page
    )
    base = community_of(request).base_url
    return json_response({"attachments": [attachment(r, base) for r in rows]})


async def list_group_attachments(request: web.Request) -> web.Response:
    """The attachments of the group's messages, newest first. A group the viewer cannot see is
    a 404; one they see but whose content they cannot read (private, requests allowed) a 403."""
    page = await parse_page(request)
    viewer = viewer_of(request)
    rows = await actions.group_attachments(
        pool_of(request), viewer, path_id(request, "group_id"), page
    )
    base = community_of(request).base_url
    return json_response({"attachments": [attachment(r, base) for r in rows]})
