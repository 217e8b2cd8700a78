"""The outermost middleware: request metrics and the one log line per request.

Both name a request by its route template (`/api/users/:user_id`), never by its path: paths
carry ids (unbounded label values) and sometimes secrets (incoming-webhook URLs).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from aiohttp import web

from app import metrics
from app.context import COMMUNITY, REQUEST_ID, VIEWER
from app.middleware import Handler, route_template
from app.proxy import client_address
from app.views.ops import DRAINING

access_log = logging.getLogger("commons.access")
# label values are bounded: any other method a client sends counts as "other"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

def make_observe_middleware(log_requests_at: int) -> web.middleware:  # type: ignore[valid-type]
    """`log_requests_at`: the level of the per-request line (INFO with JSON logs, else DEBUG,
    so that a console stays quiet)."""

    children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    @web.middleware
    async def observe(request: web.Request, handler: Handler) -> web.StreamResponse:
        start = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            if not response.prepared and request.app[DRAINING].is_set():
                response.force_close()  # the process is stopping: no keep-alive
            return response
        except web.HTTPException as exc:  # redirects, raised past the errors middleware
            status = exc.status
            raise
        finally:
            elapsed = time.perf_counter() - start
            route = route_template(request)
            method = request.method if request.method in METHODS else "other"
            key = (method, route, status)
            series = children.get(key)
            if series is None:  # labels() is a lookup under a lock: once per key, not request
                code = str(status)
                series = children[key] = (
                    metrics.REQUESTS.labels(method, route, code),
                    metrics.LATENCY.labels(method, route, code),
                )
            series[0].inc()
            series[1].observe(elapsed)
            if access_log.isEnabledFor(log_requests_at):
                community = request.get(COMMUNITY)
                viewer = request.get(VIEWER)
                access_log.log(
                    log_requests_at, "%s %s %d %.1f ms", request.method, route, status,
                    elapsed * 1000,
                    extra={
                        "request_id": request.get(REQUEST_ID),
                        "method": request.method,
                        "route": route,
                        "status": status,
                        "duration_ms": round(elapsed * 1000, 2),
                        "community": community.id if community is not None else None,
                        "user_id": viewer.id if viewer is not None else None,
                        "client": client_address(request),
                    },
                )

    return observe
