"""The push delivery loop run by `commons worker`.

Each round claims a batch of due jobs (push/jobs.py: SKIP LOCKED, with a lease, re-checked in
the same statement), skips those no longer wanted, sends the rest with at most `concurrency`
requests in flight, and then settles the batch in a few statements:

* sent, dropped, not wanted any more, or given up (older than `give_up`, 24 h by default:
  Synapse's pusher schedule; a push about something from yesterday is noise): the job is
  deleted (a badge update is kept for a while: see push/jobs.py `settle_badges`);
* a temporary failure: tried again after an exponential backoff with jitter
  (backoff_min * 2^(n-1), from 1 s to at most `backoff_max`, 1 h; never sooner than the
  provider's Retry-After), unless that would be past `give_up`;
* the token was rejected: the device is deleted, and with it every job still queued for it.

Delivery is at least once: a worker killed after a send but before recording its result
leaves that job to be claimed again when its lease ends, and it is sent again. Each job's
result is recorded as soon as its own send completes (group commit), and a send keeps its
slot until then, so what a killed worker leaves to be sent again is at most `concurrency`
jobs: the sends on the wire. A re-send carries the same push id as the first (APNs apns-id
and apns-collapse-id, FCM tag and apns-collapse-id), so the device replaces the first rather
than showing two. Stopped with SIGTERM, the worker finishes and records the batch in hand:
nothing is sent twice.

A group chat message is ONE job of another kind (push/jobs.py `enqueue_chat`, table
push_chat_fanouts), written by the request whatever the group's size; each round fans out a
chunk of its members (`fanout_chunk`, one transaction) into ordinary jobs, one per device
whose settings allow it, which the following batches send.

Workers wake up on NOTIFY commons_push (sent with the jobs, delivered at commit) and otherwise
poll every `idle_poll` seconds, which is also when retries come due.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from push import jobs
from push.apns import ApnsOptions, ApnsProvider
from push.fcm import FcmOptions, FcmProvider
from push.jobs import Claimed
from push.log import LogProvider
from push.provider import Outcome, Provider, SendResult
from push.settings import WorkerSettings
from storage import client_devices

log = logging.getLogger("commons.push")

PLATFORMS = ("apns", "fcm")
FAN_OUT_LOOK = 1.0
"""Seconds between looks for group chat messages to fan out while a backlog is drained."""


@dataclass
class Stats:
    sent: int = 0
    skipped: int = 0
    retried: int = 0
    dropped: int = 0
    gave_up: int = 0
    rejected: int = 0
    fanned_out: int = 0
    """Push jobs made by fanning out group chat messages."""
    outcomes: list[tuple[int, str]] = field(default_factory=list)
    """(job id, outcome) of every job handled, in order (for logs and tests)."""

    def add(self, other: Stats) -> None:
        self.sent += other.sent
        self.skipped += other.skipped
        self.retried += other.retried
        self.dropped += other.dropped
        self.gave_up += other.gave_up
        self.rejected += other.rejected
        self.fanned_out += other.fanned_out
        self.outcomes.extend(other.outcomes)

    @property
    def handled(self) -> int:
        return len(self.outcomes)


def backoff(
    settings: WorkerSettings, attempts: int, retry_after: float | None,
    rng: Callable[[], float] = random.random,
) -> float:
    """Seconds until the next attempt after `attempts` failed ones."""
    delay = min(settings.backoff_max, settings.backoff_min * 2 ** min(max(attempts - 1, 0), 30))
    delay *= 0.5 + rng() / 2  # jitter, so failed batches do not come back in lockstep
    return max(delay, settings.backoff_min, retry_after or 0.0)


class PushWorker:
    def __init__(
        self,
        pool: asyncpg.Pool,
        providers: Mapping[str, Provider],
        settings: WorkerSettings | None = None,
        *,
        rng: Callable[[], float] = random.random,
    ) -> None:
        missing = [p for p in PLATFORMS if p not in providers]
        if missing:
            raise ValueError(f"no push provider for {', '.join(missing)}")
        self._pool = pool
        self._providers = providers
        self._settings = settings or WorkerSettings()
        self._rng = rng
        # totals since start, by outcome, for the heartbeat (and so /metrics)
        self.counts: dict[str, int] = {"sent": 0, "failed": 0, "retried": 0, "pruned": 0}

    def count(self, stats: Stats) -> None:
        self.counts["sent"] += stats.sent
        self.counts["failed"] += stats.dropped + stats.gave_up
        self.counts["retried"] += stats.retried
        self.counts["pruned"] += stats.rejected  # devices whose token the provider refused

    async def run_once(self, stop: asyncio.Event | None = None) -> Stats:
        """Deliver every job due now (batch after batch), or until `stop` is set: the batch in
        hand is finished, the rest stays queued for the next worker; what happened."""
        total = Stats()
        settings = self._settings
        look_again = 0.0
        while stop is None or not stop.is_set():
            # a chunk of a group chat message's members becomes jobs, sent from the next
            # batch on: fanning out and sending take turns, so neither waits for the other.
            # With nothing to fan out, look again only every FAN_OUT_LOOK seconds while
            # draining (a round trip per batch saved); each wake-up looks at once.
            fanned = None
            if time.monotonic() >= look_again:
                fanned = await jobs.fan_out(self._pool, settings.fanout_chunk)
                if fanned is None:
                    look_again = time.monotonic() + FAN_OUT_LOOK
                else:
                    total.fanned_out += fanned[1]
            batch = await jobs.claim(
                self._pool, settings.batch_size, timedelta(seconds=settings.lease)
            )
            if batch:
                total.add(await self._deliver(batch))
            if len(batch) < settings.batch_size and fanned is None:
                return total
        return total

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until `stop` is set, woken by NOTIFY or every idle_poll seconds."""
        wake = asyncio.Event()

        def on_notify(*_: Any) -> None:
            wake.set()

        while not stop.is_set():
            try:
                async with self._pool.acquire() as listener:
                    await listener.add_listener(jobs.CHANNEL, on_notify)
                    try:
                        while not stop.is_set():
                            wake.clear()
                            stats = await self.run_once(stop)
                            self.count(stats)
                            if stats.handled or stats.fanned_out:
                                log.info(
                                    "push: %d sent, %d skipped, %d retried, %d dropped, "
                                    "%d gave up, %d tokens rejected, %d fanned out from group "
                                    "chats", stats.sent, stats.skipped, stats.retried,
                                    stats.dropped, stats.gave_up, stats.rejected,
                                    stats.fanned_out,
                                )
                            await _wait_any(wake, stop, self._settings.idle_poll)
                    finally:
                        with contextlib.suppress(Exception):
                            await listener.remove_listener(jobs.CHANNEL, on_notify)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("push worker lost its database connection: %r", exc)
                await _wait_any(stop, stop, self._settings.idle_poll)

    async def _deliver(self, batch: Sequence[Claimed]) -> Stats:
        """Send a batch, recording each job's result as soon as its own send completes.

        Results are written by group commit: whatever finished while the previous settlement
        was being written goes into the next one (one short transaction each). A send keeps
        its slot (one of `concurrency`) until its result is written, so that at any moment
        at most `concurrency` jobs have reached (or may have reached) the provider without
        their result being durable: that, the sends on the wire, is all that a worker
        killed at that moment leaves to be sent again."""
        stats = Stats()
        settings = self._settings
        now = datetime.now(UTC)
        pending = _Settlement()
        to_send: list[Claimed] = []
        for job in batch:
            if not job.wanted:
                if job.kind == "badge":
                    pending.badges.append((job.id, job.seq, False))
                else:
                    pending.done.append(job.id)
                stats.skipped += 1
                stats.outcomes.append((job.id, "skipped"))
            elif (job.kind != "badge"  # a badge job is reused, read after read
                  and (now - job.created_at).total_seconds() > settings.give_up):
                pending.done.append(job.id)
                stats.gave_up += 1
                stats.outcomes.append((job.id, "gave_up"))
            else:
                to_send.append(job)
        limit = asyncio.Semaphore(settings.concurrency)
        ready = asyncio.Event()
        ready.set()
        remaining = len(to_send)

        async def send(job: Claimed) -> None:
            nonlocal remaining
            async with limit:
                provider = self._providers[job.platform]
                try:
                    result = await provider.send(job.registration_id, job.message)
                except Exception as exc:  # a provider bug must not lose the batch
                    log.exception("push provider %s failed", provider.name)
                    result = SendResult(Outcome.RETRY, f"provider error: {exc!r}")
                recorded = pending
                self._record(job, result, now, recorded, stats)
                remaining -= 1
                ready.set()
                await recorded.written  # the slot is free once the result is durable

        async def settle() -> None:
            nonlocal pending
            while True:
                await ready.wait()
                ready.clear()
                if pending:
                    taken, pending = pending, _Settlement()
                    await self._settle(taken)
                    taken.written.set_result(None)
                if remaining == 0 and not pending:
                    return

        sends = [asyncio.create_task(send(job)) for job in to_send]
        try:
            await settle()
            await asyncio.gather(*sends)
        finally:
            for task in sends:
                task.cancel()
        return stats

    def _record(self, job: Claimed, result: SendResult, now: datetime, pending: _Settlement,
                stats: Stats) -> None:
        settings = self._settings
        label = result.outcome.value
        if result.outcome is Outcome.SENT:
            if job.kind == "badge":
                pending.badges.append((job.id, job.seq, True))
            else:
                pending.done.append(job.id)
            stats.sent += 1
        elif result.outcome is Outcome.DROP:
            pending.done.append(job.id)
            stats.dropped += 1
            log.warning("push job %d dropped: %s", job.id, result.detail)
        elif result.outcome is Outcome.TOKEN_REJECTED:
            pending.rejected.append(job.device_id)
            pending.done.append(job.id)
            stats.rejected += 1
        else:
            delay = backoff(settings, job.attempts, result.retry_after, self._rng)
            if (now - job.created_at).total_seconds() + delay > settings.give_up:
                pending.done.append(job.id)
                stats.gave_up += 1
                label = "gave_up"
                log.warning("push job %d given up after %d attempts: %s", job.id,
                            job.attempts, result.detail)
            else:
                pending.retries.append((job.id, delay, result.detail or "retry"))
                stats.retried += 1
        stats.outcomes.append((job.id, label))

    async def _settle(self, taken: _Settlement) -> None:
        if not (taken.badges or taken.retries or taken.rejected):
            await jobs.complete(self._pool, taken.done)  # the usual case: one statement
            return
        interval = timedelta(seconds=self._settings.badge_interval)
        async with self._pool.acquire() as conn, conn.transaction():
            await jobs.complete(conn, taken.done)
            await jobs.settle_badges(conn, taken.badges, interval)
            await jobs.retry(conn, taken.retries)
            await client_devices.delete_by_ids(conn, taken.rejected)


