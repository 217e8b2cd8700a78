"""Badges: every push carries the recipient's unread count as REST reports it at that moment,
and reading on one device sends a silent badge update to the user's devices, coalesced to at
most one per device per PUSH_BADGE_INTERVAL_SECONDS (through the FCM stand-in; the APNs form
is in test_apns.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from push.fcm import FcmProvider
from push.log import LogProvider
from push.worker import PushWorker, WorkerSettings
from tests.app.views.conversations_support import say, start
from tests.push.fake_fcm import FakeFcm
from tests.push.test_worker import mention, people, register
from tests.support import Member, World


@pytest.fixture
async def provider(fcm: FakeFcm, tmp_path: Path) -> AsyncIterator[FcmProvider]:
    from tests.push.test_worker import fcm_settings

    fcm_provider = FcmProvider.from_options(fcm_settings(fcm, tmp_path))
    yield fcm_provider
    await fcm_provider.close()


def worker(world: World, provider: FcmProvider, interval: float = 5.0) -> PushWorker:
    return PushWorker(world.pool, {"fcm": provider, "apns": LogProvider("apns")},
                      WorkerSettings(badge_interval=interval))


async def rest_badge(member: Member) -> int:
    """What REST reports: unread notifications plus the unread remarks of every conversation
    (listed and hidden)."""
    notes = (await member.api.get("/api/notifications")).json["unread_notifications_count"]
    remarks = 0
    for hidden in ("false", "true"):
        resp = await member.api.get(f"/api/conversations?hidden={hidden}&per_page=100")
        remarks += sum(c["unread_count"] for c in resp.json["conversations"])
    return int(notes) + remarks


def badges(fcm: FakeFcm) -> list[tuple[str, str, str]]:
    """(device, kind, badge) of what FCM received, in order."""
    return [(r["message"]["token"], r["message"]["data"]["type"], r["message"]["data"]["badge"])
            for r in fcm.received]


async def due_badge_jobs(world: World) -> int:
    return int(await world.pool.fetchval(
        "SELECT count(*) FROM push_jobs WHERE kind = 'badge' AND next_attempt_at <= now()"))


async def test_the_pushed_badge_is_what_rest_reports(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    admin, ann, bob = await people(world)
    await register(bob, "bob:phone")
    await register(bob, "bob:chat", "conversations")
    await mention(ann, bob)
    await mention(admin, bob)
    one = await start(ann, bob, text="first")
    await say(ann, one["id"], "second")
    two = await start(admin, bob, ann, text="in the group")
    await say(bob, two["id"], "answering reads what came before")
    assert await rest_badge(bob) == 4
    await worker(world, provider).run_once()
    # every push carries the count as of when it is sent, all unread things included
    assert {b for _, _, b in badges(fcm)} == {"4"}
    assert sorted((d, k) for d, k, _ in badges(fcm)) == [
        ("bob:chat", "remark"), ("bob:chat", "remark"),
        ("bob:phone", "notification"), ("bob:phone", "notification")]
    for record in fcm.received:
        assert record["message"]["android"]["notification"]["notification_count"] == 4


async def test_reading_sends_a_silent_badge_update_that_agrees_with_rest(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    _, ann, bob = await people(world)
    await register(bob, "bob:phone")
    await register(bob, "bob:chat", "conversations")
    await mention(ann, bob)
    await mention(ann, bob)
    talk = await start(ann, bob, text="hello")
    await worker(world, provider).run_once()
    fcm.received.clear()
    assert await rest_badge(bob) == 3

    note = (await bob.api.get("/api/notifications")).json["notifications"][0]
    assert (await bob.api.post(f"/api/notifications/{note['id']}/read")).status == 204
    await worker(world, provider).run_once()
    assert sorted(badges(fcm)) == [("bob:chat", "badge", "2"), ("bob:phone", "badge", "2")]
    assert await rest_badge(bob) == 2
    for record in fcm.received:  # data-only: nothing is shown
        assert set(record["message"]) == {"token", "data", "android"}
    fcm.received.clear()

    # the conversation read a few seconds later: one more update, once the interval is over
    assert (await bob.api.post(f"/api/conversations/{talk['id']}/acknowledge")).status == 200
    await worker(world, provider).run_once()
    assert fcm.received == []  # within PUSH_BADGE_INTERVAL_SECONDS of the last one
    await world.pool.execute("UPDATE push_jobs SET next_attempt_at = now()")  # 5 s later
    await worker(world, provider).run_once()
    assert sorted(badges(fcm)) == [("bob:chat", "badge", "1"), ("bob:phone", "badge", "1")]
    assert await rest_badge(bob) == 1
    fcm.received.clear()

    assert (await bob.api.put("/api/notifications/mark_all_read")).status == 204
    await world.pool.execute("UPDATE push_jobs SET next_attempt_at = now()")
    await worker(world, provider).run_once()
    assert sorted(badges(fcm)) == [("bob:chat", "badge", "0"), ("bob:phone", "badge", "0")]
    assert await rest_badge(bob) == 0
    # nothing more to say: the kept jobs go away when their interval ends
    fcm.received.clear()
    await world.pool.execute("UPDATE push_jobs SET next_attempt_at = now()")
    stats = await worker(world, provider).run_once()
    assert (stats.sent, stats.skipped) == (0, 2) and fcm.received == []
    assert await world.pool.fetchval("SELECT count(*) FROM push_jobs") == 0


async def test_a_burst_of_reads_sends_at_most_one_update_per_device(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    admin, ann, bob = await people(world)
    await register(bob, "bob:phone")
    await register(bob, "bob:tablet")
    for _ in range(4):
        await mention(ann, bob)
    talks = [await start(ann, bob, text="hi"), await start(admin, bob, text="yo")]
    await worker(world, provider).run_once()
    fcm.received.clear()
    notes = (await bob.api.get("/api/notifications")).json["notifications"]
    reads: list[Any] = [bob.api.post(f"/api/notifications/{n['id']}/read") for n in notes[:3]]
    reads += [bob.api.post(f"/api/conversations/{t['id']}/acknowledge") for t in talks]
    for read in reads:
        assert (await read).status in (200, 204)
    assert await world.pool.fetchval("SELECT count(*) FROM push_jobs") == 2  # one per device
    await worker(world, provider).run_once()
    assert sorted(badges(fcm)) == [("bob:phone", "badge", "1"), ("bob:tablet", "badge", "1")]
    # a read meanwhile waits for the interval, then goes out with the count of that moment
    assert (await bob.api.post(f"/api/notifications/{notes[3]['id']}/read")).status == 204
    assert await due_badge_jobs(world) == 0
    await worker(world, provider).run_once()
    assert len(fcm.received) == 2


async def test_a_read_that_changes_nothing_sends_nothing(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    _, ann, bob = await people(world)
    await register(bob, "bob:phone")
    talk = await start(ann, bob, text="hi")
    assert (await bob.api.post(f"/api/conversations/{talk['id']}/acknowledge")).status == 200
    await world.pool.execute("DELETE FROM push_jobs")
    assert (await bob.api.post(f"/api/conversations/{talk['id']}/acknowledge")).status == 200
    assert (await bob.api.put("/api/notifications/mark_all_read")).status == 204
    assert (await bob.api.post("/api/conversations/acknowledge_all")).status in (200, 204)
    assert await world.pool.fetchval("SELECT count(*) FROM push_jobs") == 0


async def test_no_badge_update_for_a_device_with_push_off(
    world: World, fcm: FakeFcm, provider: FcmProvider
) -> None:
    _, ann, bob = await people(world)
    await register(bob, "bob:phone", push_enabled=False)
    await mention(ann, bob)
    note = (await bob.api.get("/api/notifications")).json["notifications"][0]
    assert (await bob.api.post(f"/api/notifications/{note['id']}/read")).status == 204
    assert await world.pool.fetchval("SELECT count(*) FROM push_jobs") == 0
