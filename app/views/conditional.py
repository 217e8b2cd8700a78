"""Conditional GET for the lists clients poll (issue 13, docs/polling.md).

    @conditional            # or @conditional_messages for a list of messages
    async def list_notifications(request): ...

The list answers with a strong ETag; a request whose If-None-Match names it gets a 304 with
the ETag and no body, without the view running (no page query, no rendering). The ETag is
computed before the view runs, from versions that every change bumps in its own transaction
(app.actions.versions), so it can only be older than the page it labels, never newer.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from aiohttp import web

from app.actions.versions import etag
from app.context import VERSIONS, community_of, viewer_of
from app.resources import pool_of
from app.xml_format import WANTS_XML

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Per viewer: no shared cache may keep it; a browser may, and asks again each time.
CACHE_CONTROL = "private, no-cache"


def matches(header: str | None, tag: str) -> bool:
    """Whether an If-None-Match header names `tag` (weak comparison, RFC 9110 13.1.2). `*` is
    no match: whether the list exists is only known by running the view."""
    if not header:
        return False
    if header == tag:
        return True
    return any(part.strip().removeprefix("W/") == tag for part in header.split(","))


def _conditional(handler: Handler, sticky: bool) -> Handler:
    @functools.wraps(handler)
    async def view(request: web.Request) -> web.StreamResponse:
        fmt = "xml" if request.get(WANTS_XML) else "json"
        tag = await etag(pool_of(request), viewer_of(request), community_of(request),
                         f"{fmt} {request.method} {request.raw_path}", sticky=sticky,
                         known=request.get(VERSIONS))
        if matches(request.headers.get("If-None-Match"), tag):
            return web.Response(status=304, headers={"ETag": tag, "Cache-Control": CACHE_CONTROL})
        response = await handler(request)
        if response.status == 200:
            response.headers["ETag"] = tag
            response.headers["Cache-Control"] = CACHE_CONTROL
        return response

    view.__commons_conditional__ = True  # type: ignore[attr-defined]  # app/openapi.py
    return view


def conditional(handler: Handler) -> Handler:
    """ETag and 304 for a list that shows no message."""
    return _conditional(handler, sticky=False)


def conditional_messages(handler: Handler) -> Handler:
    """ETag and 304 for a list of messages (whose sticky announcements expire with time)."""
    return _conditional(handler, sticky=True)
