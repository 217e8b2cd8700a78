"""/metrics moves when what it counts happens: each family is read before and after, through
/metrics itself (as Prometheus reads it), around real requests, websockets, Redis and push
deliveries. PostgreSQL reconnects are in tests/app/test_postgres_restart.py (its private
server), the hub's own drops in tests/realtime/test_metrics.py."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from aiohttp.test_utils import TestClient
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

import app.main
from app import worker
from app.config import Settings
from app.main import create_app
from app.passwords import Passwords
from app.resources import HUB, POOL
from realtime.hub import RedisHub
from tests.app.test_multiprocess import (
    START_TIMEOUT,
    _children,
    connect,
    http,  # noqa: F401 - a fixture
    spawn,  # noqa: F401 - a fixture
)
from tests.app.views.conversations_support import start
from tests.app.views.realtime_support import basic_headers, next_event, open_socket
from tests.push.conftest import fcm  # noqa: F401 - a fixture
from tests.push.fake_fcm import Answer, FakeFcm
from tests.push.test_worker import fcm_settings, mention, register
from tests.realtime.test_websocket import never_reading_client
from tests.support import World

Labels = frozenset[tuple[str, str]]


class Samples(dict[tuple[str, Labels], float]):
    """One scrape of /metrics: sample name and labels -> value."""

    @classmethod
    def parse(cls, text: str) -> Samples:
        samples = cls()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
        return samples

    def __call__(self, name: str, **labels: str) -> float:
        """The value of one series; 0 when it does not exist yet."""
        return self.get((name, frozenset(labels.items())), 0.0)

    def since(self, before: Samples, name: str, **labels: str) -> float:
        return self(name, **labels) - before(name, **labels)


async def scrape(client: TestClient | aiohttp.ClientSession, url: str = "/metrics") -> Samples:
    async with client.get(url) as resp:
        assert resp.status == 200, await resp.text()
        return Samples.parse(await resp.text())


async def until(
    client: TestClient, condition: Callable[[Samples], bool], within: float = 20
) -> Samples:
    """Scrape until `condition` holds (what it waits for happens in the background)."""
    samples = await scrape(client)
    async with asyncio.timeout(within):
        while not condition(samples):
            await asyncio.sleep(0.05)
            samples = await scrape(client)
    return samples


# -- requests ------------------------------------------------------------------------------


async def test_requests_are_counted_and_timed_by_route_template_and_status(
    world: World, client: TestClient
) -> None:
    admin = await world.community()
    route = "/api/users/:user_id"
    before = await scrape(client)
    for _ in range(3):
        assert (await admin.api.get(f"/api/users/{admin.id}")).status == 200
    assert (await admin.api.get("/api/users/999999")).status == 404
    assert (await admin.api.put(f"/api/users/{admin.id}", json={})).status in (200, 422)
    after = await scrape(client)

    found = {"method": "GET", "route": route, "status": "200"}
    missing = {**found, "status": "404"}
    assert after.since(before, "commons_http_requests_total", **found) == 3
    assert after.since(before, "commons_http_requests_total", **missing) == 1
    assert after.since(before, "commons_http_request_duration_seconds_count", **found) == 3
    assert after.since(before, "commons_http_request_duration_seconds_count", **missing) == 1
    assert after.since(before, "commons_http_request_duration_seconds_bucket",
                       le="+Inf", **missing) == 1
    assert after.since(before, "commons_http_request_duration_seconds_sum", **found) > 0
    assert sum(after.since(before, "commons_http_requests_total", method="PUT", route=route,
                           status=status) for status in ("200", "422")) == 1
    text = await (await client.get("/metrics")).text()
    assert "/api/users/999999" not in text and f"/api/users/{admin.id}" not in text


# -- websockets and the hub ----------------------------------------------------------------


async def test_websocket_connections_and_hub_deliveries(
    world: World, client: TestClient
) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    conversation = await start(ann, bob, text=None)
    before = await scrape(client)
    (ann_ws, _), (bob_ws, _) = await open_socket(ann), await open_socket(bob)
    both = await scrape(client)
    assert both.since(before, "commons_websocket_connections") == 2
    assert both.since(before, "commons_websocket_connections_opened_total") == 2

    resp = await ann.api.post(f"/api/conversations/{conversation['id']}/remarks",
                              json={"remark": {"text": "hello"}})
    assert resp.status == 201, resp.text
    for ws in (ann_ws, bob_ws):
        assert (await next_event(ws))["event"] == "remark.created"
    delivered = await scrape(client)
    # one per socket and event: at least the remark on both sockets
    assert delivered.since(both, "commons_hub_deliveries_total") >= 2

    await bob_ws.close()
    one = await until(client, lambda s: s.since(before, "commons_websocket_connections") == 1)
    assert one.since(before, "commons_websocket_connections_opened_total") == 2
    await ann_ws.close()
    await until(client, lambda s: s.since(before, "commons_websocket_connections") == 0)


async def test_a_slow_reader_is_counted_with_what_it_dropped(
    aiohttp_client: Any, settings: Settings
) -> None:
    small = dataclasses.replace(settings, realtime_queue_frames=2)
    client: TestClient = await aiohttp_client(create_app(small))
    world = World(client.app[POOL], Passwords(settings.argon2), client)
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    conversation = await start(ann, bob, text=None)
    assert client.port is not None
    before = await scrape(client)
    sock = await never_reading_client(client.port, "/api/realtime", basic_headers(bob))
    try:
        text = "x" * 20_000
        posted = 0
        samples = before
        async with asyncio.timeout(60):
            while samples.since(before, "commons_hub_slow_reader_disconnects_total") == 0:
                resp = await ann.api.post(f"/api/conversations/{conversation['id']}/remarks",
                                          json={"remark": {"text": text}})
                assert resp.status == 201, resp.text
                posted += 1
                samples = await scrape(client)
        # the kernel's buffers (capped) and asyncio's, then 3 frames queued: well under 100
        assert posted < 100, posted
        assert samples.since(before, "commons_hub_slow_reader_disconnects_total") == 1
        assert samples.since(before, "commons_hub_drops_total") >= 3  # the queue, at the cut
        assert samples.since(before, "commons_hub_deliveries_total") >= posted
    finally:
        sock.close()


async def test_redis_reconnects_are_counted(
    world: World, client: TestClient, redis_url: str
) -> None:
    ann = await world.community("Acme")
    ws, _ = await open_socket(ann)  # the hub subscribes when a community's first socket comes
    hub = client.app[HUB]
    assert isinstance(hub, RedisHub)
    before = await scrape(client)
    admin = aioredis.Redis.from_url(redis_url)
    try:
        ours = [c for c in await admin.client_list(_type="pubsub")
                if c["name"] == hub.client_name]
        assert len(ours) == 1, ours
        await admin.execute_command("CLIENT", "KILL", "ID", ours[0]["id"])
    finally:
        await admin.aclose()
    after = await until(client, lambda s: s.since(before, "commons_redis_reconnects_total") > 0)
    assert after.since(before, "commons_redis_reconnects_total") == 1
    await ws.close()


# -- the database pool ---------------------------------------------------------------------


async def test_db_pool_use(
    aiohttp_client: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app.main, "POOL_SAMPLE_SECONDS", 0.05)
    client: TestClient = await aiohttp_client(
        create_app(dataclasses.replace(settings, db_pool_size=7)))
    pool = client.app[POOL]
    held = [await pool.acquire() for _ in range(3)]
    try:
        busy = await until(client, lambda s: s("commons_db_pool_in_use") >= 3)
        assert busy("commons_db_pool_max") == 7
        assert 3 <= busy("commons_db_pool_connections") <= 7
    finally:
        for conn in held:
            await pool.release(conn)
    # what is left in use is at most the scrape's own connection
    await until(client, lambda s: s("commons_db_pool_in_use") <= 1)


# -- push ------------------------------------------------------------------------------------


async def test_push_jobs_and_queue_depth_through_the_worker_loop(
    world: World, client: TestClient, settings: Settings, fcm: FakeFcm,  # noqa: F811
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real `run_worker` loop against the fake FCM: its counts reach /metrics through its
    heartbeat row, by outcome; the queue depth is read from PostgreSQL."""
    monkeypatch.setattr(worker, "HEARTBEAT_EVERY", 0.1)
    admin = await world.community()
    ann = await world.user(admin, "Ann", "Lee")
    bob, cat, dan, eve = [await world.user(admin, name) for name in ("Bob", "Cat", "Dan", "Eve")]
    for member, token in ((bob, "bob:ok"), (cat, "cat:gone"), (dan, "dan:busy"),
                          (eve, "eve:bad")):
        await register(member, token)
    fcm.script["cat:gone"] = [Answer(404, "UNREGISTERED")]  # the device is pruned
    fcm.script["dan:busy"] = [Answer(503, "UNAVAILABLE")]  # retried (in 10 min)
    fcm.script["eve:bad"] = [Answer(400, "UNSPECIFIED_ERROR")]  # never accepted: failed
    await mention(ann, bob, cat, dan, eve)
    queued = await world.pool.fetchval("SELECT count(*) FROM push_jobs")
    assert queued >= 4
    assert (await scrape(client))("commons_push_queue_depth") == queued

    me = worker.worker_id()
    stop = asyncio.Event()
    slow_retries = dataclasses.replace(settings.push, backoff_min=600.0, backoff_max=600.0)
    task = asyncio.create_task(worker.run_worker(
        dataclasses.replace(settings, fcm=fcm_settings(fcm, tmp_path), push=slow_retries),
        stop=stop))
    try:
        expected = {"sent": 1, "pruned": 1, "retried": 1, "failed": 1}
        samples = await until(client, lambda s: all(
            s("commons_push_jobs_total", worker=me, outcome=outcome) == count
            for outcome, count in expected.items()))
        assert samples("commons_push_queue_depth") == 1  # dan's, waiting for its retry
        assert samples("commons_worker_alive") == 1
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
    assert not task.exception()


