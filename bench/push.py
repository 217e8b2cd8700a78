"""Push delivery benchmark: `commons worker` against the APNs and FCM stand-ins.

    .venv/bin/python bench/push.py [--users 2000] [--rounds 3] [--rate 500] [--seconds 6]
                                   [--kill-pushes 3000] [--chat-members 10000] [--chat-runs 30]
                                   [--no-pin] [--worker-cpu 0] [--stands-cpu 1]

Everything runs on 127.0.0.1 (PostgreSQL on 127.0.0.1:5432 unless --admin-dsn); a default
run takes a few minutes on 2 cores.

1. A fresh database `commons_push_<random>` (dropped at the end), migrated, with one community
   and --users users, each with one push device: half APNs, half FCM.
2. The stand-ins run in this process: tests/push/fake_apns.py (TLS + HTTP/2, behind a local
   HTTP CONNECT proxy given to the worker as APNS_PROXY, its test CA trusted through
   SSL_CERT_FILE) and tests/push/fake_fcm.py (FCM v1 and the OAuth token endpoint, over HTTP).
   The worker is the real `commons worker` in its own process. Unless --no-pin, the worker is
   pinned to one core (--worker-cpu) and this process, with the stand-ins, to another
   (--stands-cpu), so that "pushes per second on one core" is a wall-clock figure of one core;
   PostgreSQL (shared with whatever else runs) is not pinned. The worker's CPU (utime + stime
   from /proc) is what "per CPU-second" divides by, and CPU / wall says how busy its core was.
3. Throughput: --rounds notifications per user (app.actions.notifications.notify_users, as a
   follow would: one transaction per round, so --users pushes per commit) are committed while
   the worker waits; printed: pushes per second (wall clock, first commit to last push
   received) and pushes per worker CPU-second. The floor in the same run: the same worker
   with no provider credentials (pushes only logged, at WARNING level: nothing written), i.e.
   the database side alone.
4. Latency: notifications committed at --rate per second for --seconds (in commits of a
   twentieth of a second's worth); p50 / p99 from commit to the stand-in receiving the push.
5. Kill: --kill-pushes pushes committed, the stand-ins answering after 20 ms; the worker is
   SIGKILLed once a third have arrived, and a new one started (PUSH_LEASE_SECONDS=2).
   Printed: pushes lost (never received), re-sent to the provider (received twice: at least
   once delivery, at most PUSH_CONCURRENCY), and shown twice on a device (a re-send whose
   collapse id differs from its first copy's: must be 0; see docs/notifications.md).
6. Group chat: POST chat message (app.actions.chat_messages.post_chat_message, the request's
   whole transaction) into groups of 10 to --chat-members members, every member with a push
   device, --chat-runs times each, sequentially, no worker running: p50 and max, and beside
   them what writing one push job per member device inside the request would have cost (the
   design not taken, rolled back). Then the worker's fan-out of one message to the largest
   group: seconds until every job was made (jobs per second) and until every push arrived.
7. The goals (2,000 pushes a second on one core, 0 lost, 0 duplicated), met or missed.
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
import orjson  # noqa: E402
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


@dataclass(frozen=True)
class Arrival:
    key: str
    """What the push is about: its notification id, or "chat:<chat message id>"."""
    device: str
    collapse: str
    """Its collapse id (APNs apns-collapse-id, FCM Android tag)."""
    at: float


def key_of(data: dict[str, Any]) -> str:
    if "chat_message_id" in data:
        return f"chat:{data['chat_message_id']}"
    return str(data.get("notification_id", ""))


class Stands:
    """Both stand-ins, with every push that arrived (Arrival)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.apns = FakeApns(record=False)
        self.fcm = FakeFcm()
        self.arrivals: list[Arrival] = []
        self.proxy: ConnectProxy | None = None
        self.runner: web.AppRunner | None = None
        self.ca = Path()

    async def start(self) -> None:
        self.ca, cert, key = make_certificates(self.tmp / "tls")
        original = self.apns._answer

        def answer(headers: dict[str, str], body: bytes) -> Any:
            result = original(headers, body)
            self.arrivals.append(Arrival(key_of(orjson.loads(body)), headers.get(":path", ""),
                                         headers.get("apns-collapse-id", ""), time.monotonic()))
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
                tag = message.get("android", {}).get("notification", {}).get("tag", "")
                self.arrivals.append(Arrival(key_of(message["data"]), message["token"], tag,
                                             time.monotonic()))
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
    cpu_set: set[int] | None = None
    """The cores `commons worker` runs on (None: not pinned)."""

    def __init__(self, env: dict[str, str]) -> None:
        cores = Worker.cpu_set

        def pin() -> None:
            if cores is not None:
                os.sched_setaffinity(0, cores)

        self.process = subprocess.Popen([sys.executable, "-m", "app.cli", "worker"],
                                        cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, preexec_fn=pin)

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
    waits = sorted((a.at - committed[a.key]) * 1000 for a in stands.arrivals
                   if a.key in committed)
    if not waits:
        raise SystemExit("latency: nothing arrived")
    return (len(waits), waits[len(waits) // 2], waits[min(len(waits) - 1,
                                                          int(len(waits) * 0.99))], waits[-1])


