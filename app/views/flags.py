"""Flags (bookmarks) of messages: POST answers 201 {"flag": {"id"}} (200 with the same body
when the viewer had already flagged it); DELETE answers 204."""

from __future__ import annotations

from aiohttp import web

from app.actions import flags as actions
from app.context import viewer_of
from app.params import path_id
from app.resources import pool_of
from app.responses import created, json_response, no_content


async def create_flag(request: web.Request) -> web.Response:
    flag_id, new = await actions.flag(pool_of(request), viewer_of(request),
                                      path_id(request, "message_id"))
    body = {"flag": {"id": flag_id}}
    return created(body) if new else json_response(body)


async def delete_flag(request: web.Request) -> web.Response:
    await actions.unflag(pool_of(request), viewer_of(request), path_id(request, "message_id"),
                         path_id(request, "flag_id"))
    return no_content()