@dataclass
class _Settlement:
    """What to write about jobs handled (see PushWorker._deliver)."""

    done: list[int] = field(default_factory=list)
    badges: list[tuple[int, int, bool]] = field(default_factory=list)
    retries: list[tuple[int, float, str]] = field(default_factory=list)
    rejected: list[int] = field(default_factory=list)
    written: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())
    """Done once this settlement is committed."""

    def __bool__(self) -> bool:
        return bool(self.done or self.badges or self.retries or self.rejected)


async def _wait_any(first: asyncio.Event, second: asyncio.Event, seconds: float) -> None:
    waiters = {asyncio.ensure_future(first.wait()), asyncio.ensure_future(second.wait())}
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


@contextlib.asynccontextmanager
async def open_providers(
    apns: ApnsOptions | None, fcm: FcmOptions | None
) -> AsyncIterator[dict[str, Provider]]:
    """A provider per platform: the real one when its settings are given, else one that only
    logs (the default)."""
    providers: dict[str, Provider] = {}
    try:
        providers["apns"] = ApnsProvider.from_options(apns) if apns else LogProvider("apns")
        providers["fcm"] = FcmProvider.from_options(fcm) if fcm else LogProvider("fcm")
        yield providers
    finally:
        for provider in providers.values():
            with contextlib.suppress(Exception):
                await provider.close()
