"""Batched lookups: what many requests ask at once is read with one query, and each gets what a
query of its own would have given."""

from __future__ import annotations

import asyncio

import pytest

from storage import realtime_channels, users
from storage.batch import Batcher, Lookups
from tests.conftest import QueryLog
from tests.support import World


async def test_lookups_of_one_turn_share_one_load() -> None:
    loads: list[list[int]] = []

    async def load(keys: list[int]) -> dict[int, str]:
        loads.append(keys)
        return {k: f"v{k}" for k in keys if k % 2 == 0}

    batcher: Batcher[int, str] = Batcher(load, max_batch=30)
    results = await asyncio.gather(*(batcher.get(k) for k in [*range(40), 4, 4]))
    assert results == [f"v{k}" if k % 2 == 0 else None for k in range(40)] + ["v4", "v4"]
    assert loads == [list(range(30)), list(range(30, 40))]  # duplicates asked once
    assert await batcher.get(2) == "v2"  # a lookup alone: a load of its own
    assert loads[-1] == [2]


async def test_a_failed_load_fails_its_batch_only() -> None:
    calls = 0

    async def load(keys: list[int]) -> dict[int, int]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("database away")
        return {k: k for k in keys}

    batcher: Batcher[int, int] = Batcher(load)
    results = await asyncio.gather(*(batcher.get(k) for k in range(3)), return_exceptions=True)
    assert [type(r) for r in results] == [ConnectionError] * 3
    assert await batcher.get(1) == 1


async def test_a_caller_that_goes_away_does_not_cancel_the_others() -> None:
    release = asyncio.Event()

    async def load(keys: list[int]) -> dict[int, int]:
        await release.wait()
        return {k: k * 10 for k in keys}

    batcher: Batcher[int, int] = Batcher(load)
    first = asyncio.ensure_future(batcher.get(1))
    second = asyncio.ensure_future(batcher.get(1))
    await asyncio.sleep(0.01)
    first.cancel()
    release.set()
    assert await second == 10
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_logins_of_concurrent_requests_in_one_query(
    world: World, query_log: QueryLog
) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    other = await world.community("Globex")
    lookups = Lookups(world.pool)
    logins = [bob.email, bob.email.upper(), bob.username, ann.username, "nobody@x.example",
              "", other.email]
    await asyncio.sleep(0)  # the set-up's query-log callbacks (asyncpg: the next turn)
    query_log.reset()
    rows = await asyncio.gather(*(lookups.user_by_login(ann.community.id, login)
                                  for login in logins))
    assert len(query_log) == 1
    assert [None if r is None else r["id"] for r in rows] == [
        bob.id, bob.id, bob.id, ann.id, None, None, None]  # another community's user: none
    for login, row in zip(logins, rows, strict=True):  # what the one-login query answers
        alone = await users.by_login(world.pool, ann.community.id, login)
        assert (alone is None and row is None) or (
            alone is not None and row is not None and dict(alone) == dict(row)
        )
    assert rows[0] is not None and rows[0]["password_hash"] and rows[0]["session_epoch"] == 0


async def test_an_email_match_wins_over_a_username_match(world: World) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    async with world.pool.acquire() as conn:  # carol's username is bob's e-mail address
        carol = await users.insert(conn, ann.community.id, email="carol@acme.example",
                                   username=bob.email.upper())
    row = await Lookups(world.pool).user_by_login(ann.community.id, bob.email)
    assert row is not None and row["id"] == bob.id
    row = await Lookups(world.pool).user_by_login(ann.community.id, "carol@acme.example")
    assert row is not None and row["id"] == carol["id"]


async def test_channels_of_concurrent_sockets_in_one_query(
    world: World, query_log: QueryLog
) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    cat = await world.user(ann, "Cat")
    resp = await ann.api.post("/api/groups", json={"group": {"name": "Cats"}})
    group_id = resp.json["group"]["id"]
    assert (await bob.api.post(f"/api/groups/{group_id}/join")).status in (200, 201)
    async with world.pool.acquire() as conn:
        await conn.execute("UPDATE users SET state = 'inactive' WHERE id = $1", cat.id)
    lookups = Lookups(world.pool)
    await asyncio.sleep(0)  # the set-up's query-log callbacks (asyncpg: the next turn)
    query_log.reset()
    found = await asyncio.gather(*(lookups.channel_ids_if_active(ann.community.id, uid)
                                   for uid in (ann.id, bob.id, cat.id, 10**9)))
    assert len(query_log) == 1
    assert found[1] == realtime_channels.ChannelIds([], [group_id])
    assert found[2] is None and found[3] is None  # deactivated; no such user
    for uid, channels in zip((ann.id, bob.id, cat.id), found[:3], strict=True):
        assert await realtime_channels.channel_ids_if_active(
            world.pool, ann.community.id, uid) == channels
