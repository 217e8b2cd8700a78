"""The unit of work (app/actions/work.py): a change and everything it causes (notifications,
push jobs, realtime events) commit together or not at all.

Two faults, for a message with an @mention, an announcement, a comment reply and a remark:
- before the commit (the event append fails inside PostgreSQL, or a step of the unit of work
  raises): nothing at all is left;
- right after the commit (the process is SIGKILLed by the hub's publish, the first thing after
  commit): the change is there WITH its notifications, push jobs and stored events.
Never a message without its notifications, nor notifications without their message.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from app.actions.messages import NewMessage, insert_message
from app.actions.work import work
from app.context import Viewer
from realtime.events import Event, NewEvent
from tests.app.actions.crash_after_commit import perform
from tests.servers import REPO_ROOT
from tests.support import Member, World

CASES = ("message", "announcement", "comment", "remark")
TABLES = ("messages", "comments", "conversation_activities", "notifications", "push_jobs",
          "realtime_events")


class RecordingHub:
    def __init__(self) -> None:
        self.published: list[Event] = []

    async def publish(self, events: Sequence[Event]) -> None:
        self.published.extend(events)


@dataclass
class Scene:
    """A community where each case notifies someone who has a phone to push to."""

    admin: Member
    ann: Member
    bob: Member
    message_id: int  # Ann's, for Bob to comment on
    conversation_id: int  # Ann and Bob's

    def args(self, case: str) -> dict[str, Any]:
        base = self.admin.community.base_url
        cid = self.admin.community.id
        if case == "message":  # Ann @mentions Bob: at_mentions
            return {"user_id": self.ann.id, "community_id": cid, "role": "member",
                    "base": base, "body": f"@{self.bob.username} lunch?"}
        if case == "announcement":  # everyone: broadcast
            return {"user_id": self.admin.id, "community_id": cid, "role": "tenant_admin",
                    "base": base, "body": "Office closed Friday",
                    "message_type": "broadcast_message"}
        if case == "comment":  # Bob replies on Ann's message: replies for Ann
            return {"user_id": self.bob.id, "community_id": cid, "role": "member",
                    "base": base, "message_id": self.message_id, "text": "me too"}
        assert case == "remark"  # Bob remarks: a push job for Ann's conversations device
        return {"user_id": self.bob.id, "community_id": cid, "role": "member", "base": base,
                "conversation_id": self.conversation_id, "text": "on my way"}


async def register(member: Member, token: str, notification_type: str) -> None:
    resp = await member.api.put("/api/client_devices", json={
        "registration_id": token, "notification_type": notification_type})
    assert resp.status == 204, resp.text


async def scene(world: World) -> Scene:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    bob = await world.user(admin, "Bob")
    for member in (ann, bob):
        await register(member, f"{member.username}-phone", "main")
        await register(member, f"{member.username}-chat", "conversations")
    resp = await ann.api.post("/api/messages", json={"message": {"body": "Who is hungry?"}})
    assert resp.status == 201, resp.text
    message_id = resp.json["message"]["id"] if "message" in resp.json else resp.json["id"]
    resp = await ann.api.post("/api/conversations", json={
        "conversation": {"members_emails": bob.email}})
    assert resp.status == 201, resp.text
    conversation_id = resp.json["conversation"]["id"]
    return Scene(admin, ann, bob, message_id, conversation_id)


async def counts(pool: asyncpg.Pool) -> dict[str, int]:
    return {t: await pool.fetchval(f"SELECT count(*) FROM {t}") for t in TABLES}


@asynccontextmanager
async def failing_event_append(pool: asyncpg.Pool) -> AsyncIterator[None]:
    """A fault inside PostgreSQL at the last statement before commit: appending the events.
    (The test database outlives the test: the trigger is dropped whatever happens.)"""
    await pool.execute("""
        CREATE FUNCTION test_fail_event_append() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$;
        CREATE TRIGGER test_fail_event_append BEFORE INSERT ON realtime_events
        FOR EACH STATEMENT EXECUTE FUNCTION test_fail_event_append();
    """)
    try:
        yield
    finally:
        await pool.execute("""
            DROP TRIGGER test_fail_event_append ON realtime_events;
            DROP FUNCTION test_fail_event_append();
        """)


@pytest.mark.parametrize("case", CASES)
async def test_a_fault_before_commit_leaves_nothing(world: World, case: str) -> None:
    s = await scene(world)
    before = await counts(world.pool)
    hub = RecordingHub()
    async with failing_event_append(world.pool):
        with pytest.raises(asyncpg.RaiseError, match="injected fault"):
            await perform(world.pool, hub, case, s.args(case))
    assert await counts(world.pool) == before
    assert hub.published == []


class Fault(Exception):
    pass


async def test_a_failing_step_inside_the_unit_of_work_leaves_nothing(world: World) -> None:
    s = await scene(world)
    before = await counts(world.pool)
    hub = RecordingHub()
    ran: list[str] = []

    async def step() -> None:
        ran.append("step")

    viewer = Viewer(id=s.ann.id, community_id=s.ann.community.id, role="member")
    with pytest.raises(Fault):
        async with work(world.pool, hub, viewer.community_id) as w:
            await insert_message(w, viewer, s.admin.community.base_url,
                                 NewMessage(body=f"@{s.bob.username} lunch?"))
            w.after(step)
            assert w.events  # the notification was made, in this transaction
            raise Fault
    assert await counts(world.pool) == before
    assert hub.published == [] and ran == []


async def crash_after_commit(database_url: str, case: str, args: dict[str, Any]) -> int:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.app.actions.crash_after_commit", database_url, case,
        json.dumps(args), cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == -signal.SIGKILL, err.decode()
    return proc.returncode


async def assert_notified(
    world: World, column: str, subject_id: int, expected: list[tuple[Member, str]]
) -> None:
    """The notifications about the subject (notifications.<column>) are `expected` (who, filter,
    by user id), each with its push job to the user's phone and its stored event."""
    notes = await world.pool.fetch(
        f"SELECT id, user_id, filter FROM notifications WHERE {column} = $1 ORDER BY user_id",
        subject_id)
    expected = sorted(expected, key=lambda e: e[0].id)
    assert [(n["user_id"], n["filter"]) for n in notes] == [(m.id, f) for m, f in expected]
    for note, (who, _) in zip(notes, expected, strict=True):
        assert await _pushed(world, note["id"]) == [(who.id, f"{who.username}-phone")]
        assert await _events(world, f"user:{who.id}") == [("notification.created", note["id"])]


