"""For operators and people: probes, metrics, the front page and the API docs.

All of these answer on any Host and need no user credentials (`tenantless`): a load balancer
probes by address, and the front page is where a person lands first. /metrics is guarded by
its own rule instead (client networks or a token, see `metrics_allowed`).
"""

from __future__ import annotations

import asyncio
import hmac
import html
import importlib.metadata
import ipaddress
import logging
from typing import Any

from aiohttp import web

from app import metrics
from app.actions.health import postgres_readiness, worker_figures
from app.errors import Forbidden
from app.middleware import tenantless
from app.resources import POOL, REDIS, SETTINGS
from app.responses import json_response

log = logging.getLogger("commons.ops")

PROBE_TIMEOUT = 2.0
WORKER_STALE = 60.0
DRAINING = web.AppKey("draining", asyncio.Event)


def version() -> str:
    try:
        return importlib.metadata.version("commons")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - running from a tree
        return "unknown"


@tenantless
async def healthz(request: web.Request) -> web.Response:
    """The process is alive and its event loop turns: nothing else is checked."""
    return json_response({"status": "ok"})


async def _check_postgres(request: web.Request) -> tuple[str | None, list[dict[str, Any]]]:
    """(reason it is not ready or None, recent worker heartbeats)."""
    return await postgres_readiness(request.app[POOL], PROBE_TIMEOUT)


async def _check_redis(request: web.Request) -> str | None:
    if REDIS not in request.app:
        return None
    try:
        async with asyncio.timeout(PROBE_TIMEOUT):
            await request.app[REDIS].ping()
    except Exception as exc:
        return f"redis: unreachable ({type(exc).__name__})"
    return None


@tenantless
async def readyz(request: web.Request) -> web.Response:
    """Ready to take traffic: PostgreSQL answers, every migration is applied, and Redis answers
    when configured. 503 with the reasons otherwise, and while the process drains.

    Worker heartbeats are reported but do not make a web process unready: taking every web
    process out of a load balancer because the push worker is down would be worse."""
    reasons: list[str] = []
    draining = request.app.get(DRAINING)
    if draining is not None and draining.is_set():
        reasons.append("shutting down")
    pg_reason, workers = await _check_postgres(request)
    if pg_reason:
        reasons.append(pg_reason)
    redis_reason = await _check_redis(request)
    if redis_reason:
        reasons.append(redis_reason)
    alive = [w for w in workers if w["age"] <= WORKER_STALE]
    body: dict[str, Any] = {
        "status": "unavailable" if reasons else "ready",
        "checks": {
            "postgres": "ok" if pg_reason is None else pg_reason,
            "redis": ("not configured" if REDIS not in request.app
                      else redis_reason or "ok"),
            "worker": {
                "alive": len(alive),
                "last_heartbeat_seconds": round(workers[0]["age"], 1) if workers else None,
            },
        },
    }
    if reasons:
        body["reason"] = "; ".join(reasons)
        return json_response(body, status=503, headers={"Retry-After": "5"})
    return json_response(body)


def metrics_allowed(request: web.Request) -> bool:
    """A bearer token equal to COMMONS_METRICS_TOKEN, or a client in COMMONS_METRICS_ALLOW.

    The client is the peer of this connection: behind a proxy on the same host that is the
    proxy, which is why the shipped nginx configuration does not pass /metrics on."""
    settings = request.app[SETTINGS]
    if settings.metrics_token:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            token.strip().encode(), settings.metrics_token.encode()
        ):
            return True
    peer = request.remote
    if not peer:
        return False
    try:
        address = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return False
    for network in settings.metrics_allow:
        try:
            if address in ipaddress.ip_network(network, strict=False):
                return True
        except ValueError:
            continue
    return False


@tenantless
async def metrics_view(request: web.Request) -> web.Response:
    if not metrics_allowed(request):
        raise Forbidden("Metrics are not available to this client")
    extra = []
    try:
        async with asyncio.timeout(PROBE_TIMEOUT):
            async with request.app[POOL].acquire() as conn:
                depth, workers = await worker_figures(conn)
        extra = metrics.database_families(depth, workers)
    except Exception as exc:  # the process's own numbers are still worth answering with
        log.warning("metrics: database figures unavailable: %s", type(exc).__name__)
    text, content_type = metrics.render(extra)
    response = web.Response(body=text)
    response.headers["Content-Type"] = content_type
    return response


FRONT_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Commons {version}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 44rem; margin: 3rem auto;
       padding: 0 1rem; line-height: 1.5; color: #222; }}
code {{ background: #f3f3f3; padding: 0 .25rem; }}
</style>
</head>
<body>
<h1>Commons</h1>
<p>This is a <strong>Commons</strong> server, version <code>{version}</code>: an open-source
enterprise community server (people, groups, messages, conversations, realtime events) that
speaks the Socialcast REST API. Apps and integrations talk to it under <code>/api/</code>.</p>
<ul>
<li><a href="/api/docs">API documentation</a> (every operation, try it out)</li>
<li><a href="/api/openapi.json">OpenAPI document</a></li>
<li><a href="/healthz">Health</a> and <a href="/readyz">readiness</a> probes</li>
</ul>
<p>Signed in to a community? Its data lives under <code>/api/</code> on the community's own
address.</p>
</body>
</html>
"""

DOCS_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Commons {version} API</title>
<link rel="stylesheet" href="/assets/swagger-ui/swagger-ui.css">
</head>
<body>
<div id="swagger-ui" data-url="/api/openapi.json"></div>
<script src="/assets/swagger-ui/swagger-ui-bundle.js"></script>
<script src="/assets/docs.js"></script>
</body>
</html>
"""


@tenantless
async def front_page(request: web.Request) -> web.Response:
    return web.Response(text=FRONT_PAGE.format(version=html.escape(version())),
                        content_type="text/html")


@tenantless
async def api_docs(request: web.Request) -> web.Response:
    """Swagger UI, vendored under app/static/swagger-ui: nothing is fetched from a CDN."""
    return web.Response(text=DOCS_PAGE.format(version=html.escape(version())),
                        content_type="text/html")


def add_ops_routes(app: web.Application) -> None:
    """Outside the API route table: not Socialcast operations, so not in the OpenAPI
    document either."""
    app.router.add_get("/", front_page)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_view)
    app.router.add_get("/api/docs", api_docs)
