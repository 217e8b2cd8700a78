"""Community-level endpoints: GET /api/community_info and the content filters.

- GET /api/community_info -> 200 {"community": {...}} (shape: app/render/community.py). Counts
  are what the viewer may see: active users, and groups listed to them.
- GET /api/content_filters -> 200 {"content_filters": [{id, word, created_at}]}, every member,
  by word, paged (page, per_page).
- POST /api/content_filters (community admin) with content_filter[word] (or word) -> 201
  {"content_filter": {...}}; a word already filtered is a 409.
- DELETE /api/content_filters/:id (community admin) -> 204.
Posting a message, comment, thanks or meeting whose text contains a filtered word (whole word,
any letter case) is a 422 (app.actions.content_filters.check_text).
"""

from __future__ import annotations

from aiohttp import web

from app.actions import communities as community_actions
from app.actions import content_filters as filter_actions
from app.context import viewer_of
from app.params import FlatBody, parse, parse_page, path_id
from app.render.community import community_info, content_filter
from app.resources import pool_of, settings_of
from app.responses import created, json_response, no_content


class ContentFilterBody(FlatBody):
    ROOT = "content_filter"
    word: str | None = None


async def show_community_info(request: web.Request) -> web.Response:
    viewer = viewer_of(request)
    row = await community_actions.community_info(pool_of(request), viewer)
    body = community_info(row, attachment_max_bytes=settings_of(request).max_upload_bytes)
    return json_response({"community": body})


async def list_content_filters(request: web.Request) -> web.Response:
    page = await parse_page(request)
    rows = await filter_actions.list_filters(pool_of(request), viewer_of(request), page)
    return json_response({"content_filters": [content_filter(r) for r in rows]})


async def create_content_filter(request: web.Request) -> web.Response:
    body = await parse(request, ContentFilterBody)
    row = await filter_actions.create_filter(pool_of(request), viewer_of(request), body.word)
    return created({"content_filter": content_filter(row)})


async def delete_content_filter(request: web.Request) -> web.Response:
    await filter_actions.delete_filter(
        pool_of(request), viewer_of(request), path_id(request, "id")
    )
    return no_content()
