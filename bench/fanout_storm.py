"""Reconnect storm: how long S websockets take to connect at once, beside a bare aiohttp floor.

    .venv/bin/python bench/fanout_storm.py [--sockets 5000] [--replay 100] [--workers 2]
                                           [--clients 2] [--concurrency 1000] [--profile DIR]

Everything runs on 127.0.0.1 (PostgreSQL unless --admin-dsn, Redis unless --redis); about two
minutes on 2 cores at the defaults.

1. A fresh database (dropped at the end) with S users in one conversation (bench/fanout.py's
   seed: passwords at the cheapest Argon2id cost).
2. floor: bench/fanout_servers.py floor, --workers processes on one port (SO_REUSEPORT): no
   auth, no database; with `since` it sends --replay frames of a Commons event's size.
3. commons: `commons serve --workers N`. The storms, each from --clients client processes
   (bench/fanout_storm_client.py), every socket opened at the same instant: `first` (cold
   caches), then --replay remarks are posted while nobody is connected, then `since` (every
   socket resumes from before them: welcome + the replay) and `reconnect` (no since). A socket
   counts once it has its welcome (and its replay).
4. restart at the PRODUCTION Argon2 cost (app/config.py's defaults): the servers stop, every
   user's password is re-hashed at that cost, the shared verified-credentials cache in Redis
   is filled as S earlier verifications would have left it (the same keyed digests; the S
   Argon2 runs of "earlier today" are skipped, S x the cold verify printed), servers start
   fresh and S Basic clients reconnect. One cold verify is timed in the same run.

Prints each storm's seconds and the servers' CPU seconds, each beside the floor's and as a
ratio to it (on a loaded machine the CPU ratio is the steadier figure), the servers' CPU
milliseconds per socket beside the floor's, and met/missed
against the targets of issue 13: S=5,000 within 1.5 s with and without since; the restart at
production cost within 3 s. --profile DIR records py-spy profiles of the servers during the
commons storms (py-spy record --subprocesses) into DIR.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(REPO_ROOT), str(BENCH_DIR)]

import aiohttp  # noqa: E402
import orjson  # noqa: E402
from bench_db import fresh_database  # noqa: E402
from fanout import (  # noqa: E402
    ADMIN_EMAIL,
    CHEAP_ARGON2,
    DOMAIN,
    PASSWORD,
    basic,
    cpu_seconds,
    free_port,
    local_only,
    raise_fd_limit,
    seed,
    workdir,
)
from fanout_client import Target  # noqa: E402
from fanout_storm_client import client_main  # noqa: E402

TARGET_STORM_SECONDS = 1.5
TARGET_RESTART_SECONDS = 3.0
TARGET_SOCKETS = 5000
SECRET_KEY = "fanout-storm"


@dataclass
class Servers:
    """One `serve --workers N` (or N floor processes on one port) and its logs."""

    processes: list[subprocess.Popen[bytes]]
    port: int
    log: Path

    def pids(self) -> list[int]:
        """Every server process: the ones started and their children (the workers)."""
        found: list[int] = []
        for process in self.processes:
            found.append(process.pid)
            with contextlib.suppress(OSError):
                path = Path(f"/proc/{process.pid}/task/{process.pid}/children")
                found += [int(p) for p in path.read_text().split()]
        return found

    def cpu(self) -> float:
        total = 0.0
        for pid in self.pids():
            with contextlib.suppress(OSError):
                total += cpu_seconds(pid)
        return total

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(2)
        for process in self.processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def errors(self) -> str:
        """The servers' WARNING and ERROR lines: how many, and the last ones."""
        with contextlib.suppress(OSError):
            lines = self.log.read_text(errors="replace").splitlines()
            bad = [line for line in lines if " ERROR " in line or " WARNING " in line]
            if bad:
                return f"{len(bad)} WARNING/ERROR lines in the servers' log; the last:\n" + \
                    "\n".join(bad[-4:])
        return ""

    def tail(self) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
        return ""


