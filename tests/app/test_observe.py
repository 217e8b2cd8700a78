"""Operations in one process: probes, /metrics and who may read it, the request log line, and
secrets kept out of every log line (issue 8 defect 13)."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient

from app.config import Settings
from app.logs import configure_logging, redact
from app.main import create_app
from app.resources import POOL
from app.views import webhooks as webhook_views
from migrations import discover
from tests.app.views.test_webhooks import incoming_path, make_webhook
from tests.servers import free_port
from tests.support import World


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
    try:
        raise ValueError("bad Bearer abcdef0123456789")
    except ValueError:
        log.exception("failed")
    output = log_output.getvalue()
    for secret in ("abcDEF123secret", "YWxpY2U6c2VjcmV0", "hunter2", "hunter3", "hunter4",
                   "tok-5", "abcdef0123456789"):
        assert secret not in output, secret
    assert "/api/webhooks/17/[REDACTED]" in output
    assert "user[name]=x" in output


def test_redact_leaves_ordinary_text_alone() -> None:
    text = "GET /api/users/12 200 3.1 ms (request 9f8e)"
    assert redact(text) == text
