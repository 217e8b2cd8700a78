"""Content versions (docs/polling.md): what a unit of work bumps, when, without blocking another
writer of the community; and the two ways of reading them agree."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from app.actions.work import work, write_one
from storage import users, versions
from storage.events import Statement, staging_versions
from tests.support import World


async def read(world: World, community_id: int, user_id: int) -> tuple[int, int]:
    content, own, _ = await versions.read(world.pool, community_id, user_id, False)
    return content, own


async def test_a_unit_of_work_bumps_the_community_at_its_commit(world: World) -> None:
    admin = await world.community()
    cid = admin.community.id
    before = await read(world, cid, admin.id)
    async with work(world.pool, None, cid) as w:
        await w.conn.execute("SELECT 1")
        # staged, not bumped: the change is not visible yet, nor is the new version
        assert await read(world, cid, admin.id) == before
    assert await read(world, cid, admin.id) == (before[0] + 1, before[1])


async def test_private_to_bumps_only_those_users(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    cid = admin.community.id
    admin_before, bob_before = await read(world, cid, admin.id), await read(world, cid, bob.id)
    async with work(world.pool, None, cid) as w:
        w.private_to(bob.id)
    assert await read(world, cid, bob.id) == (bob_before[0], bob_before[1] + 1)
    assert await read(world, cid, admin.id) == admin_before
    async with work(world.pool, None, cid) as w:
        w.private_to()  # nothing any polled list shows
    assert await read(world, cid, bob.id) == (bob_before[0], bob_before[1] + 1)
    async with work(world.pool, None, cid) as w:
        w.private_to(bob.id)
        w.public()  # a change every viewer sees, after all
    assert await read(world, cid, bob.id) == (bob_before[0] + 1, bob_before[1] + 2)


async def test_a_unit_of_one_statement_bumps_what_a_unit_of_work_would(world: World) -> None:
    """`write_one`: one statement in autocommit, its versions staged by itself and bumped at
    its implicit commit, the same rows as `work()` with the same `private_to`."""
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    cid = admin.community.id
    admin_before, bob_before = await read(world, cid, admin.id), await read(world, cid, bob.id)
    # a statement with CTEs of its own: the staged row is one more of them
    set_title = Statement(
        "WITH u AS (UPDATE users SET title = $2 WHERE id = $1 RETURNING id) SELECT count(*) "
        "FROM u", (bob.id, "Chief"))
    rows = await write_one(world.pool, cid, set_title)
    assert rows[0][0] == 1
    assert await world.pool.fetchval("SELECT title FROM users WHERE id = $1", bob.id) == "Chief"
    assert await read(world, cid, bob.id) == (bob_before[0] + 1, bob_before[1])
    await write_one(world.pool, cid, Statement("SELECT $1::int", (1,)), private_to=[bob.id])
    assert await read(world, cid, bob.id) == (bob_before[0] + 1, bob_before[1] + 1)
    await write_one(world.pool, cid, Statement("SELECT 1"), private_to=())
    assert await read(world, cid, bob.id) == (bob_before[0] + 1, bob_before[1] + 1)
    assert await read(world, cid, admin.id) == (admin_before[0] + 1, admin_before[1])
    assert await world.pool.fetchval("SELECT count(*) FROM realtime_events_staged") == 0
    # atomic: a statement that fails changes nothing and bumps nothing
    with pytest.raises(asyncpg.PostgresError):
        await write_one(world.pool, cid, Statement(
            "WITH u AS (UPDATE users SET title = 'x' WHERE id = $1) SELECT 1 / 0", (bob.id,)))
    assert await world.pool.fetchval("SELECT title FROM users WHERE id = $1", bob.id) == "Chief"
    assert await read(world, cid, bob.id) == (bob_before[0] + 1, bob_before[1] + 1)
    # it is a unit of work of its own, never a part of another transaction
    async with world.pool.acquire() as conn, conn.transaction():
        with pytest.raises(RuntimeError):
            await write_one(conn, cid, Statement("SELECT 1"))


def test_staging_versions_goes_in_front() -> None:
    assert staging_versions("SELECT $1", 2).startswith("WITH staged_versions AS (")
    assert staging_versions("SELECT $1", 2).endswith(")\nSELECT $1")
    assert "$2, '{}', '{}', '{}', $3::bigint[]" in staging_versions("SELECT $1", 2)
    assert staging_versions(" with a AS (SELECT 1) SELECT * FROM a", 1).endswith(
        "),\na AS (SELECT 1) SELECT * FROM a")
    with pytest.raises(ValueError):
        staging_versions("WITH RECURSIVE a AS (SELECT 1) SELECT * FROM a", 1)


async def test_a_rolled_back_unit_bumps_nothing(world: World) -> None:
    admin = await world.community()
    cid = admin.community.id
    before = await read(world, cid, admin.id)
    async with work(world.pool, None, cid) as w:
        w.roll_back()
    with pytest.raises(RuntimeError):
        async with work(world.pool, None, cid):
            raise RuntimeError("boom")
    assert await read(world, cid, admin.id) == before


async def test_two_writers_of_a_community_do_not_wait_on_the_version(world: World) -> None:
    """The bump is inside COMMIT: a unit of work still open holds no lock on the row."""
    admin = await world.community()
    cid = admin.community.id
    before = await read(world, cid, admin.id)
    first_open = asyncio.Event()
    release_first = asyncio.Event()

    async def first() -> None:
        async with work(world.pool, None, cid) as w:
            await w.conn.execute("SELECT 1")
            first_open.set()
            await release_first.wait()

    task = asyncio.create_task(first())
    await first_open.wait()
    # with the first one still open (its events staged at the end of its block), a second
    # unit of the same community commits at once
    async with asyncio.timeout(5):
        async with work(world.pool, None, cid) as w:
            await w.conn.execute("SELECT 1")
    assert (await read(world, cid, admin.id))[0] == before[0] + 1
    release_first.set()
    await task
    assert (await read(world, cid, admin.id))[0] == before[0] + 2


async def test_the_login_row_carries_the_same_versions_as_the_query(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    cid = admin.community.id
    async with work(world.pool, None, cid) as w:
        w.private_to(bob.id)
    await world.pool.execute(  # an announcement whose sticky period is over
        "INSERT INTO messages (community_id, user_id, body, html_body, is_announcement, "
        "sticky_until) VALUES ($1, $2, 'x', 'x', true, now() - interval '1 hour')", cid, admin.id)
    for login in (bob.email, bob.username):
        row = await users.by_login(world.pool, cid, login)
        assert row is not None
        read_now = await versions.read(world.pool, cid, bob.id, True)
        assert versions.of_user(row) == read_now
        assert read_now[1] >= 1 and read_now[2] is not None
    session = await users.by_session(world.pool, cid, bob.id)
    assert session is not None
    assert versions.of_user(session) == await versions.read(world.pool, cid, bob.id, True)


async def test_writes_outside_a_unit_of_work_bump_by_hand(world: World) -> None:
    """`bump` (the demo seed, hand-written SQL) and `bump_all` (commons backfill-feed)."""
    admin = await world.community()
    other = await world.community()
    cid = admin.community.id
    before, other_before = await read(world, cid, admin.id), await read(world, other.community.id,
                                                                        other.id)
    await versions.bump(world.pool, cid)
    assert await read(world, cid, admin.id) == (before[0] + 1, before[1])
    await versions.bump(world.pool, cid, [admin.id, versions.COMMUNITY, admin.id])
    assert await read(world, cid, admin.id) == (before[0] + 2, before[1] + 1)
    await versions.bump_all(world.pool)
    assert await read(world, cid, admin.id) == (before[0] + 3, before[1] + 1)
    assert await read(world, other.community.id, other.id) == (other_before[0] + 1,
                                                              other_before[1])
