"""REST benchmark: the real server on real PostgreSQL against a bare aiohttp floor.

    .venv/bin/python bench/rest.py [--seconds N] [--concurrency 64] [--users 200]

What it does, in one run (about 30 s with the defaults on an idle machine):

1. Creates a fresh database `commons_bench_<random>` on the PostgreSQL of DATABASE_URL (else
   postgres@127.0.0.1:5432, else one started as `make test` does), migrates it, and seeds
   one community with an admin and 200 users (managers, follows, two custom fields with
   values; `app.seed.seed_demo`). Passwords are hashed at the production Argon2id cost (the
   defaults of `Settings`). The database is dropped at the end, whatever happens.
2. Starts the real server, `commons serve` (one process, no Redis: the in-process rate limiter,
   with the per-user request limit lifted so the load is not throttled), on a free port.
3. Starts the floor: a bare aiohttp app in its own process that answers each scenario's path
   with the very bytes the real server answered (same status, same Content-Type), with no
   middleware, no database and no authentication. What the real server costs above the floor
   is the price of Commons (auth, SQL, rendering); what both pay is aiohttp plus the client.
4. For every scenario, drives the real server and then the floor with the same load: N
   concurrent keep-alive connections (aiohttp client, one coroutine per connection, each
   sending its next request as soon as the previous answer is read), a warm-up second that is
   not counted, then `--seconds` of measurement. Reports requests per second, p50 and p99
   latency, and the ratio of the server's req/s to the floor's.
5. The cost of authentication: sequential requests to GET /api/userinfo as users whose
   password the server has not verified yet (a full Argon2id verify at production cost: a cold
   credentials cache) and then again as the same users (warm cache).

Set-up on a 2-core machine: the load generator (this process) and each server are separate
processes. Unless --no-pin, the server under test is pinned to CPU 0 and this process to CPU 1
(os.sched_setaffinity), so they do not share a core; PostgreSQL is not pinned and takes what it
needs from both. The client runs on one core, so with a fast enough server (the floor) the
client itself is part of the limit: the floor is "the best this client sees from aiohttp",
measured in the same conditions, which is what the ratio is for.

Scenarios are a list of (name, method, path, body) in SCENARIOS; add endpoints there (a body
is sent as JSON). `--only NAME` runs a subset.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import multiprocessing
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import aiohttp  # noqa: E402
import asyncpg  # noqa: E402
import orjson  # noqa: E402
from aiohttp import web  # noqa: E402

DOMAIN = "bench.example"
ADMIN_EMAIL = "admin@bench.example"
ADMIN_PASSWORD = "bench admin password"


@dataclass(frozen=True)
class Scenario:
    name: str
    method: str
    path: str
    body: Any = None  # sent as JSON when not None


SCENARIOS: list[Scenario] = [
    Scenario("users?per_page=20", "GET", "/api/users?per_page=20"),
    Scenario("userinfo", "GET", "/api/userinfo"),
    # The messages engineer adds e.g.:
    # Scenario("messages", "GET", "/api/messages"),
    # Scenario("post message", "POST", "/api/messages", {"message": {"body": "Hello"}}),
]


@dataclass
class Result:
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        index = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))
        return ordered[index] * 1000


# --- database -------------------------------------------------------------------------------


def with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + name))


@contextlib.asynccontextmanager
async def fresh_database(admin_dsn: str) -> AsyncIterator[str]:
    name = f"commons_bench_{secrets.token_hex(6)}"
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    try:
        yield with_database(admin_dsn, name)
    finally:
        conn = await asyncpg.connect(admin_dsn)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


async def seed(dsn: str, users: int) -> dict[str, Any]:
    from app.actions.communities import create_community
    from app.config import Settings
    from app.passwords import Passwords
    from app.seed import DEMO_PASSWORD, seed_demo
    from migrations import apply_migrations
    from storage.db import create_pool

    await apply_migrations(dsn)
    passwords = Passwords(Settings().argon2)  # production cost
    pool = await create_pool(dsn, size=2)
    try:
        await create_community(
            pool, passwords, name="Bench", domain=DOMAIN, admin_email=ADMIN_EMAIL,
            admin_password=ADMIN_PASSWORD, base_url=f"https://{DOMAIN}",
        )
        summary = await seed_demo(pool, passwords, domain=DOMAIN, users=users)
        logins = [r["email"] for r in await pool.fetch(
            "SELECT email FROM users WHERE email <> $1 ORDER BY id", ADMIN_EMAIL)]
        follows = await pool.fetchval("SELECT count(*) FROM follows")
        values = await pool.fetchval("SELECT count(*) FROM custom_field_values")
    finally:
        await pool.close()
    return {**summary, "logins": logins, "password": DEMO_PASSWORD, "follows": follows,
            "custom_values": values}


# --- servers --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pin(pid: int, cpu: int) -> bool:
    try:
        if cpu in os.sched_getaffinity(0) or cpu < (os.cpu_count() or 1):
            os.sched_setaffinity(pid, {cpu})
            return True
    except (AttributeError, OSError):
        pass
    return False


@contextlib.contextmanager
def commons_server(dsn: str, port: int, data_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "COMMONS_DATA_DIR": str(data_dir),
        "COMMONS_SECRET_KEY": "bench",
        "COMMONS_RATE_LIMIT_REQUESTS": str(10**9),
        "COMMONS_LOG_LEVEL": "WARNING",
    }
    env.pop("REDIS_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--no-bootstrap"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        yield proc
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes] | multiprocessing.process.BaseProcess) -> None:
    if isinstance(proc, subprocess.Popen):
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    else:
        if proc.is_alive():
            proc.terminate()
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()


def _floor_main(port: int, answers: dict[tuple[str, str], tuple[int, str, bytes]]) -> None:
    """The floor: a bare aiohttp handler per path returning the recorded bytes."""

    def handler_for(status: int, ctype: str, body: bytes) -> Any:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(status=status, body=body, headers={"Content-Type": ctype})

        return handler

    app = web.Application()
    for (method, path), (status, ctype, body) in answers.items():
        app.router.add_route(method, path, handler_for(status, ctype, body))
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


async def wait_until_up(url: str, proc: Any, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            alive = proc.poll() is None if isinstance(proc, subprocess.Popen) else proc.is_alive()
            if not alive:
                err = proc.stderr.read().decode() if isinstance(proc, subprocess.Popen) \
                    and proc.stderr else ""
                raise RuntimeError(f"server exited early: {err[-2000:]}")
            try:
                async with session.get(url) as resp:
                    await resp.read()
                    return
            except aiohttp.ClientError:
                await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {seconds} s")


# --- load -----------------------------------------------------------------------------------


def basic(login: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{login}:{password}".encode()).decode()


async def load(
    base: str, scenario: Scenario, headers: dict[str, str], concurrency: int,
    warmup: float, seconds: float,
) -> Result:
    result = Result()
    data = orjson.dumps(scenario.body) if scenario.body is not None else None
    req_headers = dict(headers)
    if data is not None:
        req_headers["Content-Type"] = "application/json"
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    url = base + scenario.path
    async with aiohttp.ClientSession(connector=connector) as session:
        start = time.perf_counter()
        measure_from = start + warmup
        end = measure_from + seconds

        async def worker() -> None:
            while True:
                t0 = time.perf_counter()
                if t0 >= end:
                    return
                try:
                    async with session.request(scenario.method, url, data=data,
                                               headers=req_headers) as resp:
                        await resp.read()
                        status = resp.status
                except aiohttp.ClientError:
                    status = 0
                t1 = time.perf_counter()
                if t0 >= measure_from and t1 <= end:
                    result.requests += 1
                    result.latencies.append(t1 - t0)
                    result.statuses[status] = result.statuses.get(status, 0) + 1
                    if not 200 <= status < 300:
                        result.errors += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    result.seconds = seconds
    return result


async def record(base: str, scenario: Scenario, headers: dict[str, str]
                 ) -> tuple[int, str, bytes]:
    data = orjson.dumps(scenario.body) if scenario.body is not None else None
    h = dict(headers)
    if data is not None:
        h["Content-Type"] = "application/json"
    async with aiohttp.ClientSession() as session, session.request(
        scenario.method, base + scenario.path, data=data, headers=h
    ) as resp:
        return resp.status, resp.headers.get("Content-Type", "application/json"), \
            await resp.read()


async def auth_cost(base: str, logins: list[str], password: str) -> tuple[list[float],
                                                                           list[float]]:
    cold: list[float] = []
    warm: list[float] = []
    async with aiohttp.ClientSession() as session:
        for login in logins:
            headers = {"Authorization": basic(login, password)}
            for bucket in (cold, warm):
                t0 = time.perf_counter()
                async with session.get(base + "/api/userinfo", headers=headers) as resp:
                    await resp.read()
                    if resp.status != 200:
                        raise RuntimeError(f"userinfo as {login}: {resp.status}")
                bucket.append((time.perf_counter() - t0) * 1000)
    return cold, warm


# --- main -----------------------------------------------------------------------------------


def row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(
        zip(cells, widths, strict=True)))


async def run(args: argparse.Namespace) -> int:
    scenarios = [s for s in SCENARIOS if not args.only or s.name in args.only]
    if not scenarios:
        print(f"no scenario named {args.only}; have {[s.name for s in SCENARIOS]}")
        return 2
    # DATABASE_URL's server, else 127.0.0.1:5432, else the one the test set-up starts (the
    # system cluster or the embedded PostgreSQL wheel): the same search as `make test`.
    from tests.servers import ensure_postgres

    admin_dsn = ensure_postgres()
    cpus = os.cpu_count() or 1
    pinning = not args.no_pin and cpus >= 2
    t_start = time.monotonic()
    async with fresh_database(admin_dsn) as dsn:
        seeded = await seed(dsn, args.users)
        print(f"seeded {seeded['users_created']} users, {seeded['follows']} follows, "
              f"{seeded['custom_values']} custom field values "
              f"({time.monotonic() - t_start:.1f} s)")
        port, floor_port = free_port(), free_port()
        base, floor_base = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{floor_port}"
        headers = {"Authorization": basic(ADMIN_EMAIL, ADMIN_PASSWORD)}
        data_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"commons-bench-{os.getpid()}"
        with commons_server(dsn, port, data_dir) as server:
            await wait_until_up(base + "/api/openapi.json", server)
            if pinning:
                pin(server.pid, 0)
                pin(0, 1)
            answers: dict[tuple[str, str], tuple[int, str, bytes]] = {}
            for scenario in scenarios:
                status, ctype, body = await record(base, scenario, headers)
                if not 200 <= status < 300:
                    raise RuntimeError(f"{scenario.name}: {status} {body[:300]!r}")
                answers[(scenario.method, scenario.path.split("?")[0])] = (status, ctype, body)

            ctx = multiprocessing.get_context("spawn")
            floor = ctx.Process(target=_floor_main, args=(floor_port, answers), daemon=True)
            floor.start()
            try:
                await wait_until_up(floor_base + "/", floor)  # 404 is fine: it is up
                if pinning and floor.pid:
                    pin(floor.pid, 0)
                results: list[tuple[Scenario, Result, Result, int]] = []
                for scenario in scenarios:
                    ours = await load(base, scenario, headers, args.concurrency, args.warmup,
                                      args.seconds)
                    bare = await load(floor_base, scenario, headers, args.concurrency,
                                      args.warmup, args.seconds)
                    size = len(answers[(scenario.method, scenario.path.split("?")[0])][2])
                    results.append((scenario, ours, bare, size))
                cold, warm = await auth_cost(base, seeded["logins"][: args.auth_samples],
                                             seeded["password"])
            finally:
                stop(floor)

    print()
    print(f"Commons REST benchmark: {args.concurrency} concurrent keep-alive connections, "
          f"{args.warmup:g} s warm-up + {args.seconds:g} s per run, {cpus} CPU(s), "
          + ("server pinned to CPU 0, client to CPU 1" if pinning else "no CPU pinning"))
    widths = [22, 7, 9, 9, 9, 10, 9, 9, 7]
    print(row(["endpoint", "bytes", "req/s", "p50 ms", "p99 ms", "floor r/s", "floor p50",
               "floor p99", "ratio"], widths))
    for scenario, ours, bare, size in results:
        ratio = ours.rps / bare.rps if bare.rps else float("nan")
        print(row([f"{scenario.method} {scenario.name}", str(size), f"{ours.rps:.0f}",
                   f"{ours.percentile(50):.1f}", f"{ours.percentile(99):.1f}",
                   f"{bare.rps:.0f}", f"{bare.percentile(50):.1f}",
                   f"{bare.percentile(99):.1f}", f"{ratio:.2f}"], widths))
        for label, res in (("server", ours), ("floor", bare)):
            if res.errors:
                print(f"  ! {label}: {res.errors} non-2xx answers {res.statuses}")
    print()
    print(f"auth (GET /api/userinfo, sequential, {len(cold)} users): cold credentials cache "
          f"(full Argon2id verify) p50 {statistics.median(cold):.1f} ms, "
          f"warm p50 {statistics.median(warm):.1f} ms "
          f"(x{statistics.median(cold) / statistics.median(warm):.0f})")
    load1, load5, _ = os.getloadavg()
    print(f"total {time.monotonic() - t_start:.1f} s; load average at the end {load1:.1f} "
          f"(1 min), {load5:.1f} (5 min): other work on the machine skews every figure")
    failed = any(r.errors for _, ours, bare, _ in results for r in (ours, bare))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="uncounted seconds per run")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--users", type=int, default=200, help="users to seed")
    parser.add_argument("--auth-samples", type=int, default=5,
                        help="users whose first (cold) and second (warm) request are timed")
    parser.add_argument("--only", action="append", help="run only this scenario (repeatable)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    args = parser.parse_args(argv)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