async def _true(value: bool) -> bool:
    return value


@dataclass
class Killed:
    pushes: int
    at_kill: int
    lost: int
    resent: int
    """Pushes the provider received more than once."""
    shown_twice: int
    """Re-sends whose collapse id differs from their first copy's (a device would show both)."""
    concurrency: int


async def kill(pool: asyncpg.Pool, world: World, stands: Stands, pushes: int) -> Killed:
    stands.arrivals.clear()
    stands.apns.delay = 0.02
    stands.fcm.delay = 0.02
    concurrency = 32
    env = stands.env(world.dsn, lease_seconds="2", concurrency=str(concurrency),
                     batch_size="100")
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
    seen = Counter((a.key, a.device) for a in stands.arrivals)
    collapse_ids: dict[tuple[str, str], set[str]] = {}
    for a in stands.arrivals:
        collapse_ids.setdefault((a.key, a.device), set()).add(a.collapse)
    lost = len(expected - set(seen))
    resent = sum(n - 1 for key, n in seen.items() if key in expected and n > 1)
    shown_twice = sum(len(ids) - 1 for key, ids in collapse_ids.items() if key in expected)
    return Killed(len(expected), at_kill, lost, resent, shown_twice, concurrency)


async def add_members(pool: asyncpg.Pool, world: World, count: int) -> list[int]:
    """Users enough for the largest chat group (every one with a push device, as in seed)."""
    missing = count - len(world.user_ids)
    if missing > 0:
        ids = [r["id"] for r in await pool.fetch(
            "INSERT INTO users (community_id, email, username, first_name, last_name, "
            "password_hash) SELECT $1, 'c' || n || '@' || $2, 'c' || n, 'Chat', 'N' || n, 'x' "
            "FROM generate_series(1, $3) AS n RETURNING id", world.community_id, DOMAIN,
            missing)]
        await pool.execute(
            "INSERT INTO client_devices (community_id, user_id, registration_id, platform) "
            "SELECT $1, u, CASE WHEN u % 2 = 0 THEN lpad(to_hex(u), 64, '0') "
            "ELSE 'fcm-' || u END, CASE WHEN u % 2 = 0 THEN 'apns' ELSE 'fcm' END "
            "FROM unnest($2::bigint[]) AS u", world.community_id, ids)
        world.user_ids.extend(ids)
    return world.user_ids[:count]


async def chat_group(pool: asyncpg.Pool, world: World, members: list[int]) -> int:
    """A chat-enabled group: the sender (its admin) and `members`."""
    gid: int = await pool.fetchval(
        "INSERT INTO groups (community_id, name, groupname, chat_enabled, creator_id) "
        "VALUES ($1, 'Chat ' || $3::int, 'chat' || $3::int, true, $2) RETURNING id",
        world.community_id, world.sender_id, len(members) + 1)
    await pool.execute(
        "INSERT INTO group_memberships (community_id, group_id, user_id, role) "
        "SELECT $1::bigint, $2::bigint, $3::bigint, 'admin' UNION ALL "
        "SELECT $1, $2, u, 'member' FROM unnest($4::bigint[]) AS u",
        world.community_id, gid, world.sender_id, members)
    return gid


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


@dataclass
class ChatCost:
    members: int
    p50: float
    worst: float
    per_member_p50: float | None = None
    """The design not taken: the same post plus one push job per member device, rolled back."""


