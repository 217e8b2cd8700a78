"""Rate limits in Redis, and what happens while Redis is unreachable: requests keep being
served and the limits are counted in the process instead."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from app.config import Settings
from app.main import create_app
from app.passwords import Passwords
from app.ratelimit import COUNT_SCRIPT, RedisRateLimiter
from app.resources import POOL
from storage.redis import RedisHealth
from tests.servers import RedisProcess
from tests.support import World


async def test_limits_are_shared_in_redis_and_kept_locally_while_it_is_down(
    private_redis: RedisProcess,
) -> None:
    one, two = Redis.from_url(private_redis.url), Redis.from_url(private_redis.url)
    # retry_interval=0: each call tries Redis (the app's 1 s would hide the restart)
    first = RedisRateLimiter(one, "t", RedisHealth(retry_interval=0))
    second = RedisRateLimiter(two, "t", RedisHealth(retry_interval=0))
    try:
        assert await first.hit("k", 2) is None
        assert await second.hit("k", 2) is None  # another process, the same count
        assert await first.hit("k", 2) is not None
        assert await second.peek("k", 2) is not None

        await asyncio.to_thread(private_redis.stop)
        # Down: counted in each process; nothing raises.
        assert await first.peek("down", 2) is None
        assert await first.hit("down", 2) is None
        assert await first.hit("down", 2) is None
        retry = await first.hit("down", 2)
        assert retry is not None and 0 < retry <= 60
        assert await first.peek("down", 2) is not None
        assert await second.peek("down", 2) is None  # the other process counted nothing

        await asyncio.to_thread(private_redis.start)  # back, empty
        assert await second.hit("up", 1) is None
        assert await first.hit("up", 1) is not None  # shared again
    finally:
        await one.aclose()
        await two.aclose()


async def test_requests_are_served_while_redis_is_down(
    aiohttp_client: Any, settings: Settings, private_redis: RedisProcess
) -> None:
    app = create_app(dataclasses.replace(settings, redis_url=private_redis.url,
                                         rate_limit_failed_logins=2))
    client: TestClient = await aiohttp_client(app)
    world = World(app[POOL], Passwords(settings.argon2), client)
    ann = await world.community("Acme")
    await asyncio.to_thread(private_redis.kill)
    resp = await ann.api.get("/api/userinfo")
    assert resp.status == 200, resp.text
    wrong = ann.api.as_user(ann.email, "not the password")
    assert [(await wrong.get("/api/userinfo")).status for _ in range(3)] == [401, 401, 429]


async def test_a_burst_of_concurrent_requests_is_counted_in_redis(
    aiohttp_client: Any, settings: Settings, redis_url: str
) -> None:
    # More requests at once than the Redis client keeps connections: they wait for one
    # instead of failing over (or failing).
    app = create_app(settings)
    client: TestClient = await aiohttp_client(app)
    world = World(app[POOL], Passwords(settings.argon2), client)
    ann = await world.community("Acme")
    await ann.api.get("/api/userinfo")  # the credentials are cached from here on
    url = client.make_url("/api/userinfo")
    headers = ann.api._headers(None)

    async def one(session: aiohttp.ClientSession) -> int:
        async with session.get(url, headers=headers) as resp:
            await resp.read()
            return resp.status

    # 300 requests in flight at once (the test client would allow only 100)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        statuses = await asyncio.gather(*(one(session) for _ in range(300)))
    assert set(statuses) == {200}
    redis = Redis.from_url(redis_url)
    try:
        keys = await redis.keys(f"{settings.redis_prefix}:rl:user:{ann.id}:*")
        counted = sum([int(await redis.get(k) or 0) for k in keys])
    finally:
        await redis.aclose()
    assert counted == 301


async def test_concurrent_counts_go_to_redis_in_one_call(redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    calls = 0
    real_evalsha = redis.evalsha

    async def evalsha(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return await real_evalsha(*args, **kwargs)

    redis.evalsha = evalsha  # type: ignore[method-assign]
    limiter = RedisRateLimiter(redis, f"t-{id(redis)}", RedisHealth())
    await redis.script_load(COUNT_SCRIPT)  # a fresh Redis would answer NOSCRIPT first
    try:
        hits = await asyncio.gather(*(limiter.hit("k", 10) for _ in range(25)),
                                    limiter.peek("other", 1))
        assert calls == 1
        assert hits[:10] == [None] * 10  # the first ten are within the limit
        assert all(isinstance(h, int) and h > 0 for h in hits[10:25])
        assert hits[25] is None  # "other" was never hit
        assert await limiter.peek("k", 25) is not None  # 25 counted: at a limit of 25
        assert await limiter.peek("k", 26) is None  # and under 26
        assert calls == 3
    finally:
        await redis.aclose()


async def test_a_counter_expires_with_its_window_and_later_hits_keep_its_end(
    redis_url: str,
) -> None:
    redis = Redis.from_url(redis_url)
    prefix = f"t-{id(redis)}"
    limiter = RedisRateLimiter(redis, prefix, RedisHealth())
    try:
        assert await limiter.hit("w", 5, window=3600) is None
        [key] = await redis.keys(f"{prefix}:rl:w:*")
        assert 3590 < await redis.ttl(key) <= 3601  # the window's length + 1 s
        await redis.expire(key, 1000)  # as if time had passed
        assert await limiter.hit("w", 5, window=3600) is None
        assert await redis.ttl(key) <= 1000  # not pushed back by the later hit
        assert int(await redis.get(key)) == 2
        # a read never creates a counter
        assert await limiter.peek("never", 0) is None
        assert await redis.keys(f"{prefix}:rl:never:*") == []
    finally:
        await redis.aclose()


async def test_the_script_is_loaded_again_when_redis_lost_it(
    private_redis: RedisProcess,
) -> None:
    # a Redis of its own: flushing the shared one's scripts would make other tests that count
    # script calls see a reload
    redis = Redis.from_url(private_redis.url)
    health = RedisHealth()
    limiter = RedisRateLimiter(redis, f"t-{id(redis)}", health)
    try:
        assert await limiter.hit("s", 1) is None
        await redis.script_flush()  # a restarted Redis has no scripts
        assert await limiter.hit("s", 1) is not None  # counted in Redis: the second hit
        assert health.available()
    finally:
        await redis.aclose()


async def test_a_batch_of_hits_and_reads_answers_each_in_its_order(redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    limiter = RedisRateLimiter(redis, f"t-{id(redis)}", RedisHealth())
    try:
        assert await limiter.hit("a", 1) is None  # a: 1
        answers = await asyncio.gather(
            limiter.peek("a", 1),  # at the limit: refused
            limiter.hit("b", 1),  # b: 1
            limiter.peek("b", 1),  # read after the hit before it in the batch: 1
            limiter.hit("b", 1),  # b: 2, over
            limiter.peek("c", 1),  # none
            limiter.hit("a", 2, window=3600),  # another window's counter: 1
        )
        assert [a is not None for a in answers] == [True, False, True, True, False, False]
    finally:
        await redis.aclose()
