"""Comments of a message.

POST answers 201 {"comment": <Comment>} and nothing else at the top level (decisions.md:
single-root clients take the id from it); the comment carries its recipients and tags.
Lists are oldest first and take page, per_page and
likes_limit (likes per comment, 0..500, default 100).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import BaseModel, Field

from app.actions import attachments as attachment_actions
from app.actions import comments as actions
from app.actions.comments import NewComment
from app.context import community_of, viewer_of
from app.errors import BadRequest, Invalid
from app.params import (
    LOOSE,
    IdList,
    PageQuery,
    UploadedFile,
    parse,
    path_id,
)
from app.resources import blobs_of, hub_of, pool_of, settings_of
from app.responses import created, json_response, no_content
from app.views.messages import OptionalInt


class CommentParams(BaseModel):
    model_config = LOOSE
    text: str | None = Field(None, max_length=actions.MAX_TEXT)
    attachment_ids: IdList = Field(default_factory=list)
    attachment: Any = None


class CommentCreateBody(BaseModel):
    model_config = LOOSE
    comment: CommentParams = Field(default_factory=CommentParams)


class CommentUpdateBody(BaseModel):
    model_config = LOOSE
    comment: CommentParams = Field(default_factory=CommentParams)


class CommentListQuery(PageQuery):
    model_config = LOOSE
    likes_limit: OptionalInt = None


async def _upload(request: web.Request, attachment: Any) -> list[int]:
    """comment[attachment] (a multipart file): stored as an unclaimed attachment, claimed by
    the comment in its transaction."""
    if attachment is None or attachment == "":
        return []
    if not isinstance(attachment, UploadedFile):
        raise Invalid.field("comment[attachment]", "must be a file sent as multipart form data")
    row = await attachment_actions.store_file(
        pool_of(request), blobs_of(request), viewer_of(request), attachment,
        max_bytes=settings_of(request).max_upload_bytes,
    )
    return [row["id"]]


async def create_comment(request: web.Request) -> web.Response:
    message_id = path_id(request, "message_id")
    params = (await parse(request, CommentCreateBody)).comment
    viewer = viewer_of(request)
    pool = pool_of(request)
    base = community_of(request).base_url
    uploaded = await _upload(request, params.attachment)
    rendered = await actions.create_and_render(
        pool, viewer, base, message_id,
        NewComment(params.text, [*params.attachment_ids, *uploaded]), hub_of(request),
    )
    return created({"comment": rendered})


async def list_comments(request: web.Request) -> web.Response:
    message_id = path_id(request, "message_id")
    try:
        query = await parse(request, CommentListQuery)
    except Invalid as exc:
        raise BadRequest(*exc.messages, fields=exc.fields) from None
    if query.likes_limit is not None and query.likes_limit < 0:
        raise BadRequest("likes_limit must be zero or a positive integer")
    page = query.paging
    likes = min(query.likes_limit if query.likes_limit is not None else 100, 500)
    async with pool_of(request).acquire() as conn:
        rendered = await actions.list_comments(
            conn, viewer_of(request), community_of(request).base_url, message_id,
            page.offset, page.limit, likes,
        )
    return json_response({"comments": rendered})


async def show_comment(request: web.Request) -> web.Response:
    message_id = path_id(request, "message_id")
    comment_id = path_id(request, "id")
    async with pool_of(request).acquire() as conn:
        rendered = await actions.render_comment(
            conn, viewer_of(request), community_of(request).base_url, message_id, comment_id
        )
    return json_response({"comment": rendered})


async def update_comment(request: web.Request) -> web.Response:
    """PUT: the comment's author only; comment[text]."""
    message_id = path_id(request, "message_id")
    comment_id = path_id(request, "id")
    params = (await parse(request, CommentUpdateBody)).comment
    viewer = viewer_of(request)
    base = community_of(request).base_url
    await actions.update_comment(
        pool_of(request), viewer, base, message_id, comment_id, params.text
    )
    async with pool_of(request).acquire() as conn:
        rendered = await actions.render_comment(conn, viewer, base, message_id, comment_id)
    return json_response({"comment": rendered})


async def delete_comment(request: web.Request) -> web.Response:
    """DELETE: 204. The author, an admin of the message's group, or a community admin."""
    await actions.delete_comment(
        pool_of(request), viewer_of(request), path_id(request, "message_id"),
        path_id(request, "id"), blobs_of(request),
    )
    return no_content()
