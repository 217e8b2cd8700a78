"""Push delivery benchmark: `commons worker` against the APNs and FCM stand-ins.

    .venv/bin/python bench/push.py [--users 2000] [--rounds 3] [--rate 500] [--seconds 6]
                                   [--kill-pushes 3000]

Everything runs on 127.0.0.1 (PostgreSQL on 127.0.0.1:5432 unless --admin-dsn); a default
run takes about a minute on 2 cores.

1. A fresh database `commons_push_<random>` (dropped at the end), migrated, with one community
   and --users users, each with one push device: half APNs, half FCM.
2. The stand-ins run in this process: tests/push/fake_apns.py (TLS + HTTP/2, behind a local
   HTTP CONNECT proxy given to the worker as APNS_PROXY, its test CA trusted through
   SSL_CERT_FILE) and tests/push/fake_fcm.py (FCM v1 and the OAuth token endpoint, over HTTP).
   The worker is the real `commons worker` in its own process; its CPU (utime + stime from
   /proc) is what "per CPU-second" divides by. The stand-ins' CPU is not counted.
3. Throughput: --rounds notifications per user (app.actions.notifications.notify_users, as a
   follow would: one transaction per round, so --users pushes per commit) are committed while
   the worker waits; printed: pushes per second (wall clock, first commit to last push
   received) and pushes per worker CPU-second. The reference in the same run: the same worker
   with no provider credentials (pushes only logged, at WARNING level: nothing written), i.e.
   the database side alone.
4. Latency: notifications committed at --rate per second for --seconds (in commits of a
   twentieth of a second's worth); p50 / p99 from commit to the stand-in receiving the push.
5. Kill: --kill-pushes pushes committed, the stand-ins answering after 20 ms; the worker is
   SIGKILLed once a third have arrived, and a new one started (PUSH_LEASE_SECONDS=2).
   Printed: pushes lost (never received) and re-sent (received twice: at least once delivery;
   each re-send carries the same apns-id / collapse id, see docs/notifications.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(REPO_ROOT), str(BENCH_DIR)]

import asyncpg  # noqa: E402
from aiohttp import web  # noqa: E402
from bench_db import fresh_database  # noqa: E402

from tests.push.fake_apns import (  # noqa: E402
    KEY_ID,
    TEAM_ID,
    TOPIC,
    ConnectProxy,
    FakeApns,
    make_certificates,
)
from tests.push.fake_fcm import FakeFcm  # noqa: E402

DOMAIN = "push.example"
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class World:
    dsn: str
    community_id: int
    sender_id: int
    user_ids: list[int]


async def seed(dsn: str, users: int) -> World:
    from app.actions.communities import create_community
    from app.config import Argon2Settings
    from app.passwords import Passwords
    from migrations import apply_migrations
    from storage.db import create_pool

    await apply_migrations(dsn)
    passwords = Passwords(Argon2Settings(time_cost=1, memory_kib=1024, parallelism=1))
    pool = await create_pool(dsn, size=2)
    try:
        community, admin = await create_community(
            pool, passwords, name="Push", domain=DOMAIN, admin_email=f"admin@{DOMAIN}",
            admin_password="push bench password", base_url=f"https://{DOMAIN}",
        )
        cid = community.id
        # bench set-up only: users and devices straight into their tables
        ids = [r["id"] for r in await pool.fetch(
            "INSERT INTO users (community_id, email, username, first_name, last_name, "
            "password_hash) SELECT $1, 'u' || n || '@' || $2, 'u' || n, 'User', 'N' || n, 'x' "
            "FROM generate_series(1, $3) AS n RETURNING id", cid, DOMAIN, users)]
        await pool.execute(
            "INSERT INTO client_devices (community_id, user_id, registration_id, platform) "
            "SELECT $1, u, CASE WHEN u % 2 = 0 THEN lpad(to_hex(u), 64, '0') "
            "ELSE 'fcm-' || u END, CASE WHEN u % 2 = 0 THEN 'apns' ELSE 'fcm' END "
            "FROM unnest($2::bigint[]) AS u", cid, ids)
        return World(dsn, cid, int(admin["id"]), ids)
    finally:
        await pool.close()


async def notify(pool: asyncpg.Pool, world: World, user_ids: list[int]) -> float:
    """One transaction notifying `user_ids` (pushes to their devices); the commit's time."""
    from app.actions.notifications import notify_users
    from storage.db import transaction
    from storage.notifications import Subject

    subject = Subject("followers", "followed", "User", world.sender_id, None, "/users/admin")
    async with transaction(pool) as conn:
        await notify_users(conn, world.community_id, world.sender_id, user_ids, subject)
    return time.monotonic()


