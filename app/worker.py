"""`commons worker`: background jobs (push delivery, thumbnails, event pruning).

Two kinds of work run side by side:
- the push delivery loop (push/worker.py), woken by NOTIFY when jobs commit;
- periodic jobs (JOBS), each at its own interval: pruning realtime events older than
  EVENT_RETENTION, and uploads nobody attached to anything (app.actions.attachments).
With once=True, every periodic job runs once and the due pushes are delivered once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import timedelta

import asyncpg

from app.config import Settings
from storage.blobs import BlobStore

log = logging.getLogger("commons.worker")

EVENT_RETENTION = timedelta(days=7)
TICK = 5.0


@dataclass
class WorkerContext:
    pool: asyncpg.Pool
    settings: Settings
    blobs: BlobStore


@dataclass
class Periodic:
    """A job run every `every` seconds (the first time at start)."""

    name: str
    every: float
    run: Callable[[WorkerContext], Awaitable[object]]
    last: float | None = field(default=None)

    def due(self, now: float) -> bool:
        return self.last is None or now - self.last >= self.every


async def prune_events(ctx: WorkerContext) -> int:
    from storage.events import prune_events as prune

    async with ctx.pool.acquire() as conn:  # outside a transaction: each batch commits alone
        deleted = await prune(conn, EVENT_RETENTION)
    if deleted:
        log.info("pruned %d realtime events older than %s", deleted, EVENT_RETENTION)
    return deleted


async def prune_uploads(ctx: WorkerContext) -> int:
    from app.actions.attachments import prune_unclaimed

    deleted = await prune_unclaimed(ctx.pool, ctx.blobs)
    if deleted:
        log.info("pruned %d unclaimed uploads", deleted)
    return deleted


JOBS: list[Periodic] = [
    Periodic("prune_events", 3600.0, prune_events),
    Periodic("prune_uploads", 3600.0, prune_uploads),
]


async def _periodic(ctx: WorkerContext, jobs: list[Periodic], stop: asyncio.Event) -> None:
    while not stop.is_set():
        await _run_due(ctx, jobs)
        try:
            await asyncio.wait_for(stop.wait(), TICK)
        except TimeoutError:
            pass


async def _run_due(ctx: WorkerContext, jobs: list[Periodic], *, all_: bool = False) -> None:
    for job in jobs:
        now = time.monotonic()
        if not (all_ or job.due(now)):
            continue
        job.last = now
        try:
            await job.run(ctx)
        except Exception:
            log.exception("job %s failed", job.name)


HEARTBEAT_EVERY = 10.0


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


async def _heartbeat(pool: asyncpg.Pool, counts: dict[str, int], stop: asyncio.Event) -> None:
    """Say this worker is alive (with its push counters) every HEARTBEAT_EVERY seconds until
    `stop`; then say it left."""
    from storage import heartbeats

    me, host, pid = worker_id(), socket.gethostname(), os.getpid()
    failing = False
    while not stop.is_set():
        try:
            await heartbeats.beat(pool, me, host, pid, dict(counts))
            await heartbeats.prune(pool, timedelta(days=1))
            if failing:
                log.info("worker heartbeat recorded again")
            failing = False
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            if not failing:  # one line per outage, not one per beat
                log.warning("worker heartbeat failed: %s", type(exc).__name__)
            failing = True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), HEARTBEAT_EVERY)
    with contextlib.suppress(Exception):
        await heartbeats.forget(pool, me)


async def run_worker(
    settings: Settings, *, once: bool = False, stop: asyncio.Event | None = None
) -> None:
    """Runs push delivery and the periodic jobs until `stop` is set (or the process is
    stopped), or one round of each with once=True."""
    from push.worker import PushWorker, open_providers
    from storage.blobs import open_blob_store
    from storage.db import create_pool

    assert settings.database_url
    stop = stop or asyncio.Event()
    async with AsyncExitStack() as stack:
        pool = await create_pool(settings.database_url, size=4)
        stack.push_async_callback(pool.close)
        blobs = await stack.enter_async_context(open_blob_store(settings.s3, settings.data_dir))
        providers = await stack.enter_async_context(open_providers(settings.apns, settings.fcm))
        ctx = WorkerContext(pool, settings, blobs)
        pusher = PushWorker(pool, providers, settings.push)
        jobs = [Periodic(j.name, j.every, j.run) for j in JOBS]  # fresh timers per run
        if once:
            await _run_due(ctx, jobs, all_=True)
            pusher.count(await pusher.run_once())
            return
        await asyncio.gather(
            pusher.run(stop), _periodic(ctx, jobs, stop), _heartbeat(pool, pusher.counts, stop)
        )