# -- several processes -----------------------------------------------------------------------


def _per_process(directory: Path, name: str, **labels: str) -> dict[int, float]:
    """A counter's value in each process's own file (prometheus multiprocess mode)."""
    values = {}
    for path in directory.glob("counter_*.db"):
        pid = int(path.stem.split("_")[1])
        value = 0.0
        for family in MultiProcessCollector.merge([str(path)], accumulate=True):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v
                                               for k, v in labels.items()):
                    value += sample.value
        values[pid] = value
    return values


async def test_serve_with_two_workers_reports_every_process(
    world: World, spawn: Any, http: aiohttp.ClientSession  # noqa: F811
) -> None:
    ann = await world.community("Acme")
    server = spawn("--workers", "2")
    healthz = {"method": "GET", "route": "/healthz", "status": "200"}
    directory = server.log.parent / "prometheus" / str(server.port)
    requests = 0
    async with asyncio.timeout(START_TIMEOUT + 60):
        await server.wait_until_up(http)  # one process listens; the other may still start
        children = _children(server.process.pid)
        # a new connection each time: SO_REUSEPORT spreads connections, not requests
        fresh = aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True))
        async with fresh:
            served: dict[int, float] = {}
            while len(served) < 2 or requests < 20:  # until both processes have answered
                async with fresh.get(f"{server.base}/healthz") as resp:
                    assert resp.status == 200
                requests += 1
                by_process = _per_process(directory, "commons_http_requests_total", **healthz)
                served = {pid: n for pid, n in by_process.items() if n}
            assert set(served) <= children, (served, children)
            assert sum(served.values()) == requests
            sockets = [await connect(fresh, server, ann) for _ in range(6)]
            for _ in range(4):  # whichever process answers adds up both
                samples = await scrape(fresh, f"{server.base}/metrics")
                assert samples("commons_http_requests_total", **healthz) == requests
                assert samples("commons_websocket_connections") == 6
            for ws in sockets:
                await ws.close()
