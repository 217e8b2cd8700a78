"""The app's pool (storage.availability.AvailablePool): its cheap acquire and release keep the
pool's guarantees: a connection always goes back, an open transaction is rolled back, waiting
for a connection is bounded, and an exhausted pool is `DatabaseUnavailable` (a 503)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asyncpg import pool as asyncpg_pool

from storage.availability import AvailablePool, DatabaseUnavailable
from storage.db import create_pool


async def _pool(dsn: str, size: int = 2, **kwargs: Any) -> AvailablePool:
    pool = await create_pool(dsn, size=size, reset_sessions=False, **kwargs)
    assert isinstance(pool, AvailablePool)
    return pool


async def test_a_free_connection_is_taken_without_a_timer(
    pg_admin_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = await _pool(pg_admin_dsn)
    timed: list[float | None] = []
    real = asyncpg_pool.compat.wait_for

    async def counting(fut: Any, timeout: float | None) -> Any:  # noqa: ASYNC109
        timed.append(timeout)
        return await real(fut, timeout)

    monkeypatch.setattr(asyncpg_pool.compat, "wait_for", counting)
    try:
        for _ in range(3):
            assert await pool.fetchval("SELECT 1") == 1
        assert timed == []
        assert pool.get_idle_size() == pool.get_size()
        # every connection in use: waiting for one is timed
        async with pool.acquire(), pool.acquire():
            with pytest.raises(DatabaseUnavailable):
                await pool.acquire(timeout=0.05)
        assert timed == [0.05]
    finally:
        await pool.close()


async def test_waiting_for_a_connection_is_bounded_and_unavailable(pg_admin_dsn: str) -> None:
    pool = await _pool(pg_admin_dsn, size=1, acquire_timeout=0.2)
    try:
        async with pool.acquire():
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(DatabaseUnavailable):
                await pool.fetchval("SELECT 1")
            assert loop.time() - started < 2
        assert await pool.fetchval("SELECT 1") == 1  # and the pool goes on
    finally:
        await pool.close()


async def test_a_waiter_gets_the_connection_released(pg_admin_dsn: str) -> None:
    pool = await _pool(pg_admin_dsn, size=1, acquire_timeout=5)
    try:
        conn = await pool.acquire()
        waiter = asyncio.ensure_future(pool.fetchval("SELECT 2"))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        await pool.release(conn)
        assert await asyncio.wait_for(waiter, 5) == 2
    finally:
        await pool.close()


async def test_a_transaction_left_open_is_rolled_back_on_release(pg_admin_dsn: str) -> None:
    pool = await _pool(pg_admin_dsn, size=1)
    try:
        conn = await pool.acquire()
        await conn.execute("BEGIN")
        await conn.execute("CREATE TEMP TABLE left_open (x int)")
        assert not pool._releases_at_once(conn)  # this release waits: asyncpg's, shielded
        await pool.release(conn)
        async with pool.acquire() as again:
            assert not again.is_in_transaction()
            assert await again.fetchval("SELECT to_regclass('pg_temp.left_open')") is None
    finally:
        await pool.close()


async def test_a_cancelled_request_still_gives_its_connection_back(pg_admin_dsn: str) -> None:
    """Cancelled while its transaction is rolled back on release (a release that waits), or
    right after an inline release: either way the connection is back in the pool."""
    pool = await _pool(pg_admin_dsn, size=1)
    try:
        async def request(open_transaction: bool) -> None:
            async with pool.acquire() as conn:
                if open_transaction:
                    await conn.execute("BEGIN")
                await conn.fetchval("SELECT 1")

        for open_transaction in (True, False):
            task = asyncio.ensure_future(request(open_transaction))
            for _ in range(3):  # into the release
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            async with asyncio.timeout(5), pool.acquire() as conn:
                assert not conn.is_in_transaction()
                assert await conn.fetchval("SELECT 3") == 3
    finally:
        await pool.close()


async def test_only_a_rollback_only_reset_releases_inline(pg_admin_dsn: str) -> None:
    """asyncpg's own reset (reset_sessions=True) runs a query on every release: never inline."""
    pool = await create_pool(pg_admin_dsn, size=1, reset_sessions=True)
    try:
        async with pool.acquire() as conn:
            assert isinstance(pool, AvailablePool)
            assert not pool._releases_at_once(conn)
            await conn.execute("SET application_name = 'changed'")
        async with pool.acquire() as conn:
            assert await conn.fetchval("SHOW application_name") == "commons"
    finally:
        await pool.close()


async def test_a_worn_out_connection_is_closed_on_release(pg_admin_dsn: str) -> None:
    pool = await _pool(pg_admin_dsn, size=1)
    try:
        async with pool.acquire() as conn:
            pid = await conn.fetchval("SELECT pg_backend_pid()")
            holder = conn._holder
            holder._max_queries = 1  # as if it had served max_queries
            assert not pool._releases_at_once(conn)
        holder._max_queries = 50000
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT pg_backend_pid()") != pid
    finally:
        await pool.close()