def start_commons(dsn: str, redis_url: str, prefix: str, work: Path, workers: int,
                  production: bool) -> Servers:
    port = free_port()
    log = work / f"commons-{port}.log"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("S3_", "AWS_", "COMMONS_ARGON2_"))}
    env.update({
        "DATABASE_URL": dsn, "REDIS_URL": redis_url, "COMMONS_REDIS_PREFIX": prefix,
        "COMMONS_DATA_DIR": str(work / "data"), "COMMONS_SECRET_KEY": SECRET_KEY,
        "COMMONS_LOG_LEVEL": "WARNING", "COMMONS_RATE_LIMIT_REQUESTS": str(10**9),
        "COMMONS_RATE_LIMIT_FAILED_LOGINS": str(10**9),
        **({} if production else CHEAP_ARGON2),
    })
    command = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1",
               "--port", str(port), "--no-bootstrap", "--workers", str(workers)]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return Servers([process], port, log)


@contextlib.asynccontextmanager
async def commons_running(dsn: str, redis_url: str, prefix: str, work: Path, workers: int,
                          *, production: bool) -> AsyncIterator[Servers]:
    """`start_commons`, up and answering; stopped after, with its warnings printed."""
    commons = start_commons(dsn, redis_url, prefix, work, workers, production)
    try:
        await wait_until_up(commons, "/api/userinfo",
                            {"Host": DOMAIN, "Authorization": basic(ADMIN_EMAIL)})
        yield commons
    finally:
        commons.stop()
        if commons.errors():
            print(commons.errors(), flush=True)


def start_floor(redis_url: str, prefix: str, work: Path, workers: int, replay: int,
                replay_bytes: int) -> Servers:
    port = free_port()
    log = work / f"floor-{port}.log"
    processes = []
    with log.open("wb") as out:
        for _ in range(workers):
            processes.append(subprocess.Popen(
                [sys.executable, str(BENCH_DIR / "fanout_servers.py"), "floor", "--port",
                 str(port), "--redis", redis_url, "--channel", f"{prefix}:floor",
                 "--reuse-port", "--replay", str(replay), "--replay-bytes", str(replay_bytes)],
                cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            ))
    return Servers(processes, port, log)


async def wait_until_up(servers: Servers, path: str, headers: dict[str, str]) -> None:
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in servers.processes):
                raise RuntimeError(f"server exited early:\n{servers.tail()}")
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
                async with session.get(f"http://127.0.0.1:{servers.port}{path}",
                                       headers=headers,
                                       timeout=aiohttp.ClientTimeout(total=2)) as resp:
                    await resp.read()
                    if resp.status < 500:
                        return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"servers did not answer within 60 s:\n{servers.tail()}")


