"""Group chat push (issues 12 and 14), through the FCM stand-in (tests/push/fake_fcm.py).

A chat message writes ONE push job, whatever the group's size (table push_chat_fanouts);
`commons worker` fans it out to the members' `main` devices whose settings allow it: the
member's group settings (push_notifications_enabled, push_notification_on_group_chat_message,
push_notification_on_chat_mention; table group_chat_reads, all on when the row is missing) and
the device's switches (push_enabled; push_mentions for an @mention, push_conversation_activity
for any other chat message). Never the author; not a member who already read past the message,
at fan-out time or at send time; a badge as every other alert.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.config import FcmSettings
from push import jobs
from push.fcm import FcmProvider
from push.log import LogProvider
from push.worker import PushWorker, Stats, WorkerSettings
from tests.app.views.test_chat_messages import chat_group, post
from tests.push.fake_fcm import FakeFcm
from tests.support import Member, World


@pytest.fixture
async def worker(world: World, fcm: FakeFcm, tmp_path: Path) -> AsyncIterator[PushWorker]:
    provider = FcmProvider.from_options(FcmSettings(
        None, str(fcm.credentials(tmp_path)), fcm.base_url))
    yield PushWorker(world.pool, {"fcm": provider, "apns": LogProvider("apns")},
                     WorkerSettings(backoff_min=60.0))
    await provider.close()


async def register(member: Member, token: str, notification_type: str = "main",
                   **switches: bool) -> None:
    resp = await member.api.put("/api/client_devices", json={
        "registration_id": token, "notification_type": notification_type,
        "client_device": {"platform": "fcm", **switches},
    })
    assert resp.status == 204, resp.text


async def group_setting(world: World, group_id: int, member: Member, **settings: bool) -> None:
    """The member's own chat push settings of the group (set here in the database: the API
    shows them in the Group JSON but has no way to change them)."""
    columns = ", ".join(settings)
    values = ", ".join(f"${n}" for n in range(4, 4 + len(settings)))
    updates = ", ".join(f"{c} = excluded.{c}" for c in settings)
    await world.pool.execute(
        f"INSERT INTO group_chat_reads (community_id, group_id, user_id, {columns}) "
        f"VALUES ($1, $2, $3, {values}) ON CONFLICT (group_id, user_id) DO UPDATE SET {updates}",
        member.community.id, group_id, member.id, *settings.values())


def by_token(fcm: FakeFcm) -> dict[str, dict[str, Any]]:
    """The chat pushes received, by device token (at most one each)."""
    got: dict[str, dict[str, Any]] = {}
    for r in fcm.received:
        if r["message"]["data"]["type"] != "chat_message":
            continue  # a notification (added to the group, mentioned in a message)
        token = r["message"]["token"]
        assert token not in got, f"{token} got two pushes"
        got[token] = r["message"]
    return got


async def crowd_in(world: World, admin: Member, group_id: int, count: int) -> list[Member]:
    """`count` new members of the group, each with an FCM device "fcm-<user id>" (set up in
    the database: many at once)."""
    crowd = await world.many_users(admin, count)
    ids = [m.id for m in crowd]
    await world.pool.execute(
        "INSERT INTO group_memberships (community_id, group_id, user_id) "
        "SELECT $1, $2, unnest($3::bigint[])", admin.community.id, group_id, ids)
    await world.pool.execute(
        "INSERT INTO client_devices (community_id, user_id, registration_id, platform) "
        "SELECT $1, u, 'fcm-' || u, 'fcm' FROM unnest($2::bigint[]) AS u",
        admin.community.id, ids)
    return crowd


async def counts(world: World) -> tuple[int, int]:
    """(chat messages waiting to be fanned out, push jobs)."""
    row = await world.pool.fetchrow(
        "SELECT (SELECT count(*) FROM push_chat_fanouts) AS f, "
        "(SELECT count(*) FROM push_jobs) AS j")
    assert row is not None
    return row["f"], row["j"]


async def test_a_chat_message_is_pushed_to_the_other_members(
    world: World, fcm: FakeFcm, worker: PushWorker
) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann", "Lee")
    bob = await world.user(admin, "Bob", "Ray")
    cy = await world.user(admin, "Cy", "Young")
    outsider = await world.user(admin, "Out", "Sider")
    gid = await chat_group(ann, bob, cy, name="Cats")
    for member in (ann, bob, cy, outsider):
        await register(member, f"{member.username}:phone")
    await register(cy, "cy:chat-app", "conversations")  # conversations devices: remarks only

    message = await post(ann, gid, "Lunch at noon?")
    assert await counts(world) == (1, 0)  # one job for the group, nothing per member yet
    stats = await worker.run_once()
    assert (stats.fanned_out, stats.sent) == (2, 2)
    assert await counts(world) == (0, 0)
    got = by_token(fcm)
    assert set(got) == {f"{bob.username}:phone", f"{cy.username}:phone"}  # never the author
    bob_push = got[f"{bob.username}:phone"]
    assert bob_push["notification"] == {"title": "Cats", "body": "Ann Lee: Lunch at noon?"}
    # the badge, as on every alert, is what REST reports: Bob has not read that he was added
    unread = (await bob.api.get("/api/notifications")).json["unread_notifications_count"]
    assert unread == 1
    assert bob_push["data"] == {"type": "chat_message", "group_id": str(gid),
                                "chat_message_id": str(message["id"]), "badge": "1"}
    assert bob_push["apns"]["payload"]["aps"]["thread-id"] == f"group_chat:{gid}"
    # each push carries its own job's identity, as every other push does
    sent = {jobs.push_id(i) for i, outcome in stats.outcomes if outcome == "sent"}
    assert {m["android"]["notification"]["tag"] for m in got.values()} == sent
    # and it follows: one more unread notification
    await ann.api.post("/api/messages", json={"message": {"body": f"see @{bob.username}"}})
    await worker.run_once()
    notes = (await bob.api.get("/api/notifications")).json
    assert notes["unread_notifications_count"] == 2
    fcm.received.clear()
    await post(cy, gid, "yes")
    await worker.run_once()
    pushed = by_token(fcm)
    assert pushed[f"{bob.username}:phone"]["data"]["badge"] == "2"
    assert set(pushed) == {f"{bob.username}:phone", f"{ann.username}:phone"}


async def test_mentions_and_settings_decide_who_gets_what(
    world: World, fcm: FakeFcm, worker: PushWorker
) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann", "Lee")
    crowd = {name: await world.user(admin, name, "X") for name in (
        "plain", "quiet", "mentions_only", "muted", "mentioned", "mention_off",
        "no_chat_switch", "no_mention_switch")}
    gid = await chat_group(ann, *crowd.values(), name="Dogs")
    for name, member in crowd.items():
        switches = {"push_conversation_activity": name != "no_chat_switch",
                    "push_mentions": name != "no_mention_switch"}
        await register(member, name, **switches)
    await group_setting(world, gid, crowd["quiet"], push_notification_on_group_chat_message=False)
    await group_setting(world, gid, crowd["mentions_only"],
                        push_notification_on_group_chat_message=False)
    await group_setting(world, gid, crowd["muted"], push_notifications_enabled=False)
    await group_setting(world, gid, crowd["mention_off"], push_notification_on_chat_mention=False)
    mentioned = ("mentions_only", "muted", "mentioned", "mention_off", "no_chat_switch",
                 "no_mention_switch")
    names = " ".join(f"@{crowd[n].username.upper()}" for n in mentioned)  # any case
    await post(ann, gid, f"standup {names}")
    await worker.run_once()
    titles = {token: m["notification"]["title"] for token, m in by_token(fcm).items()}
    assert titles == {
        "plain": "Dogs",  # not mentioned: every chat message
        # "quiet": chat messages off, not mentioned: nothing
        "mentions_only": "Ann Lee mentioned you in Dogs",
        # "muted": the group's push off: nothing, even mentioned
        "mentioned": "Ann Lee mentioned you in Dogs",
        "mention_off": "Dogs",  # mentions not singled out, but every chat message comes
        "no_chat_switch": "Ann Lee mentioned you in Dogs",  # a mention needs push_mentions
        "no_mention_switch": "Dogs",  # push_mentions off: an ordinary chat push
    }
    # without a mention, the device's push_conversation_activity decides
    fcm.received.clear()
    await post(ann, gid, "no one in particular")
    await worker.run_once()
    assert set(by_token(fcm)) == {"plain", "mentioned", "mention_off", "no_mention_switch"}


async def test_what_was_read_is_not_pushed(
    world: World, fcm: FakeFcm, worker: PushWorker
) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann", "Lee")
    bob, cy, dee = [await world.user(admin, n, "X") for n in ("Bob", "Cy", "Dee")]
    gid = await chat_group(ann, bob, cy, dee)
    for member in (bob, cy, dee):
        await register(member, member.username)
    await post(ann, gid, "one")
    # Bob reads before the worker fans out: no job is made for him
    assert (await bob.api.patch(f"/api/groups/{gid}/chat_messages")).status == 204
    assert await jobs.fan_out(world.pool, 1000) == (4, 2)  # 4 members looked at, 2 jobs
    # Cy reads after the fan-out, before the send; Dee leaves the group: skipped at send time
    assert (await cy.api.patch(f"/api/groups/{gid}/chat_messages")).status == 204
    left = await dee.api.post(f"/api/groups/{gid}/leave")
    assert left.status in (200, 204), left.text
    stats = await worker.run_once()
    assert (stats.sent, stats.skipped) == (0, 2)
    assert fcm.received == [] and await counts(world) == (0, 0)
    # a member who joins after a message was posted is not pushed about it
    await post(ann, gid, "two")
    eve = await world.user(admin, "Eve", "X")
    await register(eve, "eve")
    joined = await ann.api.post(f"/api/groups/{gid}/memberships",
                                json={"group_membership": {"user_id": eve.id}})
    assert joined.status in (200, 201)
    await worker.run_once()
    assert set(by_token(fcm)) == {bob.username, cy.username}


async def test_a_large_group_is_fanned_out_in_chunks_each_member_once(
    world: World, fcm: FakeFcm, worker: PushWorker
) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann", "Lee")
    gid = await chat_group(ann)
    crowd = await crowd_in(world, admin, gid, 25)
    await post(ann, gid, "all hands")
    # chunk after chunk, each in its own transaction with the cursor: a worker dying between
    # two chunks leaves the rest to the next one, and nobody is fanned out twice
    members = sorted([ann.id, *(m.id for m in crowd)])
    assert await jobs.fan_out(world.pool, 10) == (10, 9)  # Ann, the author, among them
    cursor = await world.pool.fetchval("SELECT after_user_id FROM push_chat_fanouts")
    assert cursor == members[9]
    assert await jobs.fan_out(world.pool, 10) == (10, 10)
    assert await world.pool.fetchval("SELECT after_user_id FROM push_chat_fanouts") == members[19]
    chunked = PushWorker(world.pool, worker._providers, WorkerSettings(fanout_chunk=10))
    stats = await chunked.run_once()
    assert (stats.fanned_out, stats.sent) == (6, 25)  # the last 6 members; all 25 sent
    assert sorted(by_token(fcm)) == sorted(f"fcm-{m.id}" for m in crowd)
    assert await counts(world) == (0, 0)
    assert await jobs.fan_out(world.pool, 10) is None


async def test_posting_costs_the_same_in_any_group_size(
    world: World, worker: PushWorker, query_log: Any
) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann", "Lee")
    small = await chat_group(ann, name="Small")
    large = await chat_group(ann, name="Large")
    await crowd_in(world, admin, large, 300)
    queries = []
    for gid in (small, large):
        query_log.reset()
        await post(ann, gid, "hello")
        queries.append(len(query_log))
    assert queries[0] == queries[1], queries
    assert await counts(world) == (2, 0)  # one row per message, none per member
    stats: Stats = await worker.run_once()
    assert (stats.fanned_out, stats.sent) == (300, 300)
