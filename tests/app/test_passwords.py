"""The verified-credentials cache: concurrent first verifications share one Argon2id run."""

from __future__ import annotations

import asyncio
from typing import Literal

from argon2 import PasswordHasher

from app.passwords import Passwords
from tests.conftest import TEST_ARGON2


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
        *(passwords.verify(1, stored, "right password") for _ in range(8)),
        *(passwords.verify(1, stored, "wrong password") for _ in range(3)),
    )
    assert results == [True] * 8 + [False] * 3
    assert calls.calls == 2  # one per distinct (user, hash, password)
    assert await passwords.verify(1, stored, "right password")  # from the cache
    assert calls.calls == 2
    assert not await passwords.verify(1, stored, "wrong password")  # failures are not cached
    assert calls.calls == 3
    assert await passwords.verify(2, stored, "right password")  # another user id: its own
    assert calls.calls == 4


async def test_a_waiter_that_goes_away_does_not_cancel_the_others() -> None:
    passwords = Passwords(TEST_ARGON2, cache_seconds=0)  # nothing cached: each batch hashes
    stored = await passwords.hash("right password")
    calls = counting_hasher(passwords)
    first = asyncio.ensure_future(passwords.verify(1, stored, "right password"))
    second = asyncio.ensure_future(passwords.verify(1, stored, "right password"))
    await asyncio.sleep(0)  # both are waiting on the one verification
    first.cancel()
    assert await second is True
    assert first.cancelled()
    assert calls.calls == 1
    assert await passwords.verify(1, stored, "right password")  # not cached: hashes again
    assert calls.calls == 2
