"""The OpenAPI document."""

from __future__ import annotations

from aiohttp import web

from app.middleware import tenantless
from app.responses import json_response


@tenantless
async def openapi(request: web.Request) -> web.Response:
    from app.openapi import document  # the document needs the route table, which imports views

    return json_response(document())
