"""Badges: GET /api/badges (the community's badges, for choosing one when thanking; not in the
spec) and GET /api/badges/:id -> {"badge": Badge}. Another community's badge is a 404.
The messages of a badge are in app/views/thanks.py."""

from __future__ import annotations

from aiohttp import web

from app.actions import badges
from app.context import community_of, viewer_of
from app.params import path_id
from app.render.badges import badge
from app.resources import pool_of
from app.responses import json_response


async def list_badges(request: web.Request) -> web.Response:
    rows = await badges.list_badges(pool_of(request), viewer_of(request))
    base = community_of(request).base_url
    return json_response({"badges": [badge(r, base) for r in rows]})


async def show_badge(request: web.Request) -> web.Response:
    row = await badges.badge(pool_of(request), viewer_of(request), path_id(request, "id"))
    return json_response({"badge": badge(row, community_of(request).base_url)})
