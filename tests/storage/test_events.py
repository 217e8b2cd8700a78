"""The realtime event log against a real PostgreSQL: ids per community, in commit order."""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import asyncpg
import orjson
import pytest
import pytest_asyncio

from realtime.events import NewEvent
from storage.db import create_pool
from storage.events import (
    EventIds,
    TailInsert,
    append_events,
    events_since,
    last_event_id,
    last_event_ids,
    oldest_event_id,
    prune_events,
    stage_events,
)

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
# the event log, and its numbering at commit (both stand alone)
# (0020 replaces 0019's trigger function: it also bumps content versions at commit)
MIGRATION_FILES = (
    "0006_realtime.sql", "0019_event_ids_at_commit.sql", "0020_content_versions.sql",
)


def _admin_dsn() -> str:
    try:
        from tests.servers import ensure_postgres
    except ImportError:
        return os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    return ensure_postgres()


async def _run(dsn: str, sql: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def events_dsn() -> Iterator[str]:
    """A throwaway database holding only the event log's migrations."""
    admin = _admin_dsn()
    name = f"commons_rt_test_{uuid.uuid4().hex[:10]}"
    dsn = f"{admin.rsplit('/', 1)[0]}/{name}"
    asyncio.run(_run(admin, f'CREATE DATABASE "{name}"'))
    for file in MIGRATION_FILES:
        asyncio.run(_run(dsn, (MIGRATIONS / file).read_text()))
    yield dsn
    asyncio.run(_run(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest_asyncio.fixture
async def pool(events_dsn: str) -> AsyncIterator[asyncpg.Pool]:
    # the app's own pool (json decoded by orjson): storage must work with it
    pool = await create_pool(events_dsn, size=30)
    await pool.execute("TRUNCATE realtime_events, realtime_event_counters")
    yield pool
    await pool.close()


def ev(channel: str = "c", **data: object) -> NewEvent:
    return NewEvent(channel, "remark.created", dict(data))


async def test_ids_are_consecutive_per_community(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        first = await append_events(conn, 1, [ev(n=1), ev(n=2)])
        other = await append_events(conn, 2, [ev(n=3)])
        second = await append_events(conn, 1, [ev("d", n=4)])
        assert await append_events(conn, 1, []) == []
        assert [(e.id, e.community_id, e.data) for e in first] == [
            (1, 1, {"n": 1}),
            (2, 1, {"n": 2}),
        ]
        assert [(e.id, e.community_id) for e in other] == [(1, 2)]
        assert [(e.id, e.channel) for e in second] == [(3, "d")]
        assert await last_event_id(conn, 1) == 3
        assert await last_event_id(conn, 2) == 1
        assert await last_event_id(conn, 99) == 0
        assert await last_event_ids(conn, [1, 2, 99]) == {1: 3, 2: 1}


async def test_a_rolled_back_transaction_leaves_no_hole(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await append_events(conn, 1, [ev()])
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await append_events(conn, 1, [ev(), ev()])
                raise RuntimeError("abort")
        assert [e.id for e in await append_events(conn, 1, [ev()])] == [2]


async def test_events_since_filters_orders_and_bounds(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await append_events(conn, 1, [ev("a"), ev("b"), ev("a"), ev("c"), ev("a")])
        await append_events(conn, 2, [ev("a")])

        def ids(events: list) -> list[int]:
            return [e.id for e in events]

        assert ids(await events_since(conn, 1, ["a"], 0, 10)) == [1, 3, 5]
        assert ids(await events_since(conn, 1, ["a", "c"], 1, 10)) == [3, 4, 5]
        assert ids(await events_since(conn, 1, ["a"], 0, 2)) == [1, 3]
        assert ids(await events_since(conn, 1, ["a"], 0, 10, up_to=3)) == [1, 3]
        assert ids(await events_since(conn, 1, None, 2, 10)) == [3, 4, 5]
        assert ids(await events_since(conn, 1, [], 0, 10)) == []
        assert [(e.community_id, e.id) for e in await events_since(conn, 2, None, 0, 10)] == [
            (2, 1)
        ]


async def test_data_round_trips_byte_for_byte(pool: asyncpg.Pool) -> None:
    data = {"z": 1, "a": {"y": [1, 2.5, None, True], "b": 'é 😀 "q"'}, "m": ""}
    async with pool.acquire() as conn:
        await append_events(conn, 1, [NewEvent("c", "x", data)])
        (stored,) = await events_since(conn, 1, ["c"], 0, 10)
    assert stored.data == data
    assert orjson.dumps(stored.data) == orjson.dumps(data)  # key order kept (json, not jsonb)


async def test_channels_and_names_must_be_single_line(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        for bad in (NewEvent("a\nb", "x", {}), NewEvent("", "x", {}), NewEvent("a", "x\ny", {})):
            with pytest.raises(ValueError):
                await append_events(conn, 1, [bad])
        assert await last_event_id(conn, 1) == 0


async def test_oldest_and_prune(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        assert await oldest_event_id(conn, 1) is None
        await append_events(conn, 1, [ev() for _ in range(5)])
        await append_events(conn, 2, [ev()])
        await conn.execute(
            "UPDATE realtime_events SET created_at = now() - interval '2 days' "
            "WHERE community_id = 1 AND id <= 3"
        )
        assert await oldest_event_id(conn, 1) == 1
        assert await prune_events(conn, timedelta(days=1), batch_size=2) == 3
        assert await oldest_event_id(conn, 1) == 4
        assert await oldest_event_id(conn, 2) == 1
        assert await last_event_id(conn, 1) == 5  # ids never restart
        assert [e.id for e in await append_events(conn, 1, [ev()])] == [6]


async def test_a_later_transaction_waits_and_gets_the_larger_ids(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as first, pool.acquire() as second:
        tx1 = first.transaction()
        await tx1.start()
        mine = await append_events(first, 1, [ev()])
        tx2 = second.transaction()
        await tx2.start()
        theirs = asyncio.ensure_future(append_events(second, 1, [ev()]))
        await asyncio.sleep(0.2)
        assert not theirs.done()  # held on the counter row until the first commits
        await tx1.commit()
        later = await theirs
        await tx2.commit()
    assert [e.id for e in mine] == [1] and [e.id for e in later] == [2]


async def test_staged_events_are_numbered_by_the_commit_in_commit_order(
    pool: asyncpg.Pool,
) -> None:
    """Staging locks nothing (two writers of one community stage at once); each COMMIT numbers
    its own events, so the one that commits first gets the smaller ids, gap-free, whoever
    staged first, and reads them back from the COMMIT's notice."""
    async with pool.acquire() as first, pool.acquire() as second:
        ids1, ids2 = EventIds(first), EventIds(second)
        try:
            tx1, tx2 = first.transaction(), second.transaction()
            await tx1.start()
            await tx2.start()
            await stage_events(first, 1, [ev(n=1), ev("d", n=2)], ids1)
            await asyncio.wait_for(stage_events(second, 1, [ev(n=3)], ids2), 5)  # no wait
            assert await last_event_id(pool, 1) == 0  # nothing numbered before a commit
            await tx2.commit()
            await tx1.commit()
            late, early = ids1.numbered(), ids2.numbered()
        finally:
            ids1.close()
            ids2.close()
    assert [(e.id, e.data) for e in early] == [(1, {"n": 3})]
    assert [(e.id, e.channel, e.data) for e in late] == [(2, "c", {"n": 1}), (3, "d", {"n": 2})]
    stored = await events_since(pool, 1, None, 0, 10)
    assert [(e.id, e.data) for e in stored] == [(1, {"n": 3}), (2, {"n": 1}), (3, {"n": 2})]
    assert await pool.fetchval("SELECT count(*) FROM realtime_events_staged") == 0


async def test_a_rolled_back_stage_takes_no_id(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        ids = EventIds(conn)
        try:
            with pytest.raises(LookupError):
                async with conn.transaction():
                    await stage_events(conn, 1, [ev()], ids)
                    raise LookupError("the change failed")
            assert ids.numbered() == []
            async with conn.transaction():
                await stage_events(conn, 1, [ev(n=1)], ids)
            assert [e.id for e in ids.numbered()] == [1]
        finally:
            ids.close()
    assert await last_event_id(pool, 1) == 1


async def test_tail_inserts_ride_on_the_staging_statement(pool: asyncpg.Pool) -> None:
    """Inserts handed to stage_events (push jobs, in the app) are CTEs of its one statement,
    their placeholders renumbered after the events'; each NOTIFYs its channel at commit only
    when it inserted a row; with no event and no version, the tail alone is written."""
    await pool.execute("CREATE TABLE IF NOT EXISTS tail_rows (a int, b text)")
    await pool.execute("TRUNCATE tail_rows")
    rows = "INSERT INTO tail_rows SELECT x, $2 FROM unnest($1::int[]) AS x RETURNING 1"
    heard: list[str] = []
    async with pool.acquire() as listener, pool.acquire() as conn:
        def hear(_conn: object, _pid: int, channel: str, _payload: str) -> None:
            heard.append(channel)

        for channel in ("tail_woken", "tail_woken_never"):
            await listener.add_listener(channel, hear)
        statements: list[str] = []
        conn.add_query_logger(lambda q: statements.append(q.query))
        ids = EventIds(conn)
        try:
            async with conn.transaction():
                await stage_events(conn, 1, [ev(n=1)], ids, tail=[
                    TailInsert(rows, ([1, 2], "one"), wake="tail_woken"),
                    TailInsert(rows, ([], "none"), wake="tail_woken_never"),
                ])
                assert heard == []  # delivered at commit
            assert [e.data for e in ids.numbered()] == [{"n": 1}]
            async with conn.transaction():
                await stage_events(conn, 1, [], ids, tail=[TailInsert(rows, ([3], "alone"))])
        finally:
            ids.close()
        await asyncio.sleep(0.1)
        assert len([q for q in statements if "INSERT" in q]) == 2
        for channel in ("tail_woken", "tail_woken_never"):
            await listener.remove_listener(channel, hear)
    assert heard == ["tail_woken"]
    assert sorted(tuple(r) for r in await pool.fetch("SELECT a, b FROM tail_rows")) == [
        (1, "one"), (2, "one"), (3, "alone")]
    assert await last_event_id(pool, 1) == 1


async def test_concurrent_writers_never_expose_a_hole(pool: asyncpg.Pool) -> None:
    """Whatever the interleaving, the visible ids are always exactly 1..N: a reader that has
    seen N has seen everything below it (what a sequence does not promise)."""
    stop = asyncio.Event()
    snapshots: list[list[int]] = []

    async def writer(n: int) -> None:
        rng = random.Random(n)
        for _ in range(15):
            async with pool.acquire() as conn, conn.transaction():
                await asyncio.sleep(rng.random() / 200)  # the transaction's own work
                await append_events(conn, 1, [ev(w=n) for _ in range(rng.randint(1, 3))])
                await asyncio.sleep(rng.random() / 200)  # commit comes a little later

    async def reader() -> None:
        async with pool.acquire() as conn:
            while not stop.is_set():
                snapshots.append(
                    await conn.fetchval(
                        "SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM realtime_events"
                    )
                )

    watching = asyncio.ensure_future(reader())
    await asyncio.gather(*(writer(n) for n in range(12)))
    stop.set()
    await watching
    async with pool.acquire() as conn:
        total = await last_event_id(conn, 1)
        final = [e.id for e in await events_since(conn, 1, None, 0, 10_000)]
    assert final == list(range(1, total + 1))
    assert len(snapshots) > 10
    for seen in snapshots:
        assert list(seen) == list(range(1, len(seen) + 1))
