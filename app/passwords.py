"""Argon2id password hashing, off the event loop, with verified-credentials caches.

A full Argon2id verification costs tens of milliseconds by design (about 100 ms at the default
cost). Clients of this API send Basic credentials on every request, so after one full
verification we remember a keyed digest of (user id, session epoch, stored hash, password):

- in this process, for `cache_seconds` (COMMONS_CREDENTIALS_CACHE_SECONDS), at most
  `cache_size` entries;
- behind it, in Redis (storage/credentials_cache.py), shared by every process and surviving
  restarts, for COMMONS_CREDENTIALS_SHARED_CACHE_SECONDS (a day by default): a polling Basic
  client costs one Argon2 verify a day, and a restart costs none.

The digest is keyed with a secret derived from the session secret (`cache_key_from`), so
neither cache holds anything to test password guesses on offline. A password change changes
the stored hash, and a password change, a deactivation or any other revocation of the user's
sessions bumps their session epoch (in the same transaction): either way the digest changes, so
every old entry, in every process and in Redis, stops matching at once; nothing needs deleting.
The process that made the change also evicts the user's entries from its own memory
(`forget_user`), to free them. Redis away or hung: one short timeout at most, then the full
verification; a login never fails because of Redis.

Requests that arrive together with the same not-yet-verified credentials (a client opening
many connections at once, e.g. after a restart) share one verification instead of each paying
a full Argon2id.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import secrets
import time
from collections import OrderedDict

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from app.config import Argon2Settings
from storage.credentials_cache import CredentialsCache

CACHE_KEY_LABEL = b"commons verified-credentials cache v1"
# Full verifications at once per process: as many as the default executor has threads (more
# would only queue there, where they could not ask Redis again); fewer serialized a cold storm
# behind the threads' wake-up latency.
HASHES_AT_ONCE = min(32, (os.cpu_count() or 1) + 4)


def cache_key_from(secret: bytes) -> bytes:
    """The credentials caches' MAC key, derived from the server secret (the session secret):
    the same in every process that shares that secret, and not the secret itself."""
    return hmac.new(secret, CACHE_KEY_LABEL, hashlib.sha256).digest()


class Passwords:
    def __init__(
        self, settings: Argon2Settings, cache_seconds: int = 300, cache_size: int = 10_000,
        *, key: bytes | None = None,
    ) -> None:
        self._hasher = PasswordHasher(
            time_cost=settings.time_cost,
            memory_cost=settings.memory_kib,
            parallelism=settings.parallelism,
        )
        self._cache: OrderedDict[bytes, tuple[float, int]] = OrderedDict()  # (expires, user)
        self._cache_seconds = cache_seconds
        self._cache_size = cache_size
        # The MAC key: neither cache holds anything an attacker could test guesses on. Without
        # a server secret (the CLI, tests) a per-process one: nothing is shared.
        self._key = key if key is not None else secrets.token_bytes(32)
        self._shared: CredentialsCache | None = None
        # full verifications running at once (each uses `parallelism` threads, `memory_kib`)
        self._hashing = asyncio.Semaphore(HASHES_AT_ONCE)
        self._dummy: str | None = None
        # cache key -> the callers waiting for the verification in progress of those
        # credentials (each its own future: one that goes away cancels only its own)
        self._verifying: dict[bytes, list[asyncio.Future[bool]]] = {}
        self._running: set[asyncio.Task[None]] = set()

    async def hash(self, password: str) -> str:
        return await asyncio.to_thread(self._hasher.hash, password)

    def share(self, cache: CredentialsCache | None) -> None:
        """Put the shared cache (Redis) behind this process's own."""
        self._shared = cache

    def digest(self, user_id: int, epoch: int, stored: str, password: str) -> bytes:
        """The caches' key for these credentials (a MAC: nothing to test guesses on)."""
        # keyed BLAKE2b: a MAC (RFC 7693), as strong as an HMAC and cheaper. The password comes
        # last so that no value can run into the next field.
        h = hashlib.blake2b(key=self._key, digest_size=32)
        h.update(f"{user_id}\0{epoch}\0{stored}\0".encode())
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

    async def verify(
        self, user_id: int, stored: str | None, password: str, *, epoch: int
    ) -> bool:
        """Whether `password` matches the user's `stored` hash; `epoch` is their session epoch
        as read with the hash (a revocation bumps it, and the caches miss)."""
        if not stored or not password:
            return False
        key = self.digest(user_id, epoch, stored, password)
        if self._cache_seconds > 0 and self._cached(key):
            return True
        loop = asyncio.get_running_loop()
        mine: asyncio.Future[bool] = loop.create_future()
        waiting = self._verifying.get(key)
        if waiting is None:
            self._verifying[key] = [mine]
            task = loop.create_task(self._verify_for_all(key, user_id, stored, password))
            self._running.add(task)
            task.add_done_callback(self._running.discard)
        else:
            waiting.append(mine)
        return await mine

    async def _verify_for_all(
        self, key: bytes, user_id: int, stored: str, password: str
    ) -> None:
        try:
            ok = await self._verify_and_remember(key, user_id, stored, password)
        except asyncio.CancelledError:  # shutdown
            for future in self._verifying.pop(key, []):
                future.cancel()
            raise
        except Exception as exc:  # to every caller, none of whom this task belongs to
            for future in self._verifying.pop(key, []):
                if not future.done():
                    future.set_exception(exc)
            return
        for future in self._verifying.pop(key, []):
            if not future.done():
                future.set_result(ok)

    async def _verify_and_remember(
        self, key: bytes, user_id: int, stored: str, password: str
    ) -> bool:
        shared = self._shared
        known = None if shared is None else await shared.known(key)
        if known:
            if self._cache_seconds > 0:
                self._remember(key, user_id)
            return True
        waited = self._hashing.locked()
        async with self._hashing:
            # Queued behind other hashes while Redis did not answer (a storm that met a Redis
            # timeout): it may answer now, and asking costs far less than the hash.
            if waited and known is None and shared is not None and await shared.known(key):
                if self._cache_seconds > 0:
                    self._remember(key, user_id)
                return True
            try:
                ok = await asyncio.to_thread(self._hasher.verify, stored, password)
            except (VerifyMismatchError, VerificationError, InvalidHashError):
                return False
        if ok and self._cache_seconds > 0:
            self._remember(key, user_id)
        if ok and shared is not None:
            await shared.remember(key)
        return bool(ok)

    async def verify_nothing(self, password: str) -> None:
        """A full verification that always fails: for logins that match no usable account."""
        if self._dummy is None:
            self._dummy = await self.hash(secrets.token_urlsafe(16))
        async with self._hashing:  # queued like a real one: the same time under load too
            try:
                await asyncio.to_thread(self._hasher.verify, self._dummy, password or "-")
            except (VerifyMismatchError, VerificationError, InvalidHashError):
                pass

    def forget_user(self, user_id: int) -> None:
        """Evict every cached credential of this user from this process (password changed,
        deactivated): memory only; the epoch in the key already makes them unreachable."""
        for key in [k for k, (_, uid) in self._cache.items() if uid == user_id]:
            del self._cache[key]

    def forget_all(self) -> None:
        self._cache.clear()
