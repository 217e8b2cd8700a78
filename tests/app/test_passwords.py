"""The verified-credentials caches: concurrent first verifications share one Argon2id run, and
a verification is shared through Redis by every process and survives restarts."""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
import uuid
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, Literal

import pytest
from aiohttp.test_utils import TestClient
from argon2 import PasswordHasher
from redis.asyncio import Redis

from app.config import Settings
from app.main import create_app
from app.passwords import HASHES_AT_ONCE, Passwords, cache_key_from
from app.resources import PASSWORDS
from storage.credentials_cache import REMEMBER_SCRIPT, CredentialsCache
from storage.redis import RedisHealth, redis_client
from tests.conftest import TEST_ARGON2
from tests.servers import RedisProcess
from tests.support import PASSWORD, Api, World


class CountingHasher(PasswordHasher):
    """The real Argon2id verification, counted."""

    calls = 0

    def verify(self, hash: str | bytes, password: str | bytes) -> Literal[True]:
        type(self).calls += 1
        return super().verify(hash, password)


def counting_hasher(passwords: Passwords) -> type[CountingHasher]:
    counting = type("Counting", (CountingHasher,), {"calls": 0})
    passwords._hasher = counting(
        time_cost=TEST_ARGON2.time_cost, memory_cost=TEST_ARGON2.memory_kib,
        parallelism=TEST_ARGON2.parallelism,
    )
    return counting


async def test_concurrent_first_verifications_share_one_hash() -> None:
    passwords = Passwords(TEST_ARGON2)
    stored = await passwords.hash("right password")
    calls = counting_hasher(passwords)
    results = await asyncio.gather(
        *(passwords.verify(1, stored, "right password", epoch=0) for _ in range(8)),
        *(passwords.verify(1, stored, "wrong password", epoch=0) for _ in range(3)),
    )
    assert results == [True] * 8 + [False] * 3
    assert calls.calls == 2  # one per distinct (user, hash, password)
    assert await passwords.verify(1, stored, "right password", epoch=0)  # from the cache
    assert calls.calls == 2
    # failures are not cached
    assert not await passwords.verify(1, stored, "wrong password", epoch=0)
    assert calls.calls == 3
    assert await passwords.verify(2, stored, "right password", epoch=0)  # another user: its own
    assert calls.calls == 4


async def test_a_waiter_that_goes_away_does_not_cancel_the_others() -> None:
    passwords = Passwords(TEST_ARGON2, cache_seconds=0)  # nothing cached: each batch hashes
    stored = await passwords.hash("right password")
    calls = counting_hasher(passwords)
    first = asyncio.ensure_future(passwords.verify(1, stored, "right password", epoch=0))
    second = asyncio.ensure_future(passwords.verify(1, stored, "right password", epoch=0))
    await asyncio.sleep(0)  # both are waiting on the one verification
    first.cancel()
    assert await second is True
    assert first.cancelled()
    assert calls.calls == 1
    assert await passwords.verify(1, stored, "right password", epoch=0)  # not cached: again
    assert calls.calls == 2


# --- the shared cache (Redis) ------------------------------------------------------------------

SECRET = cache_key_from(b"server secret")
TTL = 3600



@pytest.fixture
def prefix() -> str:
    return f"test-creds-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = redis_client(redis_url, timeout=0.2)
    yield client
    await client.aclose()


def process(
    redis: Redis, prefix: str, key: bytes = SECRET, health: RedisHealth | None = None,
) -> tuple[Passwords, type[CountingHasher], CredentialsCache]:
    """A server process's Passwords, as app/main.py makes it, its Argon2 runs counted."""
    passwords = Passwords(TEST_ARGON2, key=key)
    cache = CredentialsCache(redis, prefix, health or RedisHealth(), TTL)
    passwords.share(cache)
    return passwords, counting_hasher(passwords), cache


async def test_a_fresh_process_skips_argon2_after_the_first_verify(
    redis: Redis, prefix: str
) -> None:
    first, first_calls, _ = process(redis, prefix)
    stored = await first.hash("right password")
    assert await first.verify(1, stored, "right password", epoch=0)
    assert first_calls.calls == 1
    # another process, or this one after a restart: an empty memory, the same Redis
    restarted, calls, _ = process(redis, prefix)
    assert await restarted.verify(1, stored, "right password", epoch=0)
    assert calls.calls == 0
    assert await restarted.verify(1, stored, "right password", epoch=0)  # now from memory too
    assert calls.calls == 0
    # wrong passwords are never remembered anywhere
    assert not await restarted.verify(1, stored, "wrong password", epoch=0)
    assert not await process(redis, prefix)[0].verify(1, stored, "wrong password", epoch=0)
    assert calls.calls == 1
    # a server with another secret cannot use (nor forge) the entries
    other, other_calls, _ = process(redis, prefix, key=cache_key_from(b"another secret"))
    assert await other.verify(1, stored, "right password", epoch=0)
    assert other_calls.calls == 1


