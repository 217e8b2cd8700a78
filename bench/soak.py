"""Soak test: 1,000 websockets plus mixed REST against one `commons serve`, for minutes, watching
for errors, latency drift and memory growth.

    .venv/bin/python bench/soak.py [--minutes 10] [--sockets 1000] [--rate 150] [--workers 16]

Everything runs on 127.0.0.1: PostgreSQL (--admin-dsn, default postgres@127.0.0.1:5432) and
Redis (--redis, default 127.0.0.1:6379; `--redis ''` runs without) as `make test` finds them.

1. Creates a fresh database `commons_soak_<random>` (dropped at the end, whatever happens),
   migrates it and seeds one community: --sockets users (cheapest Argon2id cost, so connecting
   measures the server, not the hash), a public group all of them belong to, and a
   conversation between the poster and 50 of them.
2. Starts the real server, `commons serve` (one process, the per-user rate limit lifted).
3. Connects --sockets websockets (GET /api/realtime), one per user, and keeps them reading.
   A socket that closes, or answers anything but a frame, is an error and reconnects with
   `since` (so an error is counted once, not for the rest of the run).
4. Runs mixed REST in bounded loops: --workers coroutines share a schedule of --rate requests
   a second (a request whose turn is more than a second late is skipped, and counted as an
   error, so a slow server cannot make the run longer or the load heavier, nor pass by doing
   less), each picking the next scenario of
   SCENARIOS in turn: reads (userinfo, home stream, group stream, conversations, users,
   notifications) and writes (a group message, which every socket of the group receives; a
   comment; a like; a remark in the conversation).
5. Every minute prints the requests, errors, p50/p99 latency of that minute, websocket frames
   received and the server's RSS; at the end, the totals, p99 per minute, and the RSS growth
   from the end of the first minute (warm: caches, pools and sockets set up) to the end.
   Exit status 1 when there was any error.

The goal (issue 8): 0 errors and flat memory over 10 minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO_ROOT), str(Path(__file__).resolve().parent)]

import aiohttp  # noqa: E402
from bench_db import fresh_database  # noqa: E402

DOMAIN = "soak.example"
ADMIN_EMAIL = "admin@soak.example"
PASSWORD = "soak bench password"
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
CHEAP_ARGON2 = {"COMMONS_ARGON2_TIME_COST": "1", "COMMONS_ARGON2_MEMORY_KIB": "1024",
                "COMMONS_ARGON2_PARALLELISM": "1"}
CONVERSATION_MEMBERS = 50


@dataclass
class Seeded:
    users: list[str]  # e-mails, one socket each
    user_ids: list[int]
    group_id: int
    conversation_id: int


async def seed(dsn: str, count: int) -> Seeded:
    from app.actions.communities import create_community
    from app.config import Argon2Settings
    from app.passwords import Passwords
    from migrations import apply_migrations
    from storage import conversations
    from storage import users as user_store
    from storage.db import create_pool, transaction

    await apply_migrations(dsn)
    passwords = Passwords(Argon2Settings(time_cost=1, memory_kib=1024, parallelism=1))
    pool = await create_pool(dsn, size=2)
    try:
        community, admin = await create_community(
            pool, passwords, name="Soak", domain=DOMAIN, admin_email=ADMIN_EMAIL,
            admin_password=PASSWORD, base_url=f"https://{DOMAIN}",
        )
        password_hash = await passwords.hash(PASSWORD)
        emails: list[str] = []
        ids: list[int] = []
        async with transaction(pool) as conn:
            for n in range(count):
                email = f"user{n}@{DOMAIN}"
                row = await user_store.insert(
                    conn, community.id, email=email, username=f"user{n}", first_name="Soak",
                    last_name=f"User{n}", password_hash=password_hash,
                )
                emails.append(email)
                ids.append(row["id"])
            row = await conversations.insert(
                conn, community.id, name="Soak", private=False, key="soak",
                creator_id=admin["id"],
            )
            assert row is not None
            members = sorted([admin["id"], *ids[:CONVERSATION_MEMBERS]])
            await conversations.add_members(conn, community.id, row["id"], members)
            conversation_id = int(row["id"])
    finally:
        await pool.close()
    return Seeded(emails, ids, 0, conversation_id)


async def make_group(http: aiohttp.ClientSession, base: str, seeded: Seeded) -> None:
    """The group every user belongs to, through the API (the real actions)."""
    headers = {"Host": DOMAIN, "Authorization": basic(ADMIN_EMAIL)}
    async with http.post(f"{base}/api/groups", headers=headers,
                         json={"group": {"name": "Everyone"}}) as resp:
        assert resp.status == 201, await resp.text()
        seeded.group_id = int((await resp.json())["group"]["id"])
    entries = [{"user_id": user_id, "role": "member"} for user_id in seeded.user_ids]
    for first in range(0, len(entries), 500):  # the endpoint takes 500 at a time
        async with http.post(f"{base}/api/groups/{seeded.group_id}/memberships/add_members",
                             headers=headers,
                             json={"group_memberships": entries[first:first + 500]}) as resp:
            assert resp.status == 201, await resp.text()


# --- the server -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def basic(login: str) -> str:
    return "Basic " + base64.b64encode(f"{login}:{PASSWORD}".encode()).decode()


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE_KIB


class Server:
    def __init__(self, dsn: str, redis_url: str, workdir: Path) -> None:
        self.port = free_port()
        self.log = workdir / "server.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("S3_", "AWS_"))}
        env.pop("REDIS_URL", None)
        env.update({
            "DATABASE_URL": dsn, "COMMONS_DATA_DIR": str(workdir / "data"),
            "COMMONS_SECRET_KEY": "soak", "COMMONS_LOG_LEVEL": "WARNING",
            "COMMONS_RATE_LIMIT_REQUESTS": str(10**9), **CHEAP_ARGON2,
        })
        if redis_url:
            env.update({"REDIS_URL": redis_url,
                        "COMMONS_REDIS_PREFIX": f"soak-{os.getpid()}-{self.port}"})
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1",
                 "--port", str(self.port), "--no-bootstrap"],
                cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.base = f"http://127.0.0.1:{self.port}"

    @property
    def rss_mib(self) -> float:
        return rss_kib(self.process.pid) / 1024

    async def wait_until_up(self, session: aiohttp.ClientSession) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit("commons serve exited:\n" + self.tail())
            try:
                async with session.get(f"{self.base}/api/openapi.json") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
        raise SystemExit("commons serve did not answer in 60 s:\n" + self.tail())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return ""


# --- load -----------------------------------------------------------------------------------


@dataclass
class Minute:
    requests: int = 0
    errors: int = 0
    skipped: int = 0
    frames: int = 0
    latencies: list[float] = field(default_factory=list)  # ms

    def percentile(self, p: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


@dataclass
class Stats:
    minutes: list[Minute] = field(default_factory=lambda: [Minute()])
    error_samples: list[str] = field(default_factory=list)
    ws_errors: int = 0

    @property
    def now(self) -> Minute:
        return self.minutes[-1]

    def error(self, what: str) -> None:
        self.now.errors += 1
        if len(self.error_samples) < 20:
            self.error_samples.append(what)


class Sockets:
    """One websocket per user, read continuously; a drop is an error and reconnects."""

    def __init__(self, session: aiohttp.ClientSession, base: str, users: list[str],
                 stats: Stats) -> None:
        self.session = session
        self.base = base
        self.users = users
        self.stats = stats
        self.open = 0
        self.tasks: list[asyncio.Task[None]] = []
        self.stopping = False

    async def start(self) -> None:
        ready: list[asyncio.Future[None]] = []
        loop = asyncio.get_running_loop()
        for first in range(0, len(self.users), 100):
            batch = self.users[first:first + 100]
            for email in batch:
                future: asyncio.Future[None] = loop.create_future()
                ready.append(future)
                self.tasks.append(asyncio.create_task(self.run(email, future)))
            await asyncio.gather(*ready[-len(batch):])

    async def run(self, email: str, ready: asyncio.Future[None]) -> None:
        since: str | None = None
        headers = {"Host": DOMAIN, "Authorization": basic(email)}
        while not self.stopping:
            path = "/api/realtime" + (f"?since={since}" if since else "")
            try:
                async with self.session.ws_connect(self.base + path, headers=headers,
                                                   heartbeat=None) as ws:
                    self.open += 1
                    try:
                        welcome = await ws.receive_json(timeout=30)
                        since = since or welcome.get("last_event_id")
                        if not ready.done():
                            ready.set_result(None)
                        async for message in ws:
                            if message.type is aiohttp.WSMsgType.TEXT:
                                self.stats.now.frames += 1
                                frame = message.json()
                                if frame.get("id"):
                                    since = frame["id"]
                            else:
                                break
                    finally:
                        self.open -= 1
            except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                if not ready.done():
                    ready.set_exception(exc)
                    return
                if self.stopping:
                    return
                self.stats.ws_errors += 1
                self.stats.error(f"websocket {email}: {exc!r}")
                await asyncio.sleep(1)
                continue
            if self.stopping:
                return
            self.stats.ws_errors += 1
            self.stats.error(f"websocket {email} closed: {ws.close_code}")
            await asyncio.sleep(1)

    async def stop(self) -> None:
        self.stopping = True
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


Scenario = Callable[["Rest", str], Awaitable[aiohttp.ClientResponse]]


class Rest:
    """Mixed REST at a fixed rate shared by `workers` coroutines, until `deadline`."""

    def __init__(self, session: aiohttp.ClientSession, base: str, seeded: Seeded,
                 stats: Stats) -> None:
        self.session = session
        self.base = base
        self.seeded = seeded
        self.stats = stats
        self.message_ids: list[int] = []
        self.counter = itertools.count()
        self.rng = random.Random(1)

    def request(self, method: str, path: str, login: str, **kwargs: Any) -> Any:
        headers = {"Host": DOMAIN, "Authorization": basic(login)}
        return self.session.request(method, self.base + path, headers=headers, **kwargs)

    def user(self) -> str:
        return self.rng.choice(self.seeded.users)

    async def one(self, name: str) -> None:
        n = next(self.counter)
        group, cid = self.seeded.group_id, self.seeded.conversation_id
        poster = ADMIN_EMAIL if n % 2 else self.user()
        calls: dict[str, tuple[str, str, str, dict[str, Any]]] = {
            "userinfo": ("GET", "/api/userinfo", self.user(), {}),
            "home": ("GET", "/api/messages", self.user(), {}),
            "group stream": ("GET", f"/api/groups/{group}/messages", self.user(), {}),
            "conversations": ("GET", "/api/conversations", ADMIN_EMAIL, {}),
            "users": ("GET", f"/api/users?page={n % 5 + 1}", self.user(), {}),
            "notifications": ("GET", "/api/notifications", self.user(), {}),
            "post message": ("POST", "/api/messages", poster, {"json": {"message": {
                "body": f"soak {n} #soak", "group_id": group}}}),
            "remark": ("POST", f"/api/conversations/{cid}/remarks", ADMIN_EMAIL,
                       {"json": {"remark": {"text": f"soak {n}"}}}),
        }
        if self.message_ids:
            target = self.message_ids[-1 - n % min(len(self.message_ids), 50)]
            calls["comment"] = ("POST", f"/api/messages/{target}/comments", self.user(),
                                {"json": {"comment": {"text": f"soak {n}"}}})
            calls["like"] = ("POST", f"/api/messages/{target}/likes", self.user(), {})
        method, path, login, kwargs = calls.get(name, calls["userinfo"])
        began = time.monotonic()
        try:
            async with self.request(method, path, login, **kwargs) as resp:
                body = await resp.read()
                minute = self.stats.now
                minute.requests += 1
                minute.latencies.append((time.monotonic() - began) * 1000)
                # a second like by the same user is a documented 4xx, not a fault
                if resp.status >= 500 or (resp.status >= 400 and name != "like"):
                    self.stats.error(f"{method} {path}: {resp.status} {body[:200]!r}")
                elif name == "post message" and resp.status == 201:
                    self.message_ids.append(int((await resp.json())["message"]["id"]))
                    del self.message_ids[:-200]
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.stats.now.requests += 1
            self.stats.error(f"{method} {path}: {exc!r}")

    async def run(self, rate: float, workers: int, deadline: float) -> None:
        names = [n for n, _ in SCENARIOS for _ in range(_weight(n))]
        interval = 1.0 / rate
        start = time.monotonic()
        tick = itertools.count()

        async def worker() -> None:
            while True:
                i = next(tick)
                due = start + i * interval
                now = time.monotonic()
                if due >= deadline:
                    return
                if due > now:
                    await asyncio.sleep(due - now)
                elif now - due > 1.0:
                    # the server (or this client) fell behind: a request not made is an error
                    # (shown apart too), else an overloaded run would pass by doing less
                    self.stats.now.skipped += 1
                    self.stats.now.errors += 1
                    continue
                await self.one(names[i % len(names)])

        await asyncio.gather(*(worker() for _ in range(workers)))


SCENARIOS = [("userinfo", 2), ("home", 2), ("group stream", 1), ("conversations", 1),
             ("users", 1), ("notifications", 1), ("post message", 1), ("comment", 1),
             ("like", 1), ("remark", 1)]


def _weight(name: str) -> int:
    return dict(SCENARIOS)[name]


# --- main -----------------------------------------------------------------------------------


def local_only(url: str, what: str) -> str:
    host = urlsplit(url).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"{what} must be on 127.0.0.1, not {host}")
    return url


async def run(args: argparse.Namespace) -> int:
    began = time.monotonic()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    admin_dsn = local_only(args.admin_dsn, "PostgreSQL")
    redis_url = local_only(args.redis, "Redis") if args.redis else ""
    stats = Stats()
    with tempfile.TemporaryDirectory(prefix="commons-soak-") as tmp:
        async with fresh_database(admin_dsn, "commons_soak") as dsn:
            seeded = await seed(dsn, args.sockets)
            print(f"seeded {args.sockets:,} users in {time.monotonic() - began:.1f} s",
                  flush=True)
            server = Server(dsn, redis_url, Path(tmp))
            connector = aiohttp.TCPConnector(limit=0)
            timeout = aiohttp.ClientTimeout(total=30)
            try:
                async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
                    await server.wait_until_up(http)
                    await make_group(http, server.base, seeded)
                    sockets = Sockets(http, server.base, seeded.users, stats)
                    t0 = time.monotonic()
                    await sockets.start()
                    print(f"{sockets.open:,} websockets open in {time.monotonic() - t0:.1f} s; "
                          f"server RSS {server.rss_mib:.0f} MiB", flush=True)
                    rss = await soak(args, server, sockets, Rest(http, server.base, seeded,
                                                                  stats), stats)
                    await sockets.stop()
            finally:
                server.stop()
            if server.process.returncode not in (0, -signal.SIGINT):
                print("server exit status", server.process.returncode, server.tail())
    return report(stats, rss, time.monotonic() - began)


async def soak(args: argparse.Namespace, server: Server, sockets: Sockets, rest: Rest,
               stats: Stats) -> list[float]:
    """Run the REST load for args.minutes, printing a line per minute; RSS at each minute."""
    start = time.monotonic()
    deadline = start + args.minutes * 60
    load = asyncio.create_task(rest.run(args.rate, args.workers, deadline))
    rss: list[float] = []
    print(f"{'min':>3} {'requests':>8} {'errors':>6} {'skipped':>7} {'p50 ms':>7} "
          f"{'p99 ms':>7} {'ws frames':>9} {'ws open':>7} {'RSS MiB':>7}", flush=True)
    for number in range(1, args.minutes + 1):
        await asyncio.wait({load}, timeout=max(0.0, start + number * 60 - time.monotonic()))
        minute = stats.now
        rss.append(server.rss_mib)
        print(f"{number:>3} {minute.requests:>8,} {minute.errors:>6} {minute.skipped:>7} "
              f"{minute.percentile(50):>7.1f} {minute.percentile(99):>7.1f} "
              f"{minute.frames:>9,} {sockets.open:>7,} {rss[-1]:>7.0f}", flush=True)
        stats.minutes.append(Minute())
    await load
    return rss


def report(stats: Stats, rss: list[float], seconds: float) -> int:
    minutes = [m for m in stats.minutes if m.requests or m.frames]
    requests = sum(m.requests for m in minutes)
    errors = sum(m.errors for m in minutes)
    skipped = sum(m.skipped for m in minutes)
    frames = sum(m.frames for m in minutes)
    print()
    print(f"requests {requests:,}, errors {errors} (of which websocket {stats.ws_errors}, "
          f"skipped requests {skipped}), websocket frames {frames:,}")
    print("p99 per minute (ms): " + ", ".join(f"{m.percentile(99):.0f}" for m in minutes))
    if rss:
        growth = rss[-1] - rss[0]
        print(f"server RSS: {rss[0]:.0f} MiB after the first minute, {rss[-1]:.0f} MiB at the "
              f"end ({growth:+.1f} MiB), peak {max(rss):.0f} MiB")
    for sample in stats.error_samples:
        print("error:", sample)
    print(f"total {seconds:.0f} s; load average {os.getloadavg()[0]:.1f}")
    return 1 if errors else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--minutes", type=int, default=10, help="length of the soak")
    parser.add_argument("--sockets", type=int, default=1000, help="websockets (one per user)")
    parser.add_argument("--rate", type=float, default=150.0, help="REST requests a second")
    parser.add_argument("--workers", type=int, default=16, help="concurrent REST requests")
    parser.add_argument("--admin-dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0",
                        help="Redis URL ('' for none: the in-process hub)")
    args = parser.parse_args(argv)
    if args.minutes < 1:
        parser.error("--minutes must be at least 1")
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
