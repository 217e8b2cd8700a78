"""Followers and following."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from app.actions import follows as actions
from app.actions import users as user_actions
from app.actions.users import full_users
from app.context import community_of, viewer_of
from app.params import parse_page, path_id
from app.resources import hub_of, pool_of
from app.responses import created, json_response, no_content

Lister = Callable[..., Awaitable[list[Any]]]


async def _list(request: web.Request, lister: Lister) -> web.Response:
    page = await parse_page(request)
    viewer = viewer_of(request)
    pool = pool_of(request)
    rows = await lister(pool, viewer, path_id(request, "user_id"), page)
    rendered = await full_users(pool, viewer, rows, community_of(request).base_url)
    return json_response({"users": rendered})


async def list_followers(request: web.Request) -> web.Response:
    return await _list(request, user_actions.followers)


async def list_following(request: web.Request) -> web.Response:
    return await _list(request, user_actions.following)


async def follow(request: web.Request) -> web.Response:
    viewer = viewer_of(request)
    user_id = path_id(request, "user_id")
    pool = pool_of(request)
    await actions.follow(pool, viewer, user_id, hub_of(request))
    row = await user_actions.full_user_row(pool, viewer, user_id)
    rendered = await full_users(pool, viewer, [row], community_of(request).base_url)
    return created({"user": rendered[0]})


async def unfollow_follower(request: web.Request) -> web.Response:
    """DELETE /users/:user_id/followers/:my_user_id: my_user_id stops following user_id."""
    followed = path_id(request, "user_id")
    follower = path_id(request, "my_user_id")
    await actions.unfollow(pool_of(request), viewer_of(request), follower, followed)
    return no_content()


async def unfollow_following(request: web.Request) -> web.Response:
    """DELETE /users/:user_id/following/:id: user_id stops following id."""
    follower = path_id(request, "user_id")
    followed = path_id(request, "id")
    await actions.unfollow(pool_of(request), viewer_of(request), follower, followed)
    return no_content()