async def chat_costs(pool: asyncpg.Pool, world: World, sizes: list[int], runs: int
                     ) -> list[ChatCost]:
    """Sequential POST chat message (the action) into groups of each size; ms."""
    from app.actions.chat_messages import post_chat_message
    from app.context import Viewer
    from push import jobs
    from realtime.hub import LocalHub

    viewer = Viewer(id=world.sender_id, community_id=world.community_id, role="tenant_admin")
    hub = LocalHub(pool)
    base = f"https://{DOMAIN}"
    out = []
    for size in sizes:
        members = await add_members(pool, world, size - 1)
        gid = await chat_group(pool, world, members)
        times = []
        for n in range(runs + 3):
            started = time.perf_counter()
            await post_chat_message(pool, hub, viewer, gid, f"hello {n}", (), base)
            if n >= 3:  # 3 warm-up posts
                times.append((time.perf_counter() - started) * 1000)
        cost = ChatCost(size, percentile(times, 50), max(times))
        if size == sizes[-1]:
            # what one job per member device written inside the request would add
            payload = {"title": "Chat", "body": "hello", "data": {}, "thread": None,
                       "check": {}}
            extra = []
            conn = await asyncpg.connect(world.dsn)  # no command timeout: it takes long
            try:
                for _ in range(min(runs, 10)):
                    tr = conn.transaction()
                    await tr.start()
                    started = time.perf_counter()
                    try:
                        made = jobs.jobs(world.community_id, "chat", members, [payload],
                                         notification_type="main", switch=None)
                        assert made is not None
                        await conn.execute(made.sql, *made.args)
                        extra.append((time.perf_counter() - started) * 1000)
                    finally:
                        await tr.rollback()
            finally:
                await conn.close()
            cost.per_member_p50 = cost.p50 + percentile(extra, 50)
        out.append(cost)
    await pool.execute("DELETE FROM push_chat_fanouts")  # not to be sent: measured the post
    return out


async def chat_fan_out(pool: asyncpg.Pool, world: World, stands: Stands, size: int
                       ) -> tuple[int, float, float]:
    """One chat message to the group of `size` members with the worker running: (pushes,
    seconds until every job was made, seconds until every push arrived)."""
    from app.actions.chat_messages import post_chat_message
    from app.context import Viewer
    from realtime.hub import LocalHub

    stands.arrivals.clear()
    gid = await pool.fetchval(
        "SELECT group_id FROM group_memberships GROUP BY group_id ORDER BY count(*) DESC "
        "LIMIT 1")
    worker = Worker(stands.env(world.dsn))
    try:
        await asyncio.sleep(3)
        viewer = Viewer(id=world.sender_id, community_id=world.community_id,
                        role="tenant_admin")
        start = time.monotonic()
        await post_chat_message(pool, LocalHub(pool), viewer, gid, "all hands", (),
                                f"https://{DOMAIN}")
        fanned = 0.0

        async def all_made() -> bool:
            nonlocal fanned
            left = await pool.fetchval("SELECT count(*) FROM push_chat_fanouts")
            if left == 0 and not fanned:
                fanned = time.monotonic() - start
            return bool(left == 0)

        async def all_arrived() -> bool:
            await all_made()
            return len(stands.arrivals) >= size - 1

        if not await wait_until(all_arrived, 300):
            raise SystemExit(f"chat: only {len(stands.arrivals)} of {size - 1} arrived")
        return len(stands.arrivals), fanned, time.monotonic() - start
    finally:
        worker.stop()


def verdict(ok: bool) -> str:
    return "MET" if ok else "MISSED"


