"""The push worker delivering through a real HTTP server on 127.0.0.1 that speaks the FCM v1 API
and Google's OAuth token endpoint (tests/push/fake_fcm.py): sending, token rejection pruning
the device, retries with backoff, giving up, re-checks before sending, bounded concurrency,
SKIP LOCKED between workers, wake-up on commit, and `commons worker` itself."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from app.config import FcmSettings, Settings
from app.worker import run_worker
from push import jobs
from push.fcm import FcmProvider
from push.jobs import PushMessage
from push.log import LogProvider
from push.provider import SendResult
from push.worker import PushWorker, Stats, WorkerSettings
from tests.app.views.conversations_support import say, start
from tests.push.fake_apns import make_certificates, server_context
from tests.push.fake_fcm import Answer, FakeFcm
from tests.support import Member, World

Fixture = Callable[..., Any]


def fcm_settings(fake: FakeFcm, directory: Path) -> FcmSettings:
    return FcmSettings(project_id=None, credentials_file=str(fake.credentials(directory)),
                       api_url=fake.base_url)


@pytest.fixture
async def provider(fcm: FakeFcm, tmp_path: Path) -> AsyncIterator[FcmProvider]:
    fcm_provider = FcmProvider.from_options(fcm_settings(fcm, tmp_path))
    yield fcm_provider
    await fcm_provider.close()


def make_worker(world: World, provider: FcmProvider, **settings: Any) -> PushWorker:
    return PushWorker(
        world.pool, {"fcm": provider, "apns": LogProvider("apns")},
        WorkerSettings(**{"backoff_min": 60.0, **settings}),
        rng=lambda: 1.0,  # no jitter: the delays are exactly base * 2^(n-1)
    )


async def register(member: Member, token: str, notification_type: str = "main",
                   **switches: Any) -> None:
    resp = await member.api.put("/api/client_devices", json={
        "registration_id": token, "notification_type": notification_type,
        "client_device": {"platform": "fcm", **switches},
    })
    assert resp.status == 204, resp.text


async def mention(author: Member, *people: Member, text: str = "look") -> int:
    names = " ".join(f"@{p.username}" for p in people)
    resp = await author.api.post("/api/messages", json={"message": {"body": f"{text} {names}"}})
    assert resp.status == 201, resp.text
    message_id: int = resp.json["message"]["id"]
    return message_id


async def pending(world: World) -> list[dict[str, Any]]:
    rows = await world.pool.fetch(
        "SELECT id, attempts, next_attempt_at, last_error, now() AS now FROM push_jobs ORDER BY id"
    )
    return [dict(r) for r in rows]


async def devices_of(member: Member) -> list[str]:
    resp = await member.api.get("/api/client_devices")
    return [d["registration_id"] for d in resp.json["client_devices"]]


async def people(world: World) -> tuple[Member, Member, Member]:
    admin = await world.community()
    ann = await world.user(admin, "Ann", "Lee")
    bob = await world.user(admin, "Bob", "Ray")
    return admin, ann, bob


async def test_delivers_a_notification_through_fcm(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    _, ann, bob = await people(world)
    await register(bob, "bob:phone-1")
    message_id = await mention(ann, bob, text="Standup moved")
    push_id = jobs.push_id((await pending(world))[0]["id"])
    stats = await make_worker(world, provider).run_once()
    assert (stats.sent, stats.handled) == (1, 1), (stats, await pending(world))
    note = (await bob.api.get("/api/notifications")).json["notifications"][0]
    [sent] = fcm.received
    assert sent["access_token"] == "access-1"
    assert sent["message"] == {
        "token": "bob:phone-1",
        "notification": {"title": "Ann Lee mentioned you",
                         "body": f"Standup moved @{bob.username}"},
        "data": {"type": "notification", "notification_id": str(note["id"]),
                 "filter": "at_mentions", "url": note["notifiable_url"], "badge": "1"},
        "android": {"notification": {"tag": push_id, "notification_count": 1}},
        "apns": {"headers": {"apns-collapse-id": push_id},
                 "payload": {"aps": {"thread-id": f"Message:{message_id}", "badge": 1}}},
    }
    assert await pending(world) == []
    # the access token is kept for the next sends
    await mention(ann, bob)
    assert (await make_worker(world, provider).run_once()).sent == 1
    assert fcm.issued == ["access-1"] and len(fcm.received) == 2


@pytest.mark.parametrize("code", ["UNREGISTERED", "INVALID_ARGUMENT", "SENDER_ID_MISMATCH"])
async def test_a_rejected_token_forgets_the_device(
    world: World, fcm: FakeFcm, provider: FcmProvider, code: str
) -> None:
    _, ann, bob = await people(world)
    await register(bob, "bob:dead")
    await register(bob, "bob:alive")
    fcm.script["bob:dead"] = [Answer(404 if code == "UNREGISTERED" else 400, code)]
    await mention(ann, bob)
    stats = await make_worker(world, provider).run_once()
    assert (stats.rejected, stats.sent) == (1, 1)
    assert await devices_of(bob) == ["bob:alive"]
    assert await pending(world) == []
    # the next notification goes to the remaining device only
    await mention(ann, bob)
    assert (await make_worker(world, provider).run_once()).sent == 1
    assert sorted(fcm.attempts[:2]) == ["bob:alive", "bob:dead"]
    assert fcm.attempts[2:] == ["bob:alive"]


async def test_a_server_error_is_retried_with_exponential_backoff(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    _, ann, bob = await people(world)
    await register(bob, "bob:flaky")
    fcm.script["bob:flaky"] = [Answer(503, "UNAVAILABLE"), Answer(500, "INTERNAL")]
    await mention(ann, bob)
    worker = make_worker(world, provider)
    first = await worker.run_once()
    assert (first.retried, first.sent) == (1, 0)
    [job] = await pending(world)
    assert job["attempts"] == 1 and job["last_error"] == "503 UNAVAILABLE"
    wait = (job["next_attempt_at"] - job["now"]).total_seconds()
    assert 59 <= wait <= 61  # base 60 * 2^0
    assert (await worker.run_once()).handled == 0  # not due yet: nothing is sent
    await world.pool.execute("UPDATE push_jobs SET next_attempt_at = now()")
    second = await worker.run_once()
    assert second.retried == 1
    [job] = await pending(world)
    assert job["attempts"] == 2 and job["last_error"] == "500 INTERNAL"
    assert 119 <= (job["next_attempt_at"] - job["now"]).total_seconds() <= 121  # doubled
    await world.pool.execute("UPDATE push_jobs SET next_attempt_at = now()")
    third = await worker.run_once()
    assert third.sent == 1
    assert fcm.attempts == ["bob:flaky"] * 3 and len(fcm.received) == 1
    assert await pending(world) == [] and await devices_of(bob) == ["bob:flaky"]


async def test_retry_after_is_honoured(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    _, ann, bob = await people(world)
    await register(bob, "bob:busy")
    fcm.script["bob:busy"] = [Answer(429, "QUOTA_EXCEEDED", {"Retry-After": "600"})]
    await mention(ann, bob)
    assert (await make_worker(world, provider, backoff_min=1.0).run_once()).retried == 1
    [job] = await pending(world)
    assert 599 <= (job["next_attempt_at"] - job["now"]).total_seconds() <= 601


async def test_gives_up_when_the_next_try_would_be_too_late(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    _, ann, bob = await people(world)
    await register(bob, "bob:down")
    fcm.script["bob:down"] = [Answer(503, "UNAVAILABLE")] * 5
    await mention(ann, bob)
    # a day to deliver; 60 s then 120 s of backoff
    worker = make_worker(world, provider, give_up=86400.0)
    assert (await worker.run_once()).retried == 1
    # the push is now 23 h 59 min old: one more try in 2 min would be past the day
    await world.pool.execute("UPDATE push_jobs SET next_attempt_at = now(), "
                             "created_at = now() - interval '23 hours 59 minutes'")
    final = await worker.run_once()
    assert (final.gave_up, final.retried) == (1, 0)
    assert await pending(world) == []
    assert await devices_of(bob) == ["bob:down"]  # the device is fine; this push is lost


async def test_an_old_push_is_not_sent(world: World, fcm: FakeFcm, provider: FcmProvider) -> None:
    _, ann, bob = await people(world)
    await register(bob, "bob:phone")
    await mention(ann, bob)
    await world.pool.execute("UPDATE push_jobs SET created_at = now() - interval '2 days'")
    stats = await make_worker(world, provider).run_once()
    assert stats.gave_up == 1 and fcm.attempts == [] and await pending(world) == []


async def test_an_expired_access_token_is_replaced(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    _, ann, bob = await people(world)
    await register(bob, "bob:phone")
    await mention(ann, bob)
    worker = make_worker(world, provider)
    assert (await worker.run_once()).sent == 1
    fcm.revoked.add("access-1")
    await mention(ann, bob)
    assert (await worker.run_once()).retried == 1  # 401: retried, with a new token
    await world.pool.execute("UPDATE push_jobs SET next_attempt_at = now()")
    assert (await worker.run_once()).sent == 1
    assert fcm.issued == ["access-1", "access-2"]
    assert [r["access_token"] for r in fcm.received] == ["access-1", "access-2"]


async def test_nothing_is_sent_for_what_was_read_meanwhile(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    _, ann, bob = await people(world)
    cy = await world.user(ann, "Cy")
    await register(bob, "bob:phone")
    await register(bob, "bob:chat", "conversations")
    await register(cy, "cy:phone")
    await mention(ann, bob, cy)
    note = (await bob.api.get("/api/notifications")).json["notifications"][0]
    assert (await bob.api.post(f"/api/notifications/{note['id']}/read")).status == 204
    # cy turns mentions off after the job was made
    await register(cy, "cy:phone", push_mentions=False)
    conversation = await start(ann, bob, text=None)
    await say(ann, conversation["id"], "read me later")
    assert (await bob.api.post(f"/api/conversations/{conversation['id']}/acknowledge")
            ).status == 200
    stats = await make_worker(world, provider).run_once()
    assert (stats.skipped, stats.sent) == (3, 2)
    # only bob's silent badge updates for his reads went out (tests/push/test_badges.py)
    assert sorted(fcm.attempts) == ["bob:chat", "bob:phone"]
    assert {r["message"]["data"]["type"] for r in fcm.received} == {"badge"}
    fcm.received.clear()
    # an unread remark is pushed
    activity = await say(ann, conversation["id"], "and this one?")
    assert (await make_worker(world, provider).run_once()).sent == 1
    [sent] = fcm.received
    assert sent["message"]["token"] == "bob:chat"
    assert sent["message"]["notification"] == {"title": "Ann Lee", "body": "and this one?"}
    assert sent["message"]["data"] == {"type": "remark",
                                       "conversation_id": str(conversation["id"]),
                                       "activity_id": str(activity["id"]), "badge": "1"}


async def test_concurrency_is_bounded(world: World, fcm: FakeFcm, provider: FcmProvider) -> None:
    _, ann, bob = await people(world)
    for n in range(6):
        await register(bob, f"bob:device-{n}")
    await mention(ann, bob)
    fcm.delay = 0.2
    stats = await make_worker(world, provider, concurrency=2).run_once()
    assert stats.sent == 6
    assert fcm.max_in_flight == 2


class Watched:
    """The FCM provider, watched: before each send, how many earlier sends are still not
    recorded (their job still claimed in push_jobs). That is what a worker killed at that
    moment would leave to be sent twice."""

    name = "fcm"

    def __init__(self, inner: FcmProvider, world: World, job_of: dict[str, int]) -> None:
        self.inner, self.world, self.job_of = inner, world, job_of
        self.started: list[int] = []
        self.most_unrecorded = 0

    async def send(self, token: str, message: PushMessage) -> SendResult:
        unrecorded = await self.world.pool.fetchval(
            "SELECT count(*) FROM push_jobs WHERE id = ANY($1::bigint[])", self.started)
        self.most_unrecorded = max(self.most_unrecorded, unrecorded)
        self.started.append(self.job_of[token])
        return await self.inner.send(token, message)

    async def close(self) -> None:
        return None


async def test_a_send_keeps_its_slot_until_its_result_is_recorded(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    """So that a worker killed at any moment leaves at most `concurrency` pushes that may
    have reached the provider without being recorded (test_worker_killed.py kills one)."""
    admin, ann, _ = await people(world)
    crowd = await world.many_users(admin, 40)
    for member in crowd:
        await register(member, f"fcm:{member.username}")
    await mention(ann, *crowd)
    job_of = {r["registration_id"]: r["id"] for r in await world.pool.fetch(
        "SELECT j.id, d.registration_id FROM push_jobs j JOIN client_devices d "
        "ON d.id = j.device_id")}
    watched = Watched(provider, world, job_of)
    fcm.delay = 0.01
    worker = PushWorker(world.pool, {"fcm": watched, "apns": LogProvider("apns")},
                        WorkerSettings(concurrency=4, batch_size=40))
    assert (await worker.run_once()).sent == 40
    assert len(watched.started) == 40 and await pending(world) == []
    assert watched.most_unrecorded <= 3  # besides the send about to start: 4 at most


async def test_two_workers_never_send_the_same_job(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    admin, ann, _ = await people(world)
    crowd = await world.many_users(admin, 12)
    for member in crowd:
        await register(member, f"fcm:{member.username}")
    await mention(ann, *crowd)
    fcm.delay = 0.05
    one, two = (make_worker(world, provider, batch_size=3) for _ in range(2))
    results: tuple[Stats, Stats] = await asyncio.gather(one.run_once(), two.run_once())
    assert sum(r.sent for r in results) == 12
    assert sorted(fcm.attempts) == sorted(f"fcm:{m.username}" for m in crowd)  # each once
    assert await pending(world) == []


async def test_an_unreachable_provider_is_retried(
    world: World, fcm: FakeFcm, tmp_path: Path
) -> None:
    _, ann, bob = await people(world)
    await register(bob, "bob:phone")
    await mention(ann, bob)
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = replace(fcm_settings(fcm, tmp_path), api_url=f"http://127.0.0.1:{port}")
    unreachable = FcmProvider.from_options(settings)
    try:
        stats = await make_worker(world, unreachable).run_once()
    finally:
        await unreachable.close()
    assert stats.retried == 1
    [job] = await pending(world)
    assert job["last_error"].startswith("network:")


async def test_the_loop_wakes_up_when_a_job_commits(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    _, ann, bob = await people(world)
    await register(bob, "bob:phone")
    worker = make_worker(world, provider, idle_poll=60.0)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        await asyncio.sleep(0.3)  # listening, idle for a minute
        await mention(ann, bob)
        async with asyncio.timeout(5):
            await fcm.arrived.wait()
    finally:
        stop.set()
        async with asyncio.timeout(5):
            await task
    assert len(fcm.received) == 1


async def test_commons_worker_delivers_and_prunes(
    world: World, fcm: FakeFcm, settings: Settings, tmp_path: Path
) -> None:
    admin, ann, bob = await people(world)
    await register(bob, "bob:phone")
    await mention(ann, bob)
    cid = admin.community.id
    await world.pool.execute(
        "INSERT INTO realtime_event_counters (community_id, last_id) VALUES ($1, 1000) "
        "ON CONFLICT (community_id) DO UPDATE SET last_id = 1000", cid)
    await world.pool.execute(
        "INSERT INTO realtime_events (community_id, id, channel, name, data, created_at) "
        "VALUES ($1, 999, 'user:1', 'old', '{}', now() - interval '8 days'), "
        "       ($1, 1000, 'user:1', 'recent', '{}', now() - interval '6 days')", cid)
    form = aiohttp.FormData()
    form.add_field("attachment", b"forgotten file", filename="draft.txt",
                   content_type="text/plain")
    upload = await ann.api.post("/api/attachments", data=form)
    assert upload.status == 201, upload.text
    draft_id = upload.json["attachment"]["id"]
    await world.pool.execute(
        "UPDATE attachments SET created_at = now() - interval '30 days' WHERE id = $1", draft_id)
    await run_worker(replace(settings, fcm=fcm_settings(fcm, tmp_path)), once=True)
    assert [r["message"]["token"] for r in fcm.received] == ["bob:phone"]
    names = {r["name"] for r in await world.pool.fetch(
        "SELECT name FROM realtime_events WHERE community_id = $1", cid)}
    assert "old" not in names and "recent" in names
    assert await world.pool.fetchval(
        "SELECT count(*) FROM attachments WHERE id = $1", draft_id) == 0


async def test_without_credentials_pushes_are_only_logged(world: World, settings: Settings
                                                          ) -> None:
    _, ann, bob = await people(world)
    await register(bob, "bob:phone")
    await mention(ann, bob)
    assert settings.fcm is None and settings.apns is None
    await run_worker(settings, once=True)
    assert await pending(world) == []  # "sent" by the log provider



async def test_a_stopping_worker_finishes_its_batch_and_leaves_the_rest_queued(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    """SIGTERM sets `stop` (app/cli.py): the batch being sent is finished, the next one is not
    claimed, so it waits in the queue for the next worker instead of delaying the exit."""
    admin, ann, _ = await people(world)
    crowd = await world.many_users(admin, 6)
    for member in crowd:
        await register(member, f"fcm:{member.username}")
    await mention(ann, *crowd)
    stop = asyncio.Event()
    fcm.delay = 0.2
    worker = make_worker(world, provider, batch_size=2)
    task = asyncio.create_task(worker.run_once(stop))
    await asyncio.sleep(0.1)  # the first batch is in flight
    stop.set()
    stats = await task
    assert stats.sent == 2
    left = await pending(world)
    assert len(left) == 4 and all(job["attempts"] == 0 for job in left)


async def test_nothing_is_sent_to_a_member_who_left_meanwhile(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    admin, ann, bob = await people(world)
    await register(bob, "bob:chat", "conversations")
    await register(admin, "admin:chat", "conversations")
    group = await start(ann, bob, admin, text=None, name="Planning")
    await say(ann, group["id"], "who is in?")
    resp = await bob.api.delete(f"/api/conversations/{group['id']}/members/me")
    assert resp.status in (200, 204), resp.text
    stats = await make_worker(world, provider).run_once()
    assert (stats.skipped, stats.sent) == (1, 1)
    assert fcm.attempts == ["admin:chat"]


@pytest.mark.parametrize("untrusted", ["the FCM API", "the OAuth token endpoint"])
async def test_an_fcm_server_whose_certificate_does_not_check_out_is_refused(
    world: World, aiohttp_server: Fixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    untrusted: str,
) -> None:
    """FCM and its token endpoint over HTTPS: a server whose certificate comes from a CA the
    worker does not trust is refused, a temporary failure (retried later), nothing sent and
    nothing marked sent; the same stand-in with a certificate from the trusted CA gets the
    very same push."""
    ca, cert, key = make_certificates(tmp_path / "tls")
    _, rogue_cert, rogue_key = make_certificates(tmp_path / "rogue")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # the worker trusts the test CA, and only it
    fake = FakeFcm()
    trusted = await aiohttp_server(fake.app(), host="127.0.0.1", ssl=server_context(cert, key))
    rogue = await aiohttp_server(fake.app(), host="127.0.0.1",
                                 ssl=server_context(rogue_cert, rogue_key))
    good, bad = (str(s.make_url("")).rstrip("/") for s in (trusted, rogue))
    assert good.startswith("https://") and bad.startswith("https://")
    fake.base_url = bad if untrusted == "the OAuth token endpoint" else good  # token_uri
    credentials = fake.credentials(tmp_path)
    _, ann, bob = await people(world)
    await register(bob, "bob:phone")
    await mention(ann, bob)

    api = bad if untrusted == "the FCM API" else good
    refused = FcmProvider.from_options(FcmSettings(None, str(credentials), api))
    try:
        stats = await make_worker(world, refused).run_once()
    finally:
        await refused.close()
    assert (stats.retried, stats.sent) == (1, 0)
    assert fake.attempts == [] and fake.received == []  # no request got through
    [job] = await pending(world)
    assert "certificate verify failed" in job["last_error"].lower(), job["last_error"]
    # the token endpoint was reached over checked TLS when only the API was untrusted
    assert fake.issued == ([] if untrusted == "the OAuth token endpoint" else ["access-1"])

    fake.base_url = good
    genuine = FcmProvider.from_options(FcmSettings(None, str(fake.credentials(tmp_path)), good))
    await world.pool.execute("UPDATE push_jobs SET next_attempt_at = now()")
    try:
        assert (await make_worker(world, genuine).run_once()).sent == 1
    finally:
        await genuine.close()
    assert [r["message"]["token"] for r in fake.received] == ["bob:phone"]
    assert await pending(world) == []