@pytest.mark.parametrize("case", ["message", "announcement", "comment"])
async def test_killed_after_commit_it_keeps_its_notifications(
    world: World, database_url: str, case: str
) -> None:
    s = await scene(world)
    await crash_after_commit(database_url, case, s.args(case))
    if case == "comment":
        column, expected = "comment_id", [(s.ann, "replies")]
        made = await world.pool.fetchval(
            "SELECT id FROM comments WHERE message_id = $1 AND text = 'me too'", s.message_id)
    else:
        column = "message_id"
        expected = [(s.bob, "at_mentions")] if case == "message" else [
            (s.ann, "broadcast"), (s.bob, "broadcast")]
        made = await world.pool.fetchval(  # the one after the scene's
            "SELECT id FROM messages WHERE id > $1", s.message_id)
    assert made is not None
    await assert_notified(world, column, made, expected)


async def test_a_remark_killed_after_commit_keeps_its_push_job_and_event(
    world: World, database_url: str
) -> None:
    s = await scene(world)
    await crash_after_commit(database_url, "remark", s.args("remark"))
    activity_id = await world.pool.fetchval(
        "SELECT id FROM conversation_activities WHERE conversation_id = $1 AND text = $2",
        s.conversation_id, "on my way")
    assert activity_id is not None
    jobs = await world.pool.fetch(
        "SELECT j.user_id, d.registration_id FROM push_jobs j "
        "JOIN client_devices d ON d.id = j.device_id "
        "WHERE j.kind = 'remark' AND (j.payload->'check'->>'activity_id')::bigint = $1",
        activity_id)
    assert [(j["user_id"], j["registration_id"]) for j in jobs] == [
        (s.ann.id, f"{s.ann.username}-chat")]
    assert await _events(world, f"conversation:{s.conversation_id}") == [
        ("remark.created", activity_id)]


async def _pushed(world: World, notification_id: int) -> list[tuple[int, str]]:
    rows = await world.pool.fetch(
        "SELECT j.user_id, d.registration_id FROM push_jobs j "
        "JOIN client_devices d ON d.id = j.device_id WHERE j.kind = 'notification' "
        "AND (j.payload->'check'->>'notification_id')::bigint = $1 ORDER BY j.id",
        notification_id)
    return [(r["user_id"], r["registration_id"]) for r in rows]


