"""Does the per-community event counter limit writes? Remark throughput across 50 conversations
of ONE community against 50 conversations in 50 communities (issue 11).

    .venv/bin/python bench/event_counter.py [--seconds 15] [--conversations 50] [--rounds 2]

Event ids are per community, gap-free and in commit order, so the writers of one community
take turns on the community's row of realtime_event_counters for as long as it is locked:
until 0019 from the append (the transaction's last statement) to the client's COMMIT, now only
inside the COMMIT (storage/events.py). Writers of different communities never wait for each
other, so the 50-communities figure is the floor: the same work with no counter contention,
measured in the same run. If the counter were the limit, one community would be markedly
slower than 50, and its backends would be seen waiting for the lock (docs/decisions.md has
the figures).

What it does:
1. A fresh database on the PostgreSQL that `make test` uses (dropped at the end): community
   "one" with 2 x N users and N two-member conversations; N communities with 2 users and one
   conversation each.
2. `commons serve --workers 2` (Redis from `make test`'s set-up), cheap Argon2 (the
   credentials cache is warm after the first request anyway), rate limits lifted.
3. For each layout, in alternating rounds: N concurrent clients, each posting remarks into
   its own conversation (POST /api/conversations/:id/remarks, keep-alive, the next as soon
   as the answer is read): 1 s of warm-up, then --seconds measured.
4. Prints remarks/s, p50 and p99 latency, the server's CPU (both workers) and PostgreSQL's
   CPU (the bench database's backends) per remark, and how many backends were on average
   waiting for a lock (pg_stat_activity sampled every 20 ms) and how many were active.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO_ROOT), str(Path(__file__).resolve().parent)]

import aiohttp  # noqa: E402
import asyncpg  # noqa: E402
import rest  # noqa: E402
from bench_db import fresh_database  # noqa: E402
from rest import cpu_time, free_port, wait_until_up  # noqa: E402

PASSWORD = "event counter bench"
CHEAP_ARGON2 = {"COMMONS_ARGON2_TIME_COST": "1", "COMMONS_ARGON2_MEMORY_KIB": "1024",
                "COMMONS_ARGON2_PARALLELISM": "1"}


@dataclass(frozen=True)
class Poster:
    """One client: a user posting into one conversation of one community (Host header)."""

    host: str
    login: str
    conversation_id: int


@dataclass
class Result(rest.Result):
    """rest.Result (requests are remarks) plus what pg_stat_activity showed, every 20 ms."""

    lock_waiting: list[int] = field(default_factory=list)
    active: list[int] = field(default_factory=list)


# --- seed -----------------------------------------------------------------------------------


async def seed(dsn: str, conversations: int) -> dict[str, list[Poster]]:
    """Layout name -> its posters (one per conversation)."""
    from app.actions.communities import create_community
    from app.config import Argon2Settings
    from app.passwords import Passwords
    from migrations import apply_migrations
    from storage import conversations as conversation_store
    from storage import users as user_store
    from storage.db import create_pool, transaction

    await apply_migrations(dsn)
    passwords = Passwords(Argon2Settings(time_cost=1, memory_kib=1024, parallelism=1))
    password_hash = await passwords.hash(PASSWORD)
    pool = await create_pool(dsn, size=2)

    async def community(name: str, pairs: int) -> list[Poster]:
        domain = f"{name}.bench.example"
        made, _ = await create_community(
            pool, passwords, name=name, domain=domain, admin_email=f"admin@{domain}",
            admin_password=PASSWORD, base_url=f"https://{domain}",
        )
        posters: list[Poster] = []
        async with transaction(pool) as conn:
            for i in range(pairs):
                ids = []
                for side in ("a", "b"):
                    row = await user_store.insert(
                        conn, made.id, email=f"{side}{i}@{domain}", username=f"{side}{i}",
                        first_name=side.upper(), last_name=f"User{i}",
                        password_hash=password_hash,
                    )
                    ids.append(int(row["id"]))
                key = conversation_store.member_set_key(True, sorted(ids))
                conv = await conversation_store.insert(
                    conn, made.id, name=None, private=True, key=key, creator_id=ids[0])
                assert conv is not None
                await conversation_store.add_members(conn, made.id, conv["id"], sorted(ids))
                posters.append(Poster(domain, f"a{i}@{domain}", int(conv["id"])))
        return posters

    try:
        one = await community("one", conversations)
        many = [p for i in range(conversations) for p in await community(f"c{i}", 1)]
        await pool.execute("ANALYZE")
    finally:
        await pool.close()
    return {"1 community": one, f"{conversations} communities": many}


# --- server ---------------------------------------------------------------------------------


@contextlib.contextmanager
def serve(dsn: str, redis_url: str, port: int, data_dir: Path
          ) -> Iterator[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("S3_", "AWS_"))}
    env.update({
        "DATABASE_URL": dsn, "REDIS_URL": redis_url,
        "COMMONS_REDIS_PREFIX": f"bench-counter-{os.getpid()}",
        "COMMONS_DATA_DIR": str(data_dir), "COMMONS_SECRET_KEY": "bench",
        "COMMONS_RATE_LIMIT_REQUESTS": str(10**9), "COMMONS_LOG_LEVEL": "WARNING",
        **CHEAP_ARGON2,
    })
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--no-bootstrap", "--workers", "2"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        rest.stop(proc)


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (the workers of `serve --workers 2`), from /proc."""
    out = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                out += process_tree(int(child))
    return out


