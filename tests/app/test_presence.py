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