class Stands:
    """Both stand-ins, with the arrival time of each push (by notification id, device)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.apns = FakeApns(record=False)
        self.fcm = FakeFcm()
        self.arrivals: list[tuple[str, str, float]] = []
        self.proxy: ConnectProxy | None = None
        self.runner: web.AppRunner | None = None
        self.ca = Path()

    async def start(self) -> None:
        self.ca, cert, key = make_certificates(self.tmp / "tls")
        original = self.apns._answer

        def answer(headers: dict[str, str], body: bytes) -> Any:
            result = original(headers, body)
            payload = body.decode()
            marker = '"notification_id":"'
            start = payload.find(marker) + len(marker)
            self.arrivals.append((payload[start:payload.find('"', start)],
                                  headers.get(":path", ""), time.monotonic()))
            return result

        self.apns._answer = answer  # type: ignore[method-assign]
        await self.apns.start(cert, key)
        self.proxy = ConnectProxy(("127.0.0.1", self.apns.port))
        await self.proxy.start()
        fcm_app = self.fcm.app()

        @web.middleware
        async def track(request: web.Request, handler: Any) -> web.StreamResponse:
            response = await handler(request)
            if request.path.endswith("messages:send") and response.status == 200:
                message = self.fcm.received[-1]["message"]
                self.arrivals.append((message["data"].get("notification_id", ""),
                                      message["token"], time.monotonic()))
                self.fcm.received.clear()
            return response

        fcm_app.middlewares.append(track)
        self.runner = web.AppRunner(fcm_app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.fcm.base_url = f"http://127.0.0.1:{port}"

    def env(self, dsn: str, *, providers: bool = True, **push: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("APNS_", "FCM_", "PUSH_"))}
        env.update({"DATABASE_URL": dsn, "COMMONS_DATA_DIR": str(self.tmp / "data"),
                    "COMMONS_LOG_LEVEL": "WARNING", "PYTHONPATH": str(REPO_ROOT)})
        if providers:
            assert self.proxy is not None
            env.update({
                "SSL_CERT_FILE": str(self.ca), "APNS_KEY_FILE": str(self.apns.p8(self.tmp)),
                "APNS_KEY_ID": KEY_ID, "APNS_TEAM_ID": TEAM_ID, "APNS_TOPIC": TOPIC,
                "APNS_PROXY": self.proxy.url,
                "FCM_CREDENTIALS_FILE": str(self.fcm.credentials(self.tmp)),
                "FCM_API_URL": self.fcm.base_url,
            })
        env.update({f"PUSH_{k.upper()}": v for k, v in push.items()})
        return env

    async def stop(self) -> None:
        if self.proxy is not None:
            await self.proxy.stop()
        await self.apns.stop()
        if self.runner is not None:
            await self.runner.cleanup()


class Worker:
    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "app.cli", "worker"],
                                        cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


async def pending(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM push_jobs"))


async def wait_until(check: Any, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.02)
    return False


async def throughput(pool: asyncpg.Pool, world: World, stands: Stands, rounds: int,
                     providers: bool) -> tuple[int, float, float]:
    """(pushes, wall seconds, worker CPU seconds)."""
    stands.arrivals.clear()
    worker = Worker(stands.env(world.dsn, providers=providers))
    try:
        await asyncio.sleep(3)  # started and idle
        before = worker.cpu()
        start = time.monotonic()
        for _ in range(rounds):
            await notify(pool, world, world.user_ids)
        total = rounds * len(world.user_ids)

        async def done() -> bool:
            if providers:
                return len(stands.arrivals) >= total
            return await pending(pool) == 0
        finished = await wait_until(done, 300)
        end = time.monotonic()
        await asyncio.sleep(0.2)
        cpu = worker.cpu() - before
    finally:
        worker.stop()
    if not finished:
        raise SystemExit(f"throughput: only {len(stands.arrivals)} of {total} pushes arrived")
    return total, end - start, cpu


async def latency(pool: asyncpg.Pool, world: World, stands: Stands, rate: float,
                  seconds: float) -> tuple[int, float, float, float]:
    """(pushes, p50 ms, p99 ms, max ms) from commit to arrival."""
    stands.arrivals.clear()
    worker = Worker(stands.env(world.dsn))
    committed: dict[str, float] = {}
    try:
        await asyncio.sleep(3)
        tick = 0.05
        per_tick = max(1, round(rate * tick))
        users = world.user_ids
        cursor = 0
        start = time.monotonic()
        n = 0
        while time.monotonic() - start < seconds:
            chunk = [users[(cursor + i) % len(users)] for i in range(per_tick)]
            cursor += per_tick
            async with pool.acquire() as conn:
                last = await conn.fetchval("SELECT coalesce(max(id), 0) FROM notifications")
            at = await notify(pool, world, chunk)
            async with pool.acquire() as conn:
                for row in await conn.fetch(
                        "SELECT id FROM notifications WHERE id > $1", last):
                    committed[str(row["id"])] = at
            n += 1
            await asyncio.sleep(max(0.0, start + n * tick - time.monotonic()))
        await wait_until(lambda: _true(len(stands.arrivals) >= len(committed)), 60)
    finally:
        worker.stop()
    waits = sorted((at - committed[nid]) * 1000 for nid, _, at in stands.arrivals
                   if nid in committed)
    if not waits:
        raise SystemExit("latency: nothing arrived")
    return (len(waits), waits[len(waits) // 2], waits[min(len(waits) - 1,
                                                          int(len(waits) * 0.99))], waits[-1])


async def _true(value: bool) -> bool:
    return value


async def kill(pool: asyncpg.Pool, world: World, stands: Stands, pushes: int
               ) -> tuple[int, int, int, int]:
    """(pushes, received when killed, lost, re-sent)."""
    stands.arrivals.clear()
    stands.apns.delay = 0.02
    stands.fcm.delay = 0.02
    env = stands.env(world.dsn, lease_seconds="2", concurrency="32", batch_size="100")
    users = world.user_ids
    expected: set[tuple[str, str]] = set()
    async with pool.acquire() as conn:
        last = await conn.fetchval("SELECT coalesce(max(id), 0) FROM notifications")
    for start in range(0, pushes, len(users)):
        await notify(pool, world, users[: min(len(users), pushes - start)])
    rows = await pool.fetch(
        "SELECT n.id, d.registration_id, d.platform FROM notifications n "
        "JOIN client_devices d ON d.user_id = n.user_id WHERE n.id > $1", last)
    for row in rows:
        device = (f"/3/device/{row['registration_id']}" if row["platform"] == "apns"
                  else row["registration_id"])
        expected.add((str(row["id"]), device))
    first = Worker(env)
    try:
        await wait_until(lambda: _true(len(stands.arrivals) >= len(expected) // 3), 120)
    finally:
        first.kill()
    at_kill = len(stands.arrivals)
    second = Worker(env)
    try:
        async def drained() -> bool:
            return await pending(pool) == 0
        await wait_until(drained, 120)
        await asyncio.sleep(0.5)
    finally:
        second.stop()
    stands.apns.delay = stands.fcm.delay = 0.0
    seen = Counter((nid, device) for nid, device, _ in stands.arrivals)
    lost = len(expected - set(seen))
    resent = sum(n - 1 for key, n in seen.items() if key in expected and n > 1)
    return len(expected), at_kill, lost, resent


async def run(args: argparse.Namespace) -> int:
    from storage.db import create_pool

    with tempfile.TemporaryDirectory(prefix="commons-push-bench-") as tmp:
        async with fresh_database(args.admin_dsn, "commons_push") as dsn:
            world = await seed(dsn, args.users)
            stands = Stands(Path(tmp))
            await stands.start()
            pool = await create_pool(dsn, size=4)
            try:
                print(f"push bench: {args.users} users, one device each (half APNs through "
                      f"APNS_PROXY over TLS + HTTP/2, half FCM); worker = commons worker, "
                      f"defaults PUSH_BATCH_SIZE=100 PUSH_CONCURRENCY=32", flush=True)
                n, wall, cpu = await throughput(pool, world, stands, args.rounds, False)
                print(f"reference, no provider (database side only): {n} pushes, "
                      f"{n / wall:,.0f}/s wall, {n / cpu:,.0f} per worker CPU-second",
                      flush=True)
                n, wall, cpu = await throughput(pool, world, stands, args.rounds, True)
                print(f"throughput, both stand-ins: {n} pushes, {n / wall:,.0f}/s wall, "
                      f"{n / cpu:,.0f} per worker CPU-second ({cpu:.2f} CPU-s)", flush=True)
                n, p50, p99, worst = await latency(pool, world, stands, args.rate,
                                                   args.seconds)
                print(f"latency at {args.rate:.0f}/s for {args.seconds:.0f} s: {n} pushes, "
                      f"commit to provider p50 {p50:.0f} ms, p99 {p99:.0f} ms, "
                      f"max {worst:.0f} ms", flush=True)
                n, at_kill, lost, resent = await kill(pool, world, stands, args.kill_pushes)
                print(f"SIGKILL mid-batch: {n} pushes, worker killed after {at_kill} "
                      f"arrived; {lost} lost; {resent} re-sent (same apns-id / collapse id)",
                      flush=True)
            finally:
                await pool.close()
                await stands.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3,
                        help="notifications per user in the throughput phase")
    parser.add_argument("--rate", type=float, default=500.0, help="pushes per second")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--kill-pushes", type=int, default=3000)
    parser.add_argument("--admin-dsn", default=os.environ.get(
        "COMMONS_BENCH_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"))
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