def cpu_of(pids: list[int]) -> float:
    return sum(cpu_time(p) or 0.0 for p in pids)


# --- load -----------------------------------------------------------------------------------


def basic(login: str) -> str:
    return "Basic " + base64.b64encode(f"{login}:{PASSWORD}".encode()).decode()


async def run_layout(
    base: str, dsn: str, server_pids: list[int], posters: list[Poster], seconds: float
) -> Result:
    result = Result(seconds=seconds)
    monitor = await asyncpg.connect(dsn)
    connector = aiohttp.TCPConnector(limit=len(posters))
    start = time.perf_counter()
    measure_from = start + 1.0
    end = measure_from + seconds
    n = 0
    async with aiohttp.ClientSession(connector=connector) as session:

        async def client(poster: Poster) -> None:
            nonlocal n
            url = f"{base}/api/conversations/{poster.conversation_id}/remarks"
            headers = {"Host": poster.host, "Authorization": basic(poster.login)}
            while (t0 := time.perf_counter()) < end:
                n += 1
                try:
                    async with session.post(url, headers=headers,
                                            json={"remark": {"text": f"remark {n}"}}) as resp:
                        await resp.read()
                        ok = resp.status == 201
                except aiohttp.ClientError:
                    ok = False
                t1 = time.perf_counter()
                if t0 >= measure_from and t1 <= end:
                    result.requests += 1
                    result.latencies.append(t1 - t0)
                    result.errors += not ok

        async def meter() -> None:
            await asyncio.sleep(max(0.0, measure_from - time.perf_counter()))
            # the backends of the server's pools, open by the end of the warm-up
            pg_pids = [r["pid"] for r in await monitor.fetch(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()")]
            cpu0, pg0 = cpu_of(server_pids), cpu_of(pg_pids)
            while time.perf_counter() < end:
                row = await monitor.fetchrow(
                    "SELECT count(*) FILTER (WHERE wait_event_type = 'Lock') AS waiting, "
                    "count(*) FILTER (WHERE state = 'active') AS active "
                    "FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid()")
                assert row is not None
                result.lock_waiting.append(row["waiting"])
                result.active.append(row["active"])
                await asyncio.sleep(0.02)
            result.cpu_seconds = cpu_of(server_pids) - cpu0
            result.pg_cpu_seconds = cpu_of(pg_pids) - pg0

        try:
            await asyncio.gather(meter(), *(client(p) for p in posters))
        finally:
            await monitor.close()
    return result


def line(name: str, r: Result) -> str:
    return (f"{name:16} {r.rps:8.1f} {r.percentile(50):7.1f} {r.percentile(99):7.1f} "
            f"{r.cpu_ms_per_request:10.2f} {r.pg_cpu_ms_per_request:8.2f} "
            f"{statistics.fmean(r.lock_waiting or [0]):9.2f} "
            f"{statistics.fmean(r.active or [0]):7.2f} {r.errors:6}")


async def run(args: argparse.Namespace) -> int:
    from tests.servers import ensure_postgres, ensure_redis

    admin_dsn, redis_url = ensure_postgres(), ensure_redis()
    results: dict[str, list[Result]] = {}
    with tempfile.TemporaryDirectory(prefix="commons-bench-counter-") as tmp:
        async with fresh_database(admin_dsn, "commons_bench_counter") as dsn:
            layouts = await seed(dsn, args.conversations)
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            with serve(dsn, redis_url, port, Path(tmp)) as server:
                await wait_until_up(base + "/api/openapi.json", server)
                await asyncio.sleep(1.0)  # both workers listening
                pids = process_tree(server.pid)
                for _ in range(args.rounds):
                    for name, posters in layouts.items():
                        r = await run_layout(base, dsn, pids, posters, args.seconds)
                        results.setdefault(name, []).append(r)
                        print(f"  {name}: {r.rps:.1f} remarks/s", flush=True)
    print(f"\n{args.conversations} clients, each posting into its own conversation; "
          f"commons serve --workers 2; {args.seconds:.0f} s x {args.rounds} rounds per layout")
    print(f"{'layout':16} {'remark/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'server ms':>10} "
          f"{'pg ms':>8} {'lockwait':>9} {'active':>7} {'errors':>6}")
    for name, rs in results.items():
        for i, r in enumerate(rs):
            print(line(f"{name} #{i + 1}", r))
    names = list(results)
    one = statistics.fmean(r.rps for r in results[names[0]])
    many = statistics.fmean(r.rps for r in results[names[1]])
    print(f"\nmean throughput: {names[0]} {one:.1f} remarks/s, {names[1]} (the floor: no "
          f"counter contention) {many:.1f} remarks/s, ratio {one / many:.2f}")
    load1, _, _ = os.getloadavg()
    print(f"load average {load1:.1f} on {os.cpu_count()} CPUs")
    return 1 if any(r.errors for rs in results.values() for r in rs) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
