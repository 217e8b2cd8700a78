"""Argon2id password hashing, off the event loop, with a verified-credentials cache.

A full Argon2id verification costs tens of milliseconds by design. Clients of this API send
Basic credentials on every request, so after one full verification we remember, for a while,
a keyed digest of (user id, stored hash, password). Changing the password changes the stored
hash, so old entries stop matching at once in every process; the process that made the change
also evicts every entry of that user (`forget_user`). Deactivation is checked on the user row
itself.

Requests that arrive together with the same not-yet-verified credentials (a client opening
many connections at once, e.g. after a restart) share one verification instead of each paying
a full Argon2id.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections import OrderedDict

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from app.config import Argon2Settings


class Passwords:
    def __init__(
        self, settings: Argon2Settings, cache_seconds: int = 300, cache_size: int = 10_000
    ) -> None:
        self._hasher = PasswordHasher(
            time_cost=settings.time_cost,
            memory_cost=settings.memory_kib,
            parallelism=settings.parallelism,
        )
        self._cache: OrderedDict[bytes, tuple[float, int]] = OrderedDict()  # (expires, user)
        self._cache_seconds = cache_seconds
        self._cache_size = cache_size
        # Per-process key: the cache never holds anything an attacker could test guesses on.
        self._key = secrets.token_bytes(32)
        self._dummy: str | None = None
        # cache key -> the verification in progress for those credentials
        self._verifying: dict[bytes, asyncio.Future[bool]] = {}

    async def hash(self, password: str) -> str:
        return await asyncio.to_thread(self._hasher.hash, password)

    def _cache_key(self, user_id: int, stored: str, password: str) -> bytes:
        h = hashlib.blake2b(key=self._key, digest_size=32)
        h.update(f"{user_id}\0{stored}\0".encode())
        h.update(password.encode())
        return h.digest()

    def _cached(self, key: bytes) -> bool:
        entry = self._cache.get(key)
        if entry is None:
            return False
        if entry[0] < time.monotonic():
            del self._cache[key]
            return False
        self._cache.move_to_end(key)
        return True

    def _remember(self, key: bytes, user_id: int) -> None:
        self._cache[key] = (time.monotonic() + self._cache_seconds, user_id)
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    async def verify(self, user_id: int, stored: str | None, password: str) -> bool:
        if not stored or not password:
            return False
        key = self._cache_key(user_id, stored, password)
        if self._cache_seconds > 0 and self._cached(key):
            return True
        running = self._verifying.get(key)
        if running is None:
            running = asyncio.ensure_future(
                self._verify_and_remember(key, user_id, stored, password)
            )
            self._verifying[key] = running
            running.add_done_callback(lambda _: self._verifying.pop(key, None))
        # shielded: a caller that goes away does not cancel the others' verification
        return await asyncio.shield(running)

    async def _verify_and_remember(
        self, key: bytes, user_id: int, stored: str, password: str
    ) -> bool:
        try:
            ok = await asyncio.to_thread(self._hasher.verify, stored, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False
        if ok and self._cache_seconds > 0:
            self._remember(key, user_id)
        return bool(ok)

    async def verify_nothing(self, password: str) -> None:
        """A full verification that always fails: for logins that match no usable account."""
        if self._dummy is None:
            self._dummy = await self.hash(secrets.token_urlsafe(16))
        try:
            await asyncio.to_thread(self._hasher.verify, self._dummy, password or "-")
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            pass

    def forget_user(self, user_id: int) -> None:
        """Evict every cached credential of this user (password changed, deactivated)."""
        for key in [k for k, (_, uid) in self._cache.items() if uid == user_id]:
            del self._cache[key]

    def forget_all(self) -> None:
        self._cache.clear()