async def test_password_change_and_revocation_miss_in_every_process(
    redis: Redis, prefix: str
) -> None:
    one, _, _ = process(redis, prefix)
    old = await one.hash("old password")
    new = await one.hash("new password")
    assert await one.verify(5, old, "old password", epoch=3)
    two, calls, _ = process(redis, prefix)
    assert await two.verify(5, old, "old password", epoch=3)
    assert calls.calls == 0
    # a password change: the stored hash differs (and the epoch moves on)
    assert not await two.verify(5, new, "old password", epoch=4)
    assert calls.calls == 1
    # deactivation or revocation: the same hash, a new session epoch
    assert await two.verify(5, old, "old password", epoch=4)
    assert calls.calls == 2
    assert await two.verify(5, old, "old password", epoch=5)
    assert calls.calls == 3
    # and in the process that had it in memory
    one_calls = counting_hasher(one)
    assert await one.verify(5, old, "old password", epoch=6)
    assert one_calls.calls == 1


async def test_nothing_secret_in_redis(redis: Redis, prefix: str) -> None:
    passwords, _, _ = process(redis, prefix)
    stored = await passwords.hash("hunter2 hunter2")
    assert await passwords.verify(42, stored, "hunter2 hunter2", epoch=7)
    keys = [k async for k in redis.scan_iter(match=f"{prefix}:*")]
    assert len(keys) == 1
    key = keys[0].decode()
    assert re.fullmatch(rf"{re.escape(prefix)}:cred:[0-9a-f]{{64}}", key)
    assert await redis.get(key) == b"1"
    assert 0 < await redis.ttl(key) <= TTL
    password = b"hunter2 hunter2"
    unkeyed = {
        hashlib.new(name, data).hexdigest()[:16]
        for name in ("sha256", "sha1", "md5", "blake2b", "sha512")
        for data in (password, f"42\0{stored}\0".encode() + password,
                     f"42\0007\0{stored}\0".encode() + password)
    }
    assert not any(digest in key for digest in unkeyed)
    assert "hunter2" not in key and stored not in key


async def test_concurrent_lookups_go_to_redis_as_one_command(
    redis: Redis, prefix: str
) -> None:
    writer, _, _ = process(redis, prefix)
    stored = await writer.hash("pw")
    for user in range(30):
        assert await writer.verify(user, stored, "pw", epoch=0)
    restarted, calls, cache = process(redis, prefix)
    commands: list[str] = []
    real_mget = redis.mget

    async def mget(*args: Any, **kwargs: Any) -> Any:
        commands.append("MGET")
        return await real_mget(*args, **kwargs)

    cache._redis = SimpleNamespace(mget=mget)  # type: ignore[assignment]
    results = await asyncio.gather(*(restarted.verify(u, stored, "pw", epoch=0)
                                     for u in range(30)))
    assert results == [True] * 30
    assert calls.calls == 0
    assert commands == ["MGET"]


async def test_concurrent_new_entries_go_to_redis_as_one_write(
    redis: Redis, prefix: str
) -> None:
    commands: list[str] = []
    real_evalsha = redis.evalsha

    async def evalsha(*args: Any, **kwargs: Any) -> Any:
        commands.append("EVALSHA")
        return await real_evalsha(*args, **kwargs)

    redis.evalsha = evalsha  # type: ignore[method-assign]
    await redis.script_load(REMEMBER_SCRIPT)  # a fresh Redis would answer NOSCRIPT first
    cold, _, cache = process(redis, prefix)
    stored = await cold.hash("pw")
    # as many verifications ending in the same turn of the event loop (a cold storm)
    await asyncio.gather(*(cache.remember(cold.digest(u, 0, stored, "pw")) for u in range(30)))
    assert commands == ["EVALSHA"]
    keys = [k async for k in redis.scan_iter(match=f"{prefix}:cred:*")]
    assert len(keys) == 30
    assert all([0 < await redis.ttl(k) <= TTL for k in keys])
    restarted, restarted_calls, _ = process(redis, prefix)
    assert await restarted.verify(7, stored, "pw", epoch=0)
    assert restarted_calls.calls == 0  # known from Redis


