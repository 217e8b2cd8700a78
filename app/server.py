"""The HTTP server around the application: aiohttp's, with what production needs added.

`make_runner(app, settings)` is the AppRunner `commons serve` runs (and tests can run):

- Errors of the HTTP parser (an over-long request line or header, too many headers, bare-LF
  line endings, a bad method...) are answered in the API's JSON error format, with an
  X-Request-Id, and echo nothing of the request: aiohttp's own answer is text/plain and can
  repeat the offending line, Authorization header included (issue 8, defect 8).
- A per-process cap on open connections (COMMONS_MAX_CONNECTIONS): a connection over it is
  answered 503 `unavailable` at once and closed, so trickling clients cannot take every file
  descriptor (defect 12).
- A deadline for the request head (COMMONS_HEAD_TIMEOUT_SECONDS, 30 s): a connection that has
  not sent a whole request line and headers within it, from its opening or from the end of
  its previous response, is closed. This is aiohttp's keep-alive timer, which closes a
  connection whose parser is still waiting for a request; it never closes one whose request
  is being handled (a long upload, a websocket).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from http import HTTPStatus
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_server import Server

from app.config import Settings

log = logging.getLogger("commons.http")

RETRY_AFTER_SECONDS = 1
# The listen queue (capped by the kernel's net.core.somaxconn). aiohttp's default, 128, lets a
# reconnect storm overflow it: every connection the kernel drops costs its client a 1 s (then
# 3 s, 7 s) SYN retransmit, which is most of a storm's time (bench/fanout_storm.py).
LISTEN_BACKLOG = 4096


def _error_body(status: int, request_id: str) -> tuple[bytes, dict[str, str]]:
    if status >= 500:
        code = "unavailable" if status == 503 else "internal"
        message = ("The server is busy; try again shortly" if status == 503
                   else "Internal server error")
    elif status == 413:
        code, message = "too_large", "The request is too large"
    elif status == 431:
        code, message = "bad_request", "The request's headers are too large"
    else:
        code, message = "bad_request", "The request could not be read as HTTP"
    body = orjson.dumps({"errors": [message], "code": code, "request_id": request_id})
    headers = {"Content-Type": "application/json", "X-Request-Id": request_id}
    if status == 503:
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return body, headers


def _raw_response(status: int) -> bytes:
    """A whole HTTP/1.1 response, for a connection refused before any request is read."""
    body, headers = _error_body(status, uuid.uuid4().hex)
    phrase = HTTPStatus(status).phrase
    head = [f"HTTP/1.1 {status} {phrase}", *(f"{k}: {v}" for k, v in headers.items()),
            f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return "\r\n".join(head).encode("ascii") + body


class CommonsRequestHandler(RequestHandler):
    """aiohttp's connection protocol, with JSON errors and the connection cap."""

    _commons_counted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        server = self._manager
        if isinstance(server, CommonsServer) and not server.admit():
            # over the cap: answer and close before reading anything
            assert isinstance(transport, asyncio.Transport)
            transport.write(_raw_response(503))
            transport.close()
            self._manager = None  # connection_lost then has nothing to undo
            server.refused += 1
            return
        self._commons_counted = True
        super().connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        server = self._manager
        if self._commons_counted and isinstance(server, CommonsServer):
            self._commons_counted = False
            server.release()
        super().connection_lost(exc)

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """The JSON error for a request aiohttp could not hand to the application (a parser
        error) or whose handler failed outside the middleware. Nothing of the request is
        repeated, in the answer or in the log."""
        if isinstance(exc, HttpProcessingError):
            # the exception's text quotes the offending bytes: log only what kind it was
            log.info("HTTP parser error %s from %s: %s", status, request.remote,
                     type(exc).__name__)
        elif status >= 500:
            log.error("error handling a request from %s", request.remote, exc_info=exc)
        if request.writer.output_size > 0:
            raise ConnectionError("Response is sent already, cannot send another response "
                                  "with the error message")
        body, headers = _error_body(status, uuid.uuid4().hex)
        response = web.Response(status=status, body=body, headers=headers)
        response.force_close()
        return response


class CommonsServer(Server):
    """aiohttp's Server making CommonsRequestHandler connections, counting them."""

    def __init__(self, *args: Any, max_connections: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_connections = max_connections
        self.open_connections = 0
        self.refused = 0

    def admit(self) -> bool:
        if self.max_connections > 0 and self.open_connections >= self.max_connections:
            return False
        self.open_connections += 1
        return True

    def release(self) -> None:
        self.open_connections -= 1

    def __call__(self) -> RequestHandler:
        return CommonsRequestHandler(self, loop=self._loop, **self._kwargs)


class CommonsAppRunner(web.AppRunner):
    """An AppRunner whose server is a CommonsServer."""

    def __init__(self, app: web.Application, *, max_connections: int, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._max_connections = max_connections

    async def _make_server(self) -> Server:
        # aiohttp's (the app started, its handler arguments applied), remade as ours
        made = await super()._make_server()
        return CommonsServer(
            made.request_handler,
            request_factory=made.request_factory,
            handler_cancellation=made.handler_cancellation,
            max_connections=self._max_connections,
            **made._kwargs,
        )


def make_runner(
    app: web.Application,
    settings: Settings,
    *,
    handle_signals: bool = False,
    shutdown_timeout: float = 60.0,
    **kwargs: Any,
) -> web.AppRunner:
    """The runner of `app`: aiohttp's AppRunner with the JSON parser errors, the connection
    cap and the head deadline of this module. aiohttp's access log is off unless asked for
    (`access_log=`): it would write raw request lines."""
    kwargs.setdefault("access_log", None)
    return CommonsAppRunner(
        app, handle_signals=handle_signals, shutdown_timeout=shutdown_timeout,
        max_connections=settings.max_connections,
        keepalive_timeout=settings.head_timeout_seconds,
        **kwargs,
    )


def run(
    app: web.Application,
    settings: Settings,
    *,
    host: str,
    port: int,
    reuse_port: bool = False,
    loop: asyncio.AbstractEventLoop | None = None,
) -> None:
    """Serve `app` until SIGINT or SIGTERM (web.run_app, with make_runner's runner)."""
    loop = loop or asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    runner = make_runner(app, settings, handle_signals=True)

    async def start() -> None:
        await runner.setup()
        await web.TCPSite(
            runner, host, port, reuse_port=reuse_port, backlog=LISTEN_BACKLOG
        ).start()

    try:
        loop.run_until_complete(start())
        loop.run_forever()
    except (web.GracefulExit, KeyboardInterrupt):
        pass
    finally:
        loop.run_until_complete(runner.cleanup())
        loop.run_until_complete(loop.shutdown_asyncgens())
        asyncio.set_event_loop(None)
        loop.close()