async def run(args: argparse.Namespace) -> int:
    from storage.db import create_pool

    pinned = ""
    if not args.no_pin and len(os.sched_getaffinity(0)) >= 2:
        Worker.cpu_set = {args.worker_cpu}
        os.sched_setaffinity(0, {args.stands_cpu})
        pinned = (f"worker pinned to core {args.worker_cpu}, stand-ins and this process to "
                  f"core {args.stands_cpu}, PostgreSQL not pinned")
    with tempfile.TemporaryDirectory(prefix="commons-push-bench-") as tmp:
        async with fresh_database(args.admin_dsn, "commons_push") as dsn:
            world = await seed(dsn, args.users)
            stands = Stands(Path(tmp))
            await stands.start()
            pool = await create_pool(dsn, size=4)
            try:
                print(f"push bench: {args.users} users, one device each (half APNs through "
                      f"APNS_PROXY over TLS + HTTP/2, half FCM); worker = commons worker, "
                      f"defaults PUSH_BATCH_SIZE=100 PUSH_CONCURRENCY=32; "
                      f"{pinned or 'nothing pinned'}; load average "
                      f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
                n, floor_wall, floor_cpu = await throughput(pool, world, stands, args.rounds,
                                                            False)
                print(f"floor, no provider (database side only): {n} pushes, "
                      f"{n / floor_wall:,.0f}/s wall, {n / floor_cpu:,.0f} per worker "
                      f"CPU-second (worker busy {floor_cpu / floor_wall:.0%} of the time)",
                      flush=True)
                n, wall, cpu = await throughput(pool, world, stands, args.rounds, True)
                rate = n / wall
                print(f"throughput, both stand-ins: {n} pushes, {rate:,.0f}/s wall, "
                      f"{n / cpu:,.0f} per worker CPU-second ({cpu:.2f} CPU-s, worker busy "
                      f"{cpu / wall:.0%} of the time)", flush=True)
                n, p50, p99, worst = await latency(pool, world, stands, args.rate,
                                                   args.seconds)
                print(f"latency at {args.rate:.0f}/s for {args.seconds:.0f} s: {n} pushes, "
                      f"commit to provider p50 {p50:.0f} ms, p99 {p99:.0f} ms, "
                      f"max {worst:.0f} ms", flush=True)
                killed = await kill(pool, world, stands, args.kill_pushes)
                print(f"SIGKILL mid-batch: {killed.pushes} pushes, worker killed after "
                      f"{killed.at_kill} arrived; {killed.lost} lost; {killed.resent} re-sent "
                      f"to the provider (bound: PUSH_CONCURRENCY={killed.concurrency}); "
                      f"{killed.shown_twice} with another collapse id than their first copy "
                      f"(shown twice on a device)", flush=True)
                sizes = [n for n in (10, 100, 1_000, 10_000) if n < args.chat_members]
                costs = await chat_costs(pool, world, [*sizes, args.chat_members],
                                         args.chat_runs)
                print(f"POST chat message, push on (every member has a device), sequential, "
                      f"{args.chat_runs} runs:", flush=True)
                for c in costs:
                    print(f"  {c.members:>6,} members: p50 {c.p50:5.1f} ms, max "
                          f"{c.worst:5.1f} ms", flush=True)
                largest = costs[-1]
                print(f"  ratio {largest.members:,} / {costs[0].members:,} members: p50 "
                      f"{largest.p50 / costs[0].p50:.2f}x (goal: within 1.5x); one job per "
                      f"member device in the request instead would be p50 "
                      f"{largest.per_member_p50 or 0:.0f} ms at {largest.members:,}",
                      flush=True)
                n, fanned, delivered = await chat_fan_out(pool, world, stands,
                                                          args.chat_members)
                print(f"chat fan-out, one message to {args.chat_members:,} members: every job "
                      f"made in {fanned:.2f} s ({n / fanned:,.0f} jobs/s, interleaved with "
                      f"sending), all {n:,} pushes arrived in {delivered:.2f} s "
                      f"({n / delivered:,.0f}/s)", flush=True)
                one_core = "on one core" if pinned else "NOT pinned: not a one-core figure"
                print(f"goal 2,000 pushes/s {one_core}: {verdict(rate >= 2000)} "
                      f"({rate:,.0f}/s wall)", flush=True)
                print(f"goal 0 lost: {verdict(killed.lost == 0)}; goal 0 duplicated: "
                      f"{verdict(killed.resent == 0)} at the provider ({killed.resent} re-sent, "
                      f"within the bound {killed.concurrency}: "
                      f"{killed.resent <= killed.concurrency}), "
                      f"{verdict(killed.shown_twice == 0)} on devices ({killed.shown_twice} "
                      f"shown twice)", flush=True)
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
    parser.add_argument("--chat-members", type=int, default=10_000,
                        help="members of the largest chat group")
    parser.add_argument("--chat-runs", type=int, default=30)
    parser.add_argument("--no-pin", action="store_true",
                        help="leave the worker and the stand-ins to the scheduler")
    parser.add_argument("--worker-cpu", type=int, default=0)
    parser.add_argument("--stands-cpu", type=int, default=1)
    parser.add_argument("--admin-dsn", default=os.environ.get(
        "COMMONS_BENCH_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"))
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