class Clients:
    def __init__(self, count: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.pipes: list[Connection] = []
        self.processes: list[Any] = []
        for _ in range(count):
            parent, child = ctx.Pipe()
            process = ctx.Process(target=client_main, args=(child,), daemon=True)
            process.start()
            self.pipes.append(parent)
            self.processes.append(process)

    async def ask(self, commands: list[tuple[Any, ...]], within: float = 120) -> list[Any]:
        def one(pipe: Connection, command: tuple[Any, ...]) -> Any:
            pipe.send(command)
            if not pipe.poll(within):
                raise TimeoutError(f"a client did not answer {command[0]!r} in {within} s")
            return pipe.recv()

        return list(await asyncio.gather(*(asyncio.to_thread(one, p, c)
                                           for p, c in zip(self.pipes, commands, strict=True))))

    async def close(self) -> None:
        await self.ask([("quit",)] * len(self.pipes))
        for process in self.processes:
            process.join(5)


@dataclass
class Storm:
    name: str
    sockets: int
    ready: int
    seconds: float
    server_cpu: float
    errors: list[str]
    max_event_id: int


async def run_storm(name: str, clients: Clients, servers: Servers, targets: list[Target],
                    expect: int, concurrency: int) -> Storm:
    count = len(clients.pipes)
    cpu_before = servers.cpu()
    start_at = time.monotonic() + 0.5
    answers = await clients.ask([("storm", targets[i::count], expect, start_at, concurrency)
                                 for i in range(count)])
    cpu = servers.cpu() - cpu_before
    ready = sum(a[1] for a in answers)
    errors = [e for a in answers for e in a[2]]
    last = max(a[3] for a in answers)
    storm = Storm(name, len(targets), ready, last - start_at, cpu, errors,
                  max(a[4] for a in answers))
    print(f"  {name:34} {storm.seconds:6.2f} s  ready {ready:,}/{len(targets):,}  "
          f"server CPU {cpu:.1f} s" + (f"  errors: {errors[:2]}" if errors else ""),
          flush=True)
    await clients.ask([("close",)] * count)
    await asyncio.sleep(1.0)  # let the servers see every socket go
    return storm


def commons_targets(port: int, emails: list[str], since: int | None) -> list[Target]:
    path = "/api/realtime" if since is None else f"/api/realtime?since={since}"
    return [Target("127.0.0.1", port, path, {"Host": DOMAIN, "Authorization": basic(e)},
                   "commons") for e in emails]


def floor_targets(port: int, sockets: int, since: bool) -> list[Target]:
    path = "/ws?since=1" if since else "/ws"
    return [Target("127.0.0.1", port, path, {"Host": DOMAIN}, "floor")] * sockets


async def post_remarks(port: int, conversation_id: int, count: int) -> None:
    headers = {"Host": DOMAIN, "Authorization": basic(ADMIN_EMAIL),
               "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session:
        for n in range(count):
            body = orjson.dumps({"remark": {"text": f"missed remark {n} " + "x" * 120}})
            async with session.post(
                f"http://127.0.0.1:{port}/api/conversations/{conversation_id}/remarks",
                data=body, headers=headers,
            ) as resp:
                if resp.status != 201:
                    raise RuntimeError(f"POST remark: {resp.status} {await resp.text()}")


async def production_hashes(dsn: str, redis_url: str, prefix: str) -> tuple[float, float]:
    """Every user's password re-hashed at the production cost, and the shared cache filled as
    if each had verified earlier today. Returns (seconds, CPU seconds) of one cold verify."""
    from app.config import Settings
    from app.main import session_secret
    from app.passwords import Passwords, cache_key_from
    from storage.credentials_cache import CredentialsCache
    from storage.db import create_pool
    from storage.redis import RedisHealth, redis_client

    settings = Settings(secret_key=SECRET_KEY)
    passwords = Passwords(settings.argon2, key=cache_key_from(session_secret(settings)))
    stored = await passwords.hash(PASSWORD)
    began, cpu = time.monotonic(), time.process_time()
    assert await passwords.verify(0, stored, PASSWORD, epoch=-1)  # cold: a full Argon2id
    cold = (time.monotonic() - began, time.process_time() - cpu)
    pool = await create_pool(dsn, size=2)
    client = redis_client(redis_url, timeout=5)
    try:
        rows = await pool.fetch(
            "UPDATE users SET password_hash = $1 RETURNING id, session_epoch", stored)
        cache = CredentialsCache(client, prefix, RedisHealth(),
                                 settings.credentials_shared_cache_seconds)
        for row in rows:
            await cache.remember(
                passwords.digest(row["id"], row["session_epoch"], stored, PASSWORD))
    finally:
        await client.aclose()
        await pool.close()
    return cold


def verdict(seconds: float, target: float, sockets: int, needed: int) -> str:
    if sockets < needed:
        return f"n/a (S={sockets:,} < {needed:,})"
    return "met" if seconds <= target else "MISSED"


@contextlib.contextmanager
def profiling(servers: Servers, directory: Path | None, name: str) -> Any:
    if directory is None:
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    venv_spy = Path(sys.executable).parent / "py-spy"  # else one on PATH
    spy = str(venv_spy) if venv_spy.exists() else shutil.which("py-spy") or "py-spy"
    recorder = subprocess.Popen(
        [spy, "record", "--subprocesses", "--rate", "200", "--format", "raw",
         "-o", str(directory / f"{name}.txt"), "--pid", str(servers.processes[0].pid)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    try:
        yield
    finally:
        recorder.send_signal(2)
        with contextlib.suppress(subprocess.TimeoutExpired):
            recorder.wait(30)


async def run(args: argparse.Namespace) -> int:
    began = time.monotonic()
    raise_fd_limit(args.sockets * 2 + 1000)
    admin_dsn = local_only(args.admin_dsn, "PostgreSQL")
    redis_url = local_only(args.redis, "Redis")
    prefix = f"storm-{os.getpid()}"
    sockets = args.sockets
    results: dict[str, Storm] = {}
    clients = Clients(args.clients)
    try:
        with workdir() as work:
            async with fresh_database(admin_dsn, "commons_storm") as dsn:
                seeded = await seed(dsn, [sockets])
                emails = seeded.users[:sockets]
                print(f"seeded {sockets:,} users in {time.monotonic() - began:.1f} s; "
                      f"{args.workers} worker(s), {args.clients} client processes, "
                      f"{args.concurrency} handshakes in flight per client", flush=True)

                floor = start_floor(redis_url, prefix, work, args.workers, args.replay,
                                    args.replay_bytes)
                try:
                    await wait_until_up(floor, "/publish", {})
                    print("floor (bare aiohttp websockets)", flush=True)
                    results["floor"] = await run_storm(
                        "connect", clients, floor, floor_targets(floor.port, sockets, False),
                        0, args.concurrency)
                    results["floor since"] = await run_storm(
                        f"connect + {args.replay} replayed", clients, floor,
                        floor_targets(floor.port, sockets, True), args.replay,
                        args.concurrency)
                finally:
                    floor.stop()

                async with commons_running(dsn, redis_url, prefix, work, args.workers,
                                           production=False) as commons:
                    print("commons (cheapest Argon2id cost)", flush=True)
                    with profiling(commons, args.profile, "first"):
                        first = await run_storm(
                            "first connect (cold caches)", clients, commons,
                            commons_targets(commons.port, emails, None), 0, args.concurrency)
                    results["first"] = first
                    await post_remarks(commons.port, seeded.conversations[sockets], args.replay)
                    with profiling(commons, args.profile, "since"):
                        results["since"] = await run_storm(
                            f"reconnect + {args.replay} replayed", clients, commons,
                            commons_targets(commons.port, emails, first.max_event_id),
                            args.replay, args.concurrency)
                    with profiling(commons, args.profile, "reconnect"):
                        results["reconnect"] = await run_storm(
                            "reconnect", clients, commons,
                            commons_targets(commons.port, emails, None), 0, args.concurrency)

                cold = await production_hashes(dsn, redis_url, prefix)
                async with commons_running(dsn, redis_url, prefix, work, args.workers,
                                           production=True) as commons:
                    print("commons after a restart, PRODUCTION Argon2id cost; one cold verify "
                          f"{cold[0] * 1000:.0f} ms ({cold[1] * 1000:.0f} ms CPU): "
                          f"{sockets:,} of them would be {sockets * cold[1]:,.0f} CPU-seconds",
                          flush=True)
                    with profiling(commons, args.profile, "restart"):
                        results["restart"] = await run_storm(
                            "restart: Basic reconnect", clients, commons,
                            commons_targets(commons.port, emails, None), 0, args.concurrency)
    finally:
        await clients.close()

    load = os.getloadavg()
    print()
    print(f"Reconnect storm, S={sockets:,} sockets, {args.workers} worker(s); "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"{'storm':38} {'seconds':>8} {'floor':>7} {'ratio':>6} {'CPU s':>6} {'floor':>6} "
          f"{'ratio':>6} {'ms/sock':>7} {'floor':>6}  target")
    rows = [
        ("connect (first, cold caches)", "first", "floor", None),
        ("reconnect", "reconnect", "floor", TARGET_STORM_SECONDS),
        (f"reconnect + since ({args.replay} replayed)", "since", "floor since",
         TARGET_STORM_SECONDS),
        ("restart, production Argon2 cost", "restart", "floor", TARGET_RESTART_SECONDS),
    ]
    failed = False
    for label, key, floor_key, target in rows:
        storm, ref = results[key], results[floor_key]
        failed = failed or storm.ready < storm.sockets
        mark = ("" if target is None else
                f"<= {target} s: {verdict(storm.seconds, target, sockets, TARGET_SOCKETS)}")
        print(f"{label:38} {storm.seconds:8.2f} {ref.seconds:7.2f} "
              f"{storm.seconds / max(ref.seconds, 1e-9):6.1f} {storm.server_cpu:6.1f} "
              f"{ref.server_cpu:6.1f} {storm.server_cpu / max(ref.server_cpu, 1e-9):6.1f} "
              f"{storm.server_cpu * 1000 / storm.sockets:7.2f} "
              f"{ref.server_cpu * 1000 / ref.sockets:6.2f}  {mark}")
    print(f"total {time.monotonic() - began:.0f} s")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sockets", type=int, default=TARGET_SOCKETS)
    parser.add_argument("--replay", type=int, default=100, help="missed events per socket")
    parser.add_argument("--replay-bytes", type=int, default=420,
                        help="size of the floor's replayed frames (a Commons remark event)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=2, help="client processes")
    parser.add_argument("--concurrency", type=int, default=1000,
                        help="handshakes in flight per client process")
    parser.add_argument("--profile", type=Path, default=None,
                        help="record py-spy profiles of the commons storms into this directory")
    parser.add_argument("--admin-dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
