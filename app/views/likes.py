"""Likes of messages (/api/messages/:message_id/likes) and of comments
(/api/messages/:message_id/comments/:comment_id/likes).

POST answers 201 {"like": {id, user, created_at, unlikable, parent_likes_count}} for a new like
and 200 with the same body when the viewer already liked it (nothing is created twice). Lists
answer {"users": [full users]}, oldest like first.
"""

from __future__ import annotations

from aiohttp import web

from app.actions import likes as actions
from app.actions.users import basic_user, full_users
from app.context import community_of, viewer_of
from app.params import parse_page, path_id
from app.render.likes import created_like, like
from app.resources import pool_of
from app.responses import created, json_response, no_content


def _comment_id(request: web.Request) -> int | None:
    return path_id(request, "comment_id") if "comment_id" in request.match_info else None


async def create_like(request: web.Request) -> web.Response:
    viewer = viewer_of(request)
    pool = pool_of(request)
    result = await actions.like(pool, viewer, path_id(request, "message_id"),
                                _comment_id(request))
    user = await basic_user(pool, viewer, viewer.id)
    assert user is not None
    body = {"like": created_like(result.row, user, community_of(request).base_url, viewer.id,
                                 result.parent_likes_count)}
    return created(body) if result.created else json_response(body)


async def list_likes(request: web.Request) -> web.Response:
    page = await parse_page(request)
    viewer = viewer_of(request)
    async with pool_of(request).acquire() as conn:
        rows = await actions.likers(conn, viewer, path_id(request, "message_id"),
                                    _comment_id(request), page.offset, page.limit)
        rendered = await full_users(conn, viewer, rows, community_of(request).base_url)
    return json_response({"users": rendered})


async def show_like(request: web.Request) -> web.Response:
    viewer = viewer_of(request)
    async with pool_of(request).acquire() as conn:
        row = await actions.access_like(conn, viewer, path_id(request, "message_id"),
                                        _comment_id(request), path_id(request, "id"))
        user = await basic_user(conn, viewer, row["user_id"])
    assert user is not None
    return json_response({"like": like(row, user, community_of(request).base_url, viewer.id)})


async def delete_like(request: web.Request) -> web.Response:
    await actions.unlike(pool_of(request), viewer_of(request), path_id(request, "message_id"),
                         _comment_id(request), path_id(request, "like_id"))
    return no_content()
