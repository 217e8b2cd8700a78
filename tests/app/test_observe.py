"""Operations in one process: probes, /metrics and who may read it, the request log line, and
secrets kept out of every log line (issue 8 defect 13)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from aiohttp import web
from aiohttp.log import access_logger as aiohttp_access_log
from aiohttp.test_utils import TestClient, TestServer

from app.config import Settings
from app.logs import configure_logging, redact
from app.main import create_app
from app.resources import POOL
from app.server import make_runner
from app.views import webhooks as webhook_views
from migrations import discover
from tests.app.views.test_external_systems import make_system, service_header
from tests.app.views.test_webhooks import incoming_path, make_webhook
from tests.servers import free_port
from tests.support import PASSWORD, World


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """The production logging set-up (JSON lines), writing into a buffer."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    buffer = io.StringIO()
    configure_logging("INFO", "json", stream=buffer)
    yield buffer
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved[0]:
        root.addHandler(handler)
    root.setLevel(saved[1])


def lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]


# -- probes ---------------------------------------------------------------------------------


async def test_healthz_answers_any_host_without_credentials(client: TestClient) -> None:
    for host in ("nowhere.example", "10.1.2.3:8080", "localhost"):
        resp = await client.get("/healthz", headers={"Host": host})
        assert resp.status == 200
        assert await resp.json() == {"status": "ok"}


async def test_readyz_ready(client: TestClient) -> None:
    resp = await client.get("/readyz", headers={"Host": "lb.internal"})
    body = await resp.json()
    assert resp.status == 200, body
    assert body["status"] == "ready"
    assert body["checks"]["postgres"] == "ok"
    assert body["checks"]["redis"] == "ok"
    assert body["checks"]["worker"] == {"alive": 0, "last_heartbeat_seconds": None}


async def test_readyz_unready_when_migrations_are_missing(
    aiohttp_client: Any, settings: Settings, database_url: str
) -> None:
    conn = await asyncpg.connect(database_url)
    last = discover()[-1]
    try:
        row = await conn.fetchrow("DELETE FROM schema_migrations WHERE name = $1 RETURNING *",
                                  last.name)
        client = await aiohttp_client(create_app(settings))
        resp = await client.get("/readyz")
        body = await resp.json()
    finally:
        await conn.execute("INSERT INTO schema_migrations VALUES ($1, $2, $3)", *row.values())
        await conn.close()
    assert resp.status == 503
    assert resp.headers["Retry-After"]
    assert body["status"] == "unavailable"
    assert f"migrations: 1 not applied (first {last.name})" in body["reason"]


async def test_readyz_unready_when_redis_is_unreachable(
    aiohttp_client: Any, settings: Settings
) -> None:
    dead = dataclasses.replace(settings, redis_url=f"redis://127.0.0.1:{free_port()}/0")
    client = await aiohttp_client(create_app(dead))
    resp = await client.get("/readyz")
    body = await resp.json()
    assert resp.status == 503
    assert body["checks"]["postgres"] == "ok"
    assert body["reason"].startswith("redis: unreachable")


async def test_readyz_reports_the_worker_heartbeat(client: TestClient) -> None:
    from storage import heartbeats

    await heartbeats.beat(client.app[POOL], "box:42", "box", 42,
                          {"sent": 3, "failed": 1, "retried": 2, "pruned": 0})
    body = await (await client.get("/readyz")).json()
    assert body["checks"]["worker"]["alive"] == 1
    assert body["checks"]["worker"]["last_heartbeat_seconds"] < 5
    metrics = await (await client.get("/metrics")).text()
    assert "commons_worker_alive 1.0" in metrics
    assert 'commons_push_jobs_total{outcome="sent",worker="box:42"} 3.0' in metrics
    assert "commons_push_queue_depth 0.0" in metrics


async def test_readyz_unready_while_draining(client: TestClient) -> None:
    from app.views.ops import DRAINING

    client.app[DRAINING].set()
    resp = await client.get("/readyz")
    assert resp.status == 503
    assert "shutting down" in (await resp.json())["reason"]


# -- metrics (what they count: tests/app/test_metrics.py) ------------------------------------


async def test_metrics_refused_outside_the_allowed_networks(
    aiohttp_client: Any, settings: Settings
) -> None:
    closed = dataclasses.replace(settings, metrics_allow=("10.0.0.0/8",),
                                 metrics_token="s3cret-token")
    client = await aiohttp_client(create_app(closed))
    refused = await client.get("/metrics")
    assert refused.status == 403
    assert (await refused.json())["code"] == "forbidden"
    wrong = await client.get("/metrics", headers={"Authorization": "Bearer nope"})
    assert wrong.status == 403
    allowed = await client.get("/metrics", headers={"Authorization": "Bearer s3cret-token"})
    assert allowed.status == 200
    assert "commons_http_requests_total" in await allowed.text()


