"""Request id, errors as JSON, community resolution, authentication and request rate limits."""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import re
from collections.abc import Awaitable, Callable

import asyncpg
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Middleware
from aiohttp_session import SESSION_KEY, STORAGE_KEY, AbstractStorage

from app import authentication
from app.context import COMMUNITY, REQUEST_ID, VIEWER
from app.errors import (
    ApiError,
    BadRequest,
    MethodNotAllowed,
    NotFound,
    RateLimited,
    TooLarge,
    Unavailable,
)
from app.resources import COMMUNITIES, LIMITER, SETTINGS
from app.responses import json_response
from storage.availability import DatabaseUnavailable, is_connection_loss
from storage.blobs import BlobUnavailable

log = logging.getLogger("commons.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
UNMATCHED = "unmatched"


def new_request_id() -> str:
    """32 random hex digits, like a uuid4's: from `random`, which Python reseeds in every
    forked worker, not os.urandom (a system call per request: 5% of a 304's CPU). A request id
    names a request in logs; it is no secret and grants nothing."""
    return f"{random.getrandbits(128):032x}"


def public(handler: Handler) -> Handler:
    """Mark a view as needing no user credentials (it authenticates by other means)."""
    handler.__commons_public__ = True  # type: ignore[attr-defined]
    return handler


def tenantless(handler: Handler) -> Handler:
    """Mark a view that serves every host alike (no community, no credentials)."""
    handler.__commons_tenantless__ = True  # type: ignore[attr-defined]
    return public(handler)


_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::[^{}]*(?:\{[^{}]*\}[^{}]*)*)?\}")


@functools.lru_cache(maxsize=1024)
def _template(canonical: str) -> str:
    """aiohttp's canonical form back to the route table's: `{user_id}` -> `:user_id`."""
    return _PARAM.sub(lambda m: "" if m.group(1) == "_ext" else ":" + m.group(1), canonical)


def route_template(request: web.Request) -> str:
    match = request.match_info
    if match.http_exception is not None:
        return UNMATCHED
    resource = match.route.resource
    if resource is None:
        return UNMATCHED
    return _template(resource.canonical)


def _marked(request: web.Request, mark: str) -> bool:
    return bool(getattr(request.match_info.route.handler, mark, False))


def _error_response(request: web.Request, error: ApiError) -> web.Response:
    headers = dict(error.headers)
    if error.status == 401 and "WWW-Authenticate" not in headers:
        community = request.get(COMMUNITY)
        realm = (community.name if community else "Commons").replace('"', "'")
        headers["WWW-Authenticate"] = f'Basic realm="{realm}"'
    return json_response(error.body(), status=error.status, headers=headers)


def _from_http_exception(exc: web.HTTPException) -> ApiError:
    if isinstance(exc, web.HTTPNotFound):
        return NotFound()
    if isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(exc.allowed_methods))
        return MethodNotAllowed(headers={"Allow": allowed})
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return TooLarge()
    error = ApiError(exc.reason or "Error")
    error.status = exc.status
    error.code = "bad_request" if 400 <= exc.status < 500 else "internal"
    return error


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    raw_id = request.headers.get("X-Request-Id", "")
    request_id = raw_id if _REQUEST_ID_RE.match(raw_id) else new_request_id()
    request[REQUEST_ID] = request_id
    try:
        response = await handler(request)
    except ApiError as error:
        response = _error_response(request, error)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = _error_response(request, _from_http_exception(exc))
    except (asyncio.CancelledError, ConnectionResetError):
        raise
    except HttpProcessingError as exc:
        # aiohttp's parser refusing what the client sent in a body (a multipart part header
        # with a control byte, say): the client's fault, answered in the JSON error format
        log.info("malformed body in %s %s (request %s): %s", request.method,
                 route_template(request), request_id, exc.message)
        response = _error_response(request, BadRequest("Malformed request body"))
    except (DatabaseUnavailable, BlobUnavailable):
        # logged once per outage where it is detected; no traceback per request
        response = _error_response(request, Unavailable())
    except asyncpg.DataError as exc:
        # A value from the client the database cannot take (an id past int64, a NUL in text):
        # client input is never a 5xx.
        # The route template, never the path: paths can carry secrets (webhook URLs).
        log.info("bad value in %s %s (request %s): %s", request.method,
                 route_template(request), request_id, exc)
        response = _error_response(
            request, BadRequest("A parameter has a value that is out of range or not valid text")
        )
    except Exception as exc:
        if is_connection_loss(exc):
            # A connection dropped under the request (PostgreSQL restarted, a network fault):
            # a fault, not a bug; the pool replaces the connection on the next acquire.
            log.warning("connection lost in %s %s (request %s): %r", request.method,
                        route_template(request), request_id, exc)
            response = _error_response(request, Unavailable())
        else:
            log.exception("unhandled error in %s %s (request %s)", request.method,
                          route_template(request), request_id)
            response = json_response(
                {"errors": ["Internal server error"], "code": "internal",
                 "request_id": request_id},
                status=500,
            )
    if not response.prepared:
        response.headers["X-Request-Id"] = request_id
    return response


def auth_middleware(sessions: AbstractStorage) -> Middleware:
    """Community, viewer and the per-user request limit; and the session cookie's storage.

    The sessions are aiohttp_session's, without its middleware (one coroutine layer less on
    every request): `get_session` finds the storage in the request, and a session a view
    changed is written into its answer here, as that middleware would (not into an error
    raised as an ApiError: that one leaves the session as the client sent it)."""

    @web.middleware
    async def authenticated(request: web.Request, handler: Handler) -> web.StreamResponse:
        request[STORAGE_KEY] = sessions
        if not (
            request.match_info.http_exception is not None
            or request.path.startswith("/assets/")
            or _marked(request, "__commons_tenantless__")
        ):
            host = request.host or ""
            if not host or len(host) > 255:
                raise BadRequest("Missing or invalid Host header")
            community = await request.app[COMMUNITIES].for_host(host)
            if community is None:
                raise NotFound("No community is served at this address")
            request[COMMUNITY] = community
            if not _marked(request, "__commons_public__"):
                viewer = await authentication.authenticate(request, community)
                request[VIEWER] = viewer
                limit = request.app[SETTINGS].rate_limit_requests
                retry = await request.app[LIMITER].hit(f"user:{viewer.id}", limit)
                if retry is not None:
                    raise RateLimited(retry)
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # a redirect, say: it carries the cookie too
            await _save_session(request, sessions, exc)
            raise
        await _save_session(request, sessions, response)
        return response

    return authenticated


async def _save_session(
    request: web.Request, sessions: AbstractStorage, response: web.StreamResponse
) -> None:
    session = request.get(SESSION_KEY)
    # a websocket or a streamed answer has no place for a cookie (aiohttp_session skips them)
    if session is None or not session._changed or not isinstance(response, web.Response):
        return
    if response.prepared:
        raise RuntimeError("Cannot save session data into prepared response")
    await sessions.save_session(request, response, session)
