"""Outages of the services the app depends on: PostgreSQL is required, and while it cannot be
reached every request gets a quick, clean "unavailable" instead of a hang or a traceback.

- `Outage` logs one line when a dependency starts failing and one when it answers again,
  whatever the number of requests in between (a WARNING per request would bury the log).
- `AvailablePool` is the asyncpg pool of the app: connecting times out after
  `connect_timeout`, waiting for a free connection after `acquire_timeout`, and a connection
  that cannot be made (refused, timed out, server starting or shutting down) raises
  `DatabaseUnavailable`, which the errors middleware answers with 503 `unavailable`. The pool
  recovers by itself: asyncpg replaces a closed connection on the next acquire, so the first
  request after PostgreSQL is back gets a fresh connection.
- `is_connection_loss` tells a dropped connection (server restarted under a query) from an
  error of the query itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

log = logging.getLogger(__name__)


class DatabaseUnavailable(Exception):
    """PostgreSQL cannot be reached (or gave no free connection in time)."""


class Outage:
    """One log line when `name` starts failing, one when it answers again."""

    def __init__(self, name: str, logger: logging.Logger | None = None) -> None:
        self.name = name
        self._log = logger or log
        self.down_since: float | None = None  # time.monotonic() of the first failure

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def failed(self, exc: BaseException, consequence: str = "") -> None:
        if self.down_since is None:
            self.down_since = time.monotonic()
            detail = f"{type(exc).__name__}: {exc}".rstrip(": ")
            self._log.warning("%s unreachable (%s)%s", self.name, detail,
                              f"; {consequence}" if consequence else "")

    def answered(self) -> None:
        if self.down_since is not None:
            seconds = time.monotonic() - self.down_since
            self.down_since = None
            self._log.warning("%s reachable again after %.1f s", self.name, seconds)


# Errors that mean "the server is not there (now)", not "this query is wrong".
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,  # refused, reset, unreachable host
    TimeoutError,
    asyncpg.CannotConnectNowError,  # starting up, shutting down, in recovery
    asyncpg.ConnectionDoesNotExistError,  # dropped under a query
    asyncpg.ConnectionFailureError,
    asyncpg.TooManyConnectionsError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
)


def is_connection_loss(exc: BaseException) -> bool:
    if isinstance(exc, CONNECTION_ERRORS):
        return True
    # asyncpg raises a bare InterfaceError for a connection closed by the server meanwhile
    return isinstance(exc, asyncpg.InterfaceError) and "closed" in str(exc)


class AvailablePool(asyncpg.Pool):
    """An asyncpg pool that answers `DatabaseUnavailable` quickly when PostgreSQL is away.

    Every request acquires and releases a connection, so both are kept to their cheapest
    (issue 13: together they were a fifth of a 304's CPU). A connection that is free is taken
    without a timer: only waiting for one needs `acquire_timeout` (opening one is bounded by
    the connect timeout). A release that cannot wait (no transaction left open, nothing to
    close or cancel) runs inline: asyncpg wraps every release in `asyncio.shield`, a Task
    each, which only matters for a release that waits, where a cancellation could otherwise
    land in the middle.
    """

    def __init__(
        self, *args: Any, acquire_timeout: float, outage: Outage,
        reset_waits_only_in_transaction: bool = False, **kwargs: Any,
    ) -> None:
        """`reset_waits_only_in_transaction`: the pool's `reset` runs a query only when a
        transaction was left open (storage.db's rollback-only reset); asyncpg's own reset
        always runs one, and then no release is inline."""
        super().__init__(*args, **kwargs)
        self.acquire_timeout = acquire_timeout
        self.outage = outage
        self._inline_release = reset_waits_only_in_transaction

    async def _acquire(self, timeout: float | None) -> PoolConnectionProxy:  # noqa: ASYNC109 - asyncpg's signature
        free = timeout is None and not self._queue.empty()
        try:
            proxy: PoolConnectionProxy = await super()._acquire(
                None if free else self.acquire_timeout if timeout is None else timeout
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not is_connection_loss(exc):
                raise
            self.outage.failed(exc, "requests are answered 503")
            raise DatabaseUnavailable(str(exc) or type(exc).__name__) from exc
        if free:
            # what asyncpg records for the release (its reset's time limit), as if waited for
            proxy._holder._timeout = self.acquire_timeout
        self.outage.answered()
        return proxy

    async def release(self, connection: Any, *, timeout: float | None = None) -> None:  # noqa: ASYNC109 - asyncpg's signature
        if not self._releases_at_once(connection):
            await super().release(connection, timeout=timeout)
            return
        # Pool.release without its shield: nothing in this release waits, so no cancellation
        # can interrupt it (a cancellation is delivered only where a coroutine waits)
        self._check_init()
        connection._con._on_release()
        holder = connection._holder
        await holder.release(holder._timeout if timeout is None else timeout)

    def _releases_at_once(self, proxy: Any) -> bool:
        """Whether asyncpg's release of `proxy` completes without waiting: the checks of
        asyncpg 0.32's `PoolConnectionHolder.release`, which waits only to close the connection
        (worn out by `max_queries`, or of an expired generation), for a query cancellation in
        progress, to roll back a transaction left open, or to run the pool's reset query."""
        if not self._inline_release or type(proxy) is not PoolConnectionProxy:
            return False
        holder = getattr(proxy, "_holder", None)
        con = proxy._con
        if holder is None or holder._pool is not self or con is None or con.is_closed():
            return False
        protocol = con._protocol
        return (
            not con.is_in_transaction()
            and con._top_xact is None
            and holder._generation == self._generation
            and protocol.queries_count < holder._max_queries
            and not protocol._is_cancelling()
        )
