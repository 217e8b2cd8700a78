"""APNs end to end: the worker's pushes go through an HTTP CONNECT proxy (APNS_PROXY) and TLS
(the test CA trusted through SSL_CERT_FILE) to a local HTTP/2 stand-in for APNs
(tests/push/fake_apns.py), which checks what Apple checks."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from app.config import ApnsSettings, Settings
from app.worker import run_worker
from push import jobs
from push.apns import ApnsProvider, parse_proxy
from push.log import LogProvider
from push.worker import PushWorker, WorkerSettings
from tests.app.views.conversations_support import say, start
from tests.push.fake_apns import (
    KEY_ID,
    TEAM_ID,
    TOPIC,
    Answer,
    ConnectProxy,
    FakeApns,
    make_certificates,
)
from tests.support import Member, World

DEVICE = "a1" * 32
OTHER = "b2" * 32


@dataclass
class Apple:
    fake: FakeApns
    proxy: ConnectProxy
    settings: ApnsSettings


@pytest.fixture
async def apple(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Apple]:
    ca, cert, key = make_certificates(tmp_path / "tls")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # the worker trusts the test CA, and only it
    fake = FakeApns()
    await fake.start(cert, key)
    proxy = ConnectProxy(("127.0.0.1", fake.port))
    await proxy.start()
    settings = ApnsSettings(key_file=str(fake.p8(tmp_path)), key_id=KEY_ID, team_id=TEAM_ID,
                            topic=TOPIC, use_sandbox=False, proxy=proxy.url)
    yield Apple(fake, proxy, settings)
    await proxy.stop()
    await fake.stop()


@pytest.fixture
async def provider(apple: Apple) -> AsyncIterator[ApnsProvider]:
    apns = ApnsProvider.from_options(apple.settings)
    yield apns
    await apns.close()


def make_worker(world: World, provider: ApnsProvider, **settings: float) -> PushWorker:
    return PushWorker(world.pool, {"apns": provider, "fcm": LogProvider("fcm")},
                      WorkerSettings(**{"backoff_min": 60.0, **settings}), rng=lambda: 1.0)


async def register(member: Member, token: str, notification_type: str = "main") -> None:
    resp = await member.api.put("/api/client_devices", json={
        "registration_id": token, "notification_type": notification_type,
        "client_device": {"platform": "apns"},
    })
    assert resp.status == 204, resp.text


async def people(world: World) -> tuple[Member, Member]:
    admin = await world.community()
    return await world.user(admin, "Ann", "Lee"), await world.user(admin, "Bob", "Ray")


async def mention(author: Member, *people: Member, text: str = "look") -> int:
    names = " ".join(f"@{p.username}" for p in people)
    resp = await author.api.post("/api/messages", json={"message": {"body": f"{text} {names}"}})
    assert resp.status == 201, resp.text
    message_id: int = resp.json["message"]["id"]
    return message_id


async def due_in(world: World) -> list[float]:
    rows = await world.pool.fetch(
        "SELECT extract(epoch FROM next_attempt_at - now())::float8 AS s FROM push_jobs "
        "ORDER BY id")
    return [r["s"] for r in rows]


async def test_a_push_reaches_apns_as_apple_expects_it(
    world: World, apple: Apple, provider: ApnsProvider
) -> None:
    ann, bob = await people(world)
    await register(bob, DEVICE)
    message_id = await mention(ann, bob, text="Standup moved")
    job_id = (await jobs.pending(world.pool))[0]["id"]
    stats = await make_worker(world, provider).run_once()
    assert (stats.sent, stats.handled) == (1, 1)
    assert apple.proxy.tunnels == ["api.push.apple.com:443"]  # through APNS_PROXY
    [got] = apple.fake.received
    assert got.headers[":method"] == "POST"
    assert got.headers[":path"] == f"/3/device/{DEVICE}"
    assert got.headers["apns-topic"] == TOPIC
    assert got.headers["apns-push-type"] == "alert"
    assert got.headers["apns-priority"] == "10"
    assert got.headers["apns-id"] == jobs.push_id(job_id)
    uuid.UUID(got.headers["apns-id"])  # the UUID form APNs wants
    # a re-send (at least once delivery) replaces exactly its first copy on the device
    assert got.headers["apns-collapse-id"] == got.headers["apns-id"]
    # the bearer JWT verified with the .p8 key's public half (fake_apns), and it says:
    assert got.jwt_header == {"alg": "ES256", "kid": KEY_ID, "typ": "JWT"}
    assert got.jwt_claims["iss"] == TEAM_ID and abs(got.jwt_claims["iat"] - _now()) < 60
    note = (await bob.api.get("/api/notifications")).json
    assert got.payload["aps"] == {
        "alert": {"title": "Ann Lee mentioned you", "body": f"Standup moved @{bob.username}"},
        "sound": "default", "badge": 1, "thread-id": f"Message:{message_id}",
    }
    assert note["unread_notifications_count"] == 1
    assert got.payload["notification_id"] == str(note["notifications"][0]["id"])
    # the connection and the provider token are kept for the next push
    await mention(ann, bob)
    assert (await make_worker(world, provider).run_once()).sent == 1
    second = apple.fake.received[1]
    assert second.payload["aps"]["badge"] == 2
    assert second.token == got.token and apple.fake.connections == 1


def _now() -> float:
    import time

    return time.time()


async def test_an_unregistered_device_is_forgotten(
    world: World, apple: Apple, provider: ApnsProvider
) -> None:
    ann, bob = await people(world)
    await register(bob, DEVICE)
    await register(bob, OTHER)
    apple.fake.script[DEVICE] = [Answer(410, "Unregistered")]
    apple.fake.script[OTHER] = [Answer(400, "BadDeviceToken")]
    await mention(ann, bob)
    stats = await make_worker(world, provider).run_once()
    assert stats.rejected == 2
    assert (await bob.api.get("/api/client_devices")).json["client_devices"] == []
    assert await jobs.pending(world.pool) == []


@pytest.mark.parametrize(("status", "reason"), [(429, "TooManyRequests"),
                                                (503, "ServiceUnavailable")])
async def test_busy_apns_is_retried_after_retry_after(
    world: World, apple: Apple, provider: ApnsProvider, status: int, reason: str
) -> None:
    ann, bob = await people(world)
    await register(bob, DEVICE)
    apple.fake.script[DEVICE] = [Answer(status, reason, {"retry-after": "120"})]
    await mention(ann, bob)
    worker = make_worker(world, provider, backoff_min=1.0)
    assert (await worker.run_once()).retried == 1
    [wait] = await due_in(world)
    assert 118 <= wait <= 121  # Retry-After, not the 1 s backoff
    assert (await worker.run_once()).handled == 0  # not due yet
    await world.pool.execute("UPDATE push_jobs SET next_attempt_at = now()")
    assert (await worker.run_once()).sent == 1
    assert [s for _, s in apple.fake.answered] == [status, 200]
    # the same push both times: the same apns-id
    assert len({r.headers["apns-id"] for r in apple.fake.received}) == 1


async def test_an_expired_provider_token_is_re_signed_once(
    world: World, apple: Apple, provider: ApnsProvider
) -> None:
    ann, bob = await people(world)
    await register(bob, DEVICE)
    await mention(ann, bob)
    worker = make_worker(world, provider)
    assert (await worker.run_once()).sent == 1
    first = apple.fake.received[0].token
    apple.fake.expired.add(first)
    await mention(ann, bob)
    assert (await worker.run_once()).sent == 1  # no retry: re-signed and sent again at once
    assert apple.fake.answered[1:] == [(DEVICE, 403), (DEVICE, 200)]
    assert apple.fake.received[-1].token != first
    # refused again right after being re-signed: not re-signed in a loop, but retried later
    apple.fake.expire_all = True
    await mention(ann, bob)
    assert (await worker.run_once()).retried == 1
    assert apple.fake.answered[3:] == [(DEVICE, 403), (DEVICE, 403)]


async def test_the_proxy_setting() -> None:
    assert parse_proxy("http://proxy.corp:3128") == ("proxy.corp", 3128)
    assert parse_proxy("proxy.corp:3128") == ("proxy.corp", 3128)
    with pytest.raises(ValueError, match="APNS_PROXY"):
        parse_proxy("socks5://proxy.corp:1080")
    env = {"APNS_KEY_FILE": "k.p8", "APNS_PROXY": "http://proxy.corp:3128"}
    apns = Settings.from_env(env).apns
    assert apns is not None and apns.proxy == "http://proxy.corp:3128"


async def test_commons_worker_pushes_through_the_proxy(
    world: World, apple: Apple, settings: Settings
) -> None:
    ann, bob = await people(world)
    await register(bob, DEVICE, "conversations")
    conversation = await start(ann, bob, text=None)
    await say(ann, conversation["id"], "hello over HTTP/2")
    await run_worker(replace(settings, apns=apple.settings), once=True)
    [got] = apple.fake.received
    assert got.headers[":path"] == f"/3/device/{DEVICE}"
    assert got.payload["aps"]["alert"] == {"title": "Ann Lee", "body": "hello over HTTP/2"}
    assert got.payload["aps"]["thread-id"] == f"conversation:{conversation['id']}"
    assert got.payload["aps"]["badge"] == 1


async def test_a_read_sends_a_silent_badge_update_through_apns(
    world: World, apple: Apple, provider: ApnsProvider
) -> None:
    ann, bob = await people(world)
    await register(bob, DEVICE)
    await mention(ann, bob)
    await mention(ann, bob)
    worker = make_worker(world, provider)
    assert (await worker.run_once()).sent == 2
    note = (await bob.api.get("/api/notifications")).json["notifications"][0]
    assert (await bob.api.post(f"/api/notifications/{note['id']}/read")).status == 204
    assert (await worker.run_once()).sent == 1
    got = apple.fake.received[-1]
    assert got.headers["apns-push-type"] == "background"
    assert got.headers["apns-priority"] == "5"  # what Apple requires of background pushes
    assert "apns-collapse-id" not in got.headers
    assert got.payload == {"type": "badge", "aps": {"content-available": 1, "badge": 1}}
    unread = (await bob.api.get("/api/notifications")).json["unread_notifications_count"]
    assert unread == 1


async def test_requests_wait_for_the_servers_stream_limit(
    world: World, apple: Apple, provider: ApnsProvider
) -> None:
    """APNs announces a low SETTINGS_MAX_CONCURRENT_STREAMS on a new connection: requests
    beyond it wait for a stream to end instead of failing."""
    ann, bob = await people(world)
    for n in range(6):
        await register(bob, f"{n:02d}" * 32)
    apple.fake.max_streams = 2
    apple.fake.delay = 0.05
    await mention(ann, bob)
    stats = await make_worker(world, provider, concurrency=6).run_once()
    assert stats.sent == 6 and apple.fake.connections == 1, [
        j["last_error"] for j in await jobs.pending(world.pool)]
    assert apple.fake.most_streams == 2


def test_push_settings_from_the_environment() -> None:
    push = Settings.from_env({
        "PUSH_BATCH_SIZE": "50", "PUSH_CONCURRENCY": "8", "PUSH_LEASE_SECONDS": "30",
        "PUSH_BACKOFF_MIN_SECONDS": "2", "PUSH_BACKOFF_MAX_SECONDS": "600",
        "PUSH_GIVE_UP_SECONDS": "3600", "PUSH_BADGE_INTERVAL_SECONDS": "2.5",
    }).push
    assert push == WorkerSettings(batch_size=50, concurrency=8, lease=30.0, backoff_min=2.0,
                                  backoff_max=600.0, give_up=3600.0, badge_interval=2.5)
    assert Settings.from_env({}).push == WorkerSettings()


async def test_a_connection_apns_closed_is_opened_again(
    world: World, apple: Apple, provider: ApnsProvider
) -> None:
    ann, bob = await people(world)
    await register(bob, DEVICE)
    await mention(ann, bob)
    worker = make_worker(world, provider)
    assert (await worker.run_once()).sent == 1
    apple.fake.drop_connections()  # as APNs closes idle connections
    await mention(ann, bob)
    stats = await worker.run_once()
    # the closed connection is noticed and a new one opened (through the proxy again), or the
    # push is retried if it raced with the close; either way it arrives
    if stats.retried:
        await world.pool.execute("UPDATE push_jobs SET next_attempt_at = now()")
        stats = await worker.run_once()
    assert stats.sent == 1
    assert apple.fake.connections == 2 and len(apple.proxy.tunnels) == 2
    assert len(apple.fake.received) == 2


@pytest.mark.parametrize("impostor", ["an untrusted CA", "another host's certificate"])
async def test_an_apns_server_whose_certificate_does_not_check_out_is_refused(
    world: World, apple: Apple, tmp_path: Path, impostor: str
) -> None:
    """The tunnel leads to a server that speaks APNs perfectly but cannot prove it is Apple:
    its certificate is signed by a CA the worker does not trust, or by the trusted CA but for
    another host. The worker refuses the connection: a temporary failure (retried later, as
    any network failure), nothing sent, nothing marked sent. The genuine server afterwards
    gets the very same push (so the refusal is TLS checking, not a broken set-up)."""
    ann, bob = await people(world)
    await register(bob, DEVICE)
    await mention(ann, bob)
    if impostor == "an untrusted CA":
        _, cert, key = make_certificates(tmp_path / "rogue")
    else:
        _, cert, key = make_certificates(tmp_path / "rogue", hosts=("push.example.org",),
                                         ca_of=tmp_path / "tls")
    rogue = FakeApns(key=apple.fake.key)  # would even verify our JWT
    await rogue.start(cert, key)
    apple.proxy.target = ("127.0.0.1", rogue.port)
    provider = ApnsProvider.from_options(apple.settings)
    try:
        stats = await make_worker(world, provider).run_once()
        assert (stats.retried, stats.sent) == (1, 0)
        assert apple.proxy.tunnels == ["api.push.apple.com:443"]  # it was reached
        assert rogue.received == [] and rogue.connections == 0  # no request went over TLS
        [job] = await jobs.pending(world.pool)
        assert "CERTIFICATE_VERIFY_FAILED" in job["last_error"], job["last_error"]
        assert job["attempts"] == 1

        apple.proxy.target = ("127.0.0.1", apple.fake.port)
        await world.pool.execute("UPDATE push_jobs SET next_attempt_at = now()")
        assert (await make_worker(world, provider).run_once()).sent == 1
        [got] = apple.fake.received
        assert got.headers["apns-id"] == jobs.push_id(job["id"])
        assert await jobs.pending(world.pool) == []
    finally:
        await provider.close()
        await rogue.stop()