async def test_redis_down_or_hung_falls_back_to_verifying(
    private_redis: RedisProcess, prefix: str
) -> None:
    client = redis_client(private_redis.url, timeout=0.2)
    try:
        health = RedisHealth()
        passwords, calls, _ = process(client, prefix, health=health)
        stored = await passwords.hash("right password")
        assert await passwords.verify(1, stored, "right password", epoch=0)  # in Redis now
        assert calls.calls == 1

        private_redis.freeze()  # hung: every call waits for its timeout
        try:
            hung, hung_calls, _ = process(client, prefix, health=health)
            began = time.monotonic()
            assert await hung.verify(1, stored, "right password", epoch=0)
            assert not await hung.verify(1, stored, "wrong password", epoch=0)
            assert time.monotonic() - began < 1.5
            assert hung_calls.calls == 2 and health.down
        finally:
            private_redis.thaw()

        await asyncio.to_thread(private_redis.stop)  # refused
        down, down_calls, _ = process(client, prefix, health=RedisHealth())
        assert await down.verify(1, stored, "right password", epoch=0)
        assert not await down.verify(1, stored, "wrong password", epoch=0)
        assert down_calls.calls == 2
    finally:
        await client.aclose()


async def test_app_processes_share_verified_credentials(
    world: World, client: TestClient, settings: Settings, aiohttp_client: Any
) -> None:
    """Two app processes (the same settings: the same secret and Redis), as `--workers 2`."""
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    second: TestClient = await aiohttp_client(create_app(settings))
    bob_on_second = Api(second, bob.api.host, bob.email, PASSWORD)
    first_calls = counting_hasher(client.app[PASSWORDS])
    second_calls = counting_hasher(second.app[PASSWORDS])
    assert (await bob.api.get("/api/userinfo")).status == 200
    assert first_calls.calls == 1
    assert (await bob_on_second.get("/api/userinfo")).status == 200
    assert second_calls.calls == 0
    # a password change on the first process: the old password misses on the second at once
    resp = await bob.api.put(f"/api/users/{bob.id}", json={"user": {
        "password": "a new secret", "current_password": PASSWORD}})
    assert resp.status == 200
    assert (await bob_on_second.get("/api/userinfo")).status == 401
    assert second_calls.calls == 1  # verified in full, and refused
    new_on_second = bob_on_second.as_user(bob.email, "a new secret")
    assert (await new_on_second.get("/api/userinfo")).status == 200
    assert second_calls.calls == 2
    assert (await bob.api.as_user(bob.email, "a new secret").get("/api/userinfo")).status == 200
    assert first_calls.calls == 1  # the current password was confirmed from the cache
    # deactivated: refused on both, whatever the caches hold
    assert (await admin.api.delete(f"/api/users/{bob.id}")).status == 200
    assert (await new_on_second.get("/api/userinfo")).status == 401


async def test_hashes_queued_while_redis_was_away_ask_it_again(
    redis: Redis, prefix: str
) -> None:
    """A storm that arrives while Redis does not answer queues for the hash; once Redis
    answers again, the queued verifications are answered from it instead of hashing."""
    earlier, _, _ = process(redis, prefix)
    stored = await earlier.hash("pw")
    for user in range(HASHES_AT_ONCE + 4):
        assert await earlier.verify(user, stored, "pw", epoch=0)
    health = RedisHealth(retry_interval=0)
    restarted, calls, cache = process(redis, prefix, health=health)
    real_mget = redis.mget
    failures = 1

    async def mget(*args: Any, **kwargs: Any) -> Any:
        nonlocal failures
        if failures:  # the storm's first lookup: Redis does not answer
            failures -= 1
            raise ConnectionError("Redis away")
        return await real_mget(*args, **kwargs)

    cache._redis = SimpleNamespace(  # type: ignore[assignment]
        mget=mget, pipeline=redis.pipeline)
    many = HASHES_AT_ONCE + 4
    results = await asyncio.gather(*(restarted.verify(u, stored, "pw", epoch=0)
                                     for u in range(many)))
    assert results == [True] * many
    assert calls.calls == HASHES_AT_ONCE  # those that got a slot at once; the rest asked Redis
