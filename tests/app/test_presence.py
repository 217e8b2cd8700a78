"""app.presence: marks age out after PRESENCE_SECONDS; communities are apart."""

from __future__ import annotations

import pytest

from app import presence
from app.presence import PRESENCE_SECONDS, MemoryPresence, RedisPresence


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_marks_age_out_and_stay_in_their_community(
    kind: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redis.asyncio import Redis

    now = [1_000_000.0]
    monkeypatch.setattr(presence.time, "time", lambda: now[0])
    client = Redis.from_url(redis_url)
    store = MemoryPresence() if kind == "memory" else RedisPresence(client, "test-presence")
    try:
        await store.seen(1, 10)
        await store.seen(1, 11)
        assert await store.online(1, [10, 11, 12]) == {10, 11}
        assert await store.online(2, [10, 11]) == set()
        now[0] += PRESENCE_SECONDS - 1
        await store.seen(1, 11)
        now[0] += 2
        assert await store.online(1, [10, 11]) == {11}
        assert await store.online(1, []) == set()
    finally:
        await client.delete("test-presence:presence:1")
        await client.aclose()


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_held_users_are_refreshed_by_one_task_until_their_last_socket_goes(
    kind: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hold() marks at once; the process's one refresher marks every held user again each
    REFRESH_SECONDS, in one write; a user stays held while any of their sockets is open here,
    and ages out after the last one is released; the refresher stops with nothing held."""
    import asyncio

    from redis.asyncio import Redis

    now = [2_000_000.0]
    monkeypatch.setattr(presence.time, "time", lambda: now[0])
    monkeypatch.setattr(presence, "REFRESH_SECONDS", 0.01)
    client = Redis.from_url(redis_url)
    prefix = f"test-held-{kind}"
    store = MemoryPresence() if kind == "memory" else RedisPresence(client, prefix)

    async def until_online(community_id: int, user_ids: list[int], expected: set[int]) -> None:
        # the marks go to Redis from a task: poll (a busy machine may take a while)
        async with asyncio.timeout(5):
            while await store.online(community_id, user_ids) != expected:  # noqa: ASYNC110
                await asyncio.sleep(0.01)

    try:
        store.hold(1, 10)
        store.hold(1, 10)  # two sockets of the same user
        store.hold(1, 11)
        store.hold(2, 10)
        await until_online(1, [10, 11, 12], {10, 11})
        await until_online(2, [10, 11], {10})
        store.release(1, 11)
        store.release(1, 10)  # one socket of user 10 remains
        # past every mark made so far: only a refresh made since brings a user back
        now[0] += PRESENCE_SECONDS + 1
        await until_online(1, [10, 11], {10})  # 11 is no longer refreshed
        await until_online(2, [10], {10})
        store.release(1, 10)
        store.release(2, 10)
        await asyncio.sleep(0)
        assert store._refresher is None  # nothing held: no task left behind
        await asyncio.sleep(0.05)  # a refresh would come within this
        now[0] += PRESENCE_SECONDS + 1
        assert await store.online(1, [10, 11]) == set()
        assert await store.online(2, [10]) == set()
        store.release(3, 3)  # never held: nothing to undo
        assert store._held == {}
    finally:
        await client.delete(f"{prefix}:presence:1", f"{prefix}:presence:2")
        await client.aclose()
