"""The OpenAPI document."""

from __future__ import annotations

from aiohttp import web

from app.middleware import tenantless
from app.resources import openapi_of
from app.responses import json_response


@tenantless
async def openapi(request: web.Request) -> web.Response:
    return json_response(openapi_of(request))