# -- logs -----------------------------------------------------------------------------------


async def test_one_json_line_per_request(
    world: World, aiohttp_client: Any, settings: Settings, log_output: io.StringIO
) -> None:
    client = await aiohttp_client(create_app(dataclasses.replace(settings, log_format="json")))
    world.client = client
    admin = await world.community()
    log_output.truncate(0)
    log_output.seek(0)
    resp = await client.get(f"/api/users/{admin.id}", headers={
        **admin.api._headers(None), "X-Request-Id": "req-123"})
    assert resp.status == 200
    access = [line for line in lines(log_output) if line["logger"] == "commons.access"]
    assert len(access) == 1
    line = access[0]
    assert line["request_id"] == "req-123"
    assert line["community"] == admin.community.id
    assert line["user_id"] == admin.id
    assert line["route"] == "/api/users/:user_id"
    assert line["method"] == "GET"
    assert line["status"] == 200
    assert line["duration_ms"] >= 0


async def test_webhook_secret_never_reaches_the_log(
    world: World, aiohttp_client: Any, settings: Settings, log_output: io.StringIO,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Defect 13: the incoming-webhook path carries the secret; an error on that route logged
    the path in full at ERROR, and the request line at INFO."""
    client = await aiohttp_client(create_app(dataclasses.replace(settings, log_format="json")))
    world.client = client
    admin = await world.community()
    group = await world.group(admin)
    hook = await make_webhook(admin, group["id"])

    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the blob store fell over")

    monkeypatch.setattr(webhook_views.actions, "post_incoming", broken)
    resp = await client.post(incoming_path(hook), json={"message": {"body": "deployed"}},
                             headers={"Host": admin.community.domain})
    assert resp.status == 500
    output = log_output.getvalue()
    assert "unhandled error in POST /api/webhooks/:webhook_identifier/:webhook_secret" in output
    assert hook["secret"] not in output
    levels = {line["level"] for line in lines(log_output)}
    assert {"INFO", "ERROR"} <= levels


def test_redaction_of_what_libraries_may_log(log_output: io.StringIO) -> None:
    log = logging.getLogger("some.library")
    log.warning("GET /api/webhooks/17/abcDEF123secret failed")
    log.warning("headers: %s", {"Authorization": "Basic YWxpY2U6c2VjcmV0"})
    log.warning("connecting to postgresql://commons:hunter2@db:5432/commons")
    log.warning("form user[password]=hunter3&user[name]=x")
    log.warning('body {"password": "hunter4", "token": "tok-5"}')
    log.warning("credentials SocialcastApiClient 9f8e7d:hunter6 refused")
    log.warning("headers %s", {"Cookie": "lang=en; commons_session=hunter7",
                               "Set-Cookie": 'commons_session="hunter8"; HttpOnly; Path=/'})
    try:
        raise ValueError("bad Bearer abcdef0123456789")
    except ValueError:
        log.exception("failed")
    output = log_output.getvalue()
    for secret in ("abcDEF123secret", "YWxpY2U6c2VjcmV0", "hunter2", "hunter3", "hunter4",
                   "tok-5", "abcdef0123456789", "hunter6", "hunter7", "hunter8"):
        assert secret not in output, secret
    assert "/api/webhooks/17/[REDACTED]" in output
    assert "user[name]=x" in output


def test_redact_leaves_ordinary_text_alone() -> None:
    text = "GET /api/users/12 200 3.1 ms (request 9f8e)"
    assert redact(text) == text


class ProductionServer(TestServer):
    """The app on `commons serve`'s runner (app.server.make_runner), with aiohttp's raw access
    log turned on as an operator could: every line it writes must be redacted too."""

    def __init__(self, app: web.Application, settings: Settings) -> None:
        super().__init__(app)
        self.settings = settings

    async def _make_runner(self, **kwargs: Any) -> web.BaseRunner:
        return make_runner(self.app, self.settings, access_log=aiohttp_access_log, **kwargs)


async def test_no_secret_reaches_any_log_line(
    world: World, aiohttp_client: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Defect 13, through real requests at DEBUG: the access lines (ours and aiohttp's), the
    JSON log, parser errors and a traceback never carry a password, Basic credentials, a
    service client secret (either scheme), a session cookie, a webhook secret or a token in
    a query."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    buffer = io.StringIO()
    configure_logging("DEBUG", "json", stream=buffer)
    try:
        on_json = dataclasses.replace(settings, log_format="json")
        client = await aiohttp_client(ProductionServer(create_app(on_json), on_json))
        world.client = client
        admin = await world.community()
        anon = admin.api.anonymous()
        host = {"Host": admin.community.domain}
        system = await make_system(admin)
        hook = await make_webhook(admin, (await world.group(admin))["id"])
        secrets = {"password": PASSWORD, "new password": "Brand-new-pass-77",
                   "basic": base64.b64encode(f"{admin.email}:{PASSWORD}".encode()).decode(),
                   "client secret": system["client_secret"], "webhook": hook["secret"],
                   "query token": "qtok-5e3f9a1b7c", "query key": "qkey-0d4c2b8a6e"}
        # a session, then requests made with it
        login = await anon.post("/api/authentication",
                                json={"email": admin.email, "password": PASSWORD})
        assert login.status == 200
        cookie = next(c for c in login.headers.getall("Set-Cookie")
                      if c.startswith("commons_session="))
        secrets["session"] = cookie.split(";")[0].split("=", 1)[1].strip('"')
        by_cookie = {**host, "Cookie": cookie.split(";")[0]}
        assert (await client.get("/api/userinfo", headers=by_cookie)).status == 200
        # Basic credentials, right and wrong; the password in a form and in a failed change
        assert (await admin.api.get("/api/userinfo")).status == 200
        assert (await admin.api.as_user(admin.email, "Wrong-pass-99").get(
            "/api/userinfo")).status == 401
        secrets["wrong password"] = "Wrong-pass-99"
        assert (await anon.post("/api/authentication", data={
            "email": admin.email, "password": "Wrong-pass-99"})).status == 401
        change = await admin.api.put(f"/api/users/{admin.id}", json={"user": {
            "password": secrets["new password"], "current_password": "Wrong-pass-99"}})
        assert change.status == 403, change.text
        # the service client schemes, right and wrong
        for scheme in ("SocialcastApiClient", "ServiceApiClient"):
            ok = await client.post("/api/external_systems/authentication",
                                   headers={**host, **service_header(system, scheme)})
            assert ok.status == 200, ok.text
        wrong = {**host, "Authorization":
                 f"SocialcastApiClient {system['client_identifier']}:Wrong-pass-99"}
        assert (await client.post("/api/external_systems/authentication",
                                  headers=wrong)).status == 401
        # tokens in a query (ignored, but in the request line)
        resp = await admin.api.get("/api/users/search", params={
            "q": "x", "access_token": secrets["query token"], "api_key": secrets["query key"]})
        assert resp.status == 200
        # an incoming webhook, whose path carries its secret
        resp = await client.post(incoming_path(hook), json={"message": {"body": "deployed"}},
                                 headers=host)
        assert resp.status == 204
        # parser errors on the raw socket, with credentials in the head
        for raw in (f"GET /api/userinfo?token={secrets['query token']} HTTP/1.1\n"
                    f"Host: x\nAuthorization: Basic {secrets['basic']}\n\n",
                    f"GET / HTTP/1.1\r\nAuthorization: Basic {secrets['basic']}\r\n"
                    f"X-Long: {'b' * 20_000}\r\n\r\n"):
            reader, writer = await asyncio.open_connection(client.host, client.port)
            writer.write(raw.encode())
            await writer.drain()
            assert (await asyncio.wait_for(reader.read(), 5)).split(b" ")[1].startswith(b"4")
            writer.close()

        # an error whose text echoes what a library was given (a traceback at ERROR)
        async def broken(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError(
                f"upstream refused GET /x?access_token={secrets['query token']} with "
                f"Authorization: SocialcastApiClient {system['client_identifier']}:"
                f"{secrets['client secret']}, Cookie: commons_session={secrets['session']}; "
                f"lang=en, Set-Cookie: commons_session=\"{secrets['session']}\"; HttpOnly, "
                f"{{'password': '{PASSWORD}'}}, user[password]={secrets['new password']}; "
                f"retried as SocialcastApiClient {system['client_identifier']}:"
                f"{secrets['client secret']}")

        monkeypatch.setattr(webhook_views.actions, "post_incoming", broken)
        resp = await client.post(incoming_path(hook), json={"message": {"body": "again"}},
                                 headers=host)
        assert resp.status == 500
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])

    output = buffer.getvalue()
    records = lines(buffer)
    # everything was logged: our access line per request, aiohttp's too, the errors
    assert len([r for r in records if r["logger"] == "commons.access"]) >= 12
    assert any(r["logger"] == "aiohttp.access" for r in records)
    assert any("HTTP parser error" in r["message"] for r in records)
    assert any(r["level"] == "ERROR" and "RuntimeError" in r.get("exception", "")
               for r in records)
    leaked = {name: [r for r in records if value in json.dumps(r)]
              for name, value in secrets.items() if value in output}
    assert not leaked, leaked
