"""Streams: GET /api/streams ({"streams": [...]}) and GET /api/streams/primary ({"stream"}, or
404 with the body `true` when the viewer has none). Their messages: app.views.messages."""

from __future__ import annotations

from aiohttp import web

from app.actions import streams as actions
from app.context import community_of, viewer_of
from app.resources import pool_of
from app.responses import json_response


async def list_streams(request: web.Request) -> web.Response:
    community = community_of(request)
    rendered = await actions.list_streams(
        pool_of(request), viewer_of(request), community.base_url, community.stream_names
    )
    return json_response({"streams": rendered})


async def primary_stream(request: web.Request) -> web.Response:
    community = community_of(request)
    home = await actions.primary_stream(
        pool_of(request), viewer_of(request), community.base_url, community.stream_names
    )
    if home is None:
        return json_response(True, status=404)
    return json_response({"stream": home})