async def _events(world: World, channel: str) -> list[tuple[str, int]]:
    """(name, id of the thing in its data) of the stored events on `channel`, skipping the
    scene's own (the conversation's creation)."""
    rows = await world.pool.fetch(
        "SELECT name, data::text AS data FROM realtime_events WHERE channel = $1 "
        "AND name IN ('notification.created', 'remark.created') ORDER BY id", channel)
    return [(r["name"], int(json.loads(r["data"])["id"])) for r in rows]


# --- the helper itself ----------------------------------------------------------------------


async def test_events_are_appended_last_and_published_after_commit_then_steps_run(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    admin = await world.community()
    cid = admin.community.id
    seen: list[str] = []

    class Hub(RecordingHub):
        async def publish(self, events: Sequence[Event]) -> None:
            # committed by now: another connection sees the events
            stored = await world.pool.fetchval(
                "SELECT count(*) FROM realtime_events WHERE community_id = $1", cid)
            seen.append(f"publish {len(events)} (stored {stored})")
            await super().publish(events)

    async def failing() -> None:
        seen.append("failing step")
        raise Fault

    async def last() -> None:
        seen.append("last step")

    hub = Hub()
    async with work(world.pool, hub, cid) as w:
        w.emit(NewEvent("user:1", "one", {}), NewEvent("user:2", "two", {}))
        w.after(failing)
        w.after(last)
        w.emit(NewEvent("user:1", "three", {}))
        assert await w.conn.fetchval(
            "SELECT count(*) FROM realtime_events WHERE community_id = $1", cid) == 0
    assert [e.name for e in hub.published] == ["one", "two", "three"]
    assert [e.id for e in hub.published] == [e.id for e in w.published]
    ids = [e.id for e in w.published]
    assert ids == list(range(ids[0], ids[0] + 3))
    assert seen == ["publish 3 (stored 3)", "failing step", "last step"]
    assert "after-commit step" in caplog.text  # logged, and the next step still ran
    with pytest.raises(RuntimeError):
        w.emit(NewEvent("user:1", "late", {}))


async def test_without_a_hub_events_are_only_stored(world: World) -> None:
    admin = await world.community()
    async with work(world.pool, None, admin.community.id) as w:
        w.emit(NewEvent("user:1", "stored", {"a": 1}))
    row = await world.pool.fetchrow(
        "SELECT id, name FROM realtime_events WHERE community_id = $1", admin.community.id)
    assert row is not None and (row["id"], row["name"]) == (w.published[0].id, "stored")


async def test_roll_back_stores_publishes_and_runs_nothing(world: World) -> None:
    admin = await world.community()
    hub = RecordingHub()
    ran: list[str] = []

    async def step() -> None:
        ran.append("step")

    async with work(world.pool, hub, admin.community.id) as w:
        await w.conn.execute("UPDATE communities SET name = 'Dry' WHERE id = $1",
                             admin.community.id)
        w.emit(NewEvent("user:1", "dry", {}))
        w.after(step)
        w.roll_back()
    assert await world.pool.fetchval(
        "SELECT name FROM communities WHERE id = $1", admin.community.id) != "Dry"
    assert await world.pool.fetchval(
        "SELECT count(*) FROM realtime_events WHERE community_id = $1", admin.community.id) == 0
    assert hub.published == [] and ran == []


FORBIDDEN_IN_ACTIONS = ("transaction", "acquire", "append_events", "stage_events",
                        "run_staging_versions", "publish")


def test_every_write_action_goes_through_the_unit_of_work() -> None:
    """No action opens a transaction of its own, appends events, stages versions or publishes:
    `work()` (or `write_one()` for a write of one statement) is the one way in. (Creating a
    community opens a plain transaction: there is no community for a unit of work to belong to
    yet, and it emits nothing. The readiness probe holds one connection for its two reads: it
    writes nothing.)"""
    allowed = {"work.py"}
    offenders: list[str] = []
    for path in sorted((Path(REPO_ROOT) / "app" / "actions").glob("*.py")):
        if path.name in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else \
                    getattr(node.func, "id", "")
                exempt = (path.name, name) in {("communities.py", "transaction"),
                                               ("health.py", "acquire")}
                if name in FORBIDDEN_IN_ACTIONS and not exempt:
                    offenders.append(f"{path.name}:{node.lineno} {name}()")
    assert offenders == []

