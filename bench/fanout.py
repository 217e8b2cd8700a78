"""Realtime fan-out benchmark: Commons beside a bare aiohttp floor and python-socketio.

    .venv/bin/python bench/fanout.py [--subscribers 1000,5000] [--rate 10] [--seconds 10]
                                     [--burst 500] [--clients 2] [--systems commons,floor,socketio]
                                     [--profile DIR]

Everything runs on 127.0.0.1 (PostgreSQL on 127.0.0.1:5432 unless --admin-dsn, Redis on
127.0.0.1:6379 unless --redis), bounded in time (a default run: about 3.5 minutes on 2 cores).

1. Creates a fresh database `commons_fanout_<random>` (dropped at the end, whatever happens),
   migrates it and seeds one community with max(S) users and, for each S, one conversation
   whose members are the first S users and the poster. Passwords are hashed at the cheapest
   Argon2id cost so that connecting thousands of sockets measures the hub, not the hash.
2. For each system and each S, starts TWO server processes on free ports (sharing Redis):
   - commons: `commons serve` (the real app; rate limit lifted; one Redis prefix per run);
   - floor: bench/fanout_servers.py floor: aiohttp websockets fed by one Redis subscription
     per process, each payload written as is to every socket, published by POST /publish;
   - socketio: bench/fanout_servers.py socketio: python-socketio (AsyncServer on aiohttp,
     AsyncRedisManager), a room joined by every client, emitted from POST /publish.
3. Connects S websocket subscribers, alternately to each server, from --clients client
   processes (bench/fanout_client.py, a minimal asyncio websocket client): first a tenth of
   them, then the rest; RSS per connection is the servers' RSS growth over the rest (idle)
   divided by their number (what the first few cost once, worker threads, database
   connections, is not a cost per connection).
4. Posts remarks through the REST API (commons) or POST /publish (the references; the body is
   a Commons event frame of the same size, so every system moves the same bytes), alternately
   to each server, at most 32 requests in flight: at --rate per second for --seconds, then a
   burst of --burst all due at once (capped at --max-burst-deliveries / S remarks). A remark
   whose turn comes after the phase's time limit (--seconds + 3 s; --burst-seconds) is not
   posted, and the table says so: that bounds the run when a server cannot keep up. Each text
   carries the time it was due (a monotonic clock shared by all processes); each client counts
   the latency from then to receipt.
5. Prints, per S and phase: deliveries per second, latency p50/p99 (and of the POSTs alone),
   server CPU microseconds per delivery (utime+stime of both server processes from /proc,
   over the phase, divided by the deliveries), RSS per connection, the ratios of Commons to
   each reference, deliveries missing, duplicated or out of order, and the client processes'
   CPU. On 2 cores everything (servers, clients, PostgreSQL, Redis) shares the CPUs: server
   CPU per delivery does not depend on the number of client processes (1, 2, 4 and 8 measured
   within about 10%), and 2 give the floor its best throughput (more compete with the
   servers for the same cores), hence the default --clients 2.
6. Prints issue 13's targets with their figure and met or missed: RSS per idle websocket at
   most 18 KiB, burst CPU per delivery at most 1.2x the floor's (docs/reconnect.md, "Idle
   sockets and bursts"). --profile DIR records py-spy (raw stacks, one file per commons
   server) during each burst; sampling costs the servers CPU, so quote an unprofiled run.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import multiprocessing
import os
import re
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(REPO_ROOT), str(BENCH_DIR)]

import aiohttp  # noqa: E402
import orjson  # noqa: E402
from bench_db import fresh_database  # noqa: E402
from fanout_client import BIN_MS, BINS, Target, client_main  # noqa: E402

DOMAIN = "fanout.example"
ADMIN_EMAIL = "poster@fanout.example"
PASSWORD = "fanout bench password"
SYSTEMS = ("commons", "floor", "socketio")
BURST_CONCURRENCY = 32
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
# issue 13: fan-out memory and bursts
RSS_TARGET_KIB = 18.0
BURST_CPU_TARGET = 1.2
CHEAP_ARGON2 = {"COMMONS_ARGON2_TIME_COST": "1", "COMMONS_ARGON2_MEMORY_KIB": "1024",
                "COMMONS_ARGON2_PARALLELISM": "1"}


# --- database -------------------------------------------------------------------------------


@dataclass
class Seeded:
    users: list[str]  # e-mails of the subscribers, in order
    conversations: dict[int, int]  # S -> conversation id


async def seed(dsn: str, sizes: list[int]) -> Seeded:
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
            pool, passwords, name="Fanout", domain=DOMAIN, admin_email=ADMIN_EMAIL,
            admin_password=PASSWORD, base_url=f"https://{DOMAIN}",
        )
        password_hash = await passwords.hash(PASSWORD)
        emails: list[str] = []
        ids: list[int] = []
        async with transaction(pool) as conn:
            for n in range(max(sizes)):
                email = f"sub{n}@{DOMAIN}"
                row = await user_store.insert(
                    conn, community.id, email=email, username=f"sub{n}", first_name="Sub",
                    last_name=f"Scriber{n}", password_hash=password_hash,
                )
                emails.append(email)
                ids.append(row["id"])
            made: dict[int, int] = {}
            for size in sizes:
                members = sorted([admin["id"], *ids[:size]])
                row = await conversations.insert(
                    conn, community.id, name=f"Fanout {size}", private=False,
                    # (a stand-in key: a real one for thousands of members exceeds the index)
                    key=f"fanout:{size}", creator_id=admin["id"],
                )
                assert row is not None
                await conversations.add_members(conn, community.id, row["id"], members)
                made[size] = int(row["id"])
    finally:
        await pool.close()
    return Seeded(emails, made)


# --- processes ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def basic(login: str) -> str:
    return "Basic " + base64.b64encode(f"{login}:{PASSWORD}".encode()).decode()


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE_KIB


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return ""


@dataclass
class System:
    name: str
    dsn: str
    redis_url: str
    workdir: Path
    prefix: str = field(default_factory=lambda: f"fanout-{secrets.token_hex(4)}")

    @property
    def dialect(self) -> str:
        return self.name

    def start(self, index: int) -> Server:
        port = free_port()
        log = self.workdir / f"{self.name}-{index}-{port}.log"
        if self.name == "commons":
            env = {k: v for k, v in os.environ.items() if not k.startswith(("S3_", "AWS_"))}
            env.update({
                "DATABASE_URL": self.dsn, "REDIS_URL": self.redis_url,
                "COMMONS_REDIS_PREFIX": self.prefix,
                "COMMONS_DATA_DIR": str(self.workdir / f"data-{index}"),
                "COMMONS_SECRET_KEY": "fanout", "COMMONS_LOG_LEVEL": "WARNING",
                "COMMONS_RATE_LIMIT_REQUESTS": str(10**9), **CHEAP_ARGON2,
            })
            command = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1",
                       "--port", str(port), "--no-bootstrap"]
        else:
            env = dict(os.environ)
            command = [sys.executable, str(BENCH_DIR / "fanout_servers.py"), self.name,
                       "--port", str(port), "--redis", self.redis_url,
                       "--channel", f"{self.prefix}:{self.name}"]
        with log.open("wb") as out:
            process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return Server(process, port, log)

    def ws_target(self, port: int, email: str) -> Target:
        if self.name == "commons":
            return Target("127.0.0.1", port, "/api/realtime",
                          {"Host": DOMAIN, "Authorization": basic(email)}, "commons")
        if self.name == "floor":
            return Target("127.0.0.1", port, "/ws", {"Host": DOMAIN}, "floor")
        return Target("127.0.0.1", port, "/socket.io/?EIO=4&transport=websocket",
                      {"Host": DOMAIN}, "socketio")

    def post_request(self, base: str, conversation_id: int, marker: str,
                     template: bytes) -> tuple[str, bytes, dict[str, str]]:
        if self.name == "commons":
            body = orjson.dumps({"remark": {"text": marker}})
            return (f"{base}/api/conversations/{conversation_id}/remarks", body,
                    {"Host": DOMAIN, "Authorization": basic(ADMIN_EMAIL),
                     "Content-Type": "application/json"})
        return (f"{base}/publish", template.replace(b"@MARKER@", marker.encode()),
                {"Content-Type": "application/json"})


async def wait_until_up(server: Server, session: aiohttp.ClientSession, path: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited early:\n{server.tail()}")
        with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
            async with session.get(server.base + path,
                                   timeout=aiohttp.ClientTimeout(total=2)) as resp:
                await resp.read()
                return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{server.base} did not answer within 60 s:\n{server.tail()}")


# --- clients --------------------------------------------------------------------------------


class Clients:
    """The client processes and their pipes."""

    def __init__(self, targets: list[Target], count: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.pipes: list[Connection] = []
        self.processes: list[multiprocessing.process.BaseProcess] = []
        for i in range(count):
            parent, child = ctx.Pipe()
            process = ctx.Process(target=client_main, args=(child, targets[i::count]),
                                  daemon=True)
            process.start()
            self.pipes.append(parent)
            self.processes.append(process)

    async def ask(self, *command: Any, within: float = 120) -> list[Any]:
        def one(pipe: Connection) -> Any:
            pipe.send(command)
            if not pipe.poll(within):
                raise TimeoutError(f"a client did not answer {command[0]!r} in {within} s")
            return pipe.recv()

        return list(await asyncio.gather(*(asyncio.to_thread(one, p) for p in self.pipes)))

    async def delivered(self, phase: str) -> tuple[int, float, int]:
        """(deliveries of `phase` so far, client CPU seconds, sockets the server closed)."""
        answers = await self.ask("progress")
        return (sum(a[1].get(phase, 0) for a in answers), sum(a[2] for a in answers),
                sum(a[3] for a in answers))

    async def wait_for(self, phase: str, expected: int, within: float) -> int:
        deadline = time.monotonic() + within
        while True:
            count, _, _ = await self.delivered(phase)
            if count >= expected or time.monotonic() > deadline:
                return count
            await asyncio.sleep(0.05)

    async def close(self) -> float:
        cpu = 0.0
        with contextlib.suppress(Exception):
            cpu = sum(a[1] for a in await self.ask("close", within=10))
        for process in self.processes:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()
        return cpu


# --- measuring ------------------------------------------------------------------------------


@dataclass
class PhaseResult:
    remarks: int  # posted
    planned: int
    deliveries: int
    expected: int
    seconds: float
    server_cpu: float
    client_cpu: float
    duplicates: int
    out_of_order: int
    hist: array[int]
    post_ms: list[float]

    def post_percentile(self, p: float) -> float:
        if not self.post_ms:
            return float("nan")
        ordered = sorted(self.post_ms)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    @property
    def per_second(self) -> float:
        return self.deliveries / self.seconds if self.seconds else 0.0

    @property
    def cpu_us_per_delivery(self) -> float:
        return self.server_cpu / self.deliveries * 1e6 if self.deliveries else float("nan")

    def percentile(self, p: float) -> float:
        total = sum(self.hist)
        if not total:
            return float("nan")
        rank, seen = p / 100 * total, 0
        for index, count in enumerate(self.hist):
            seen += count
            if seen >= rank:
                return (index + 1) * BIN_MS
        return BINS * BIN_MS


@dataclass
class RunResult:
    system: str
    subscribers: int
    connected: int
    connect_seconds: float
    rss_per_connection_kib: float
    phases: dict[str, PhaseResult]
    closed_by_server: int
    sample: bytes | None


def server_cpu(servers: list[Server]) -> float:
    return sum(cpu_seconds(s.process.pid) for s in servers)


async def post_all(
    session: aiohttp.ClientSession, system: System, servers: list[Server], conversation: int,
    phase: str, count: int, template: bytes, *, rate: float | None,
    within: float | None = None,
) -> list[float]:
    """Post `count` remarks (at `rate` per second, else at once), at most 32 in flight; a
    remark whose turn comes after `within` seconds is not posted (an overloaded server would
    otherwise stretch the run without bound). The latencies of the POSTs made, in ms, from the
    moment each remark was due (waiting for a free slot counts)."""
    latencies: list[float] = []
    gate = asyncio.Semaphore(BURST_CONCURRENCY)
    began = time.monotonic()
    deadline = began + within if within is not None else None

    async def one(seq: int) -> None:
        sent = time.monotonic_ns()
        async with gate:
            if deadline is not None and time.monotonic() > deadline:
                return
            url, body, headers = system.post_request(
                servers[seq % len(servers)].base, conversation,
                f"fnmk.{phase}.{seq}.{sent}.x", template,
            )
            async with session.post(url, data=body, headers=headers) as resp:
                await resp.read()
                if resp.status not in (201, 204):
                    raise RuntimeError(f"{system.name} POST {url}: {resp.status}")
            latencies.append((time.monotonic_ns() - sent) / 1e6)

    tasks = []
    for seq in range(count):
        if rate:
            delay = began + seq / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(seq)))
    await asyncio.gather(*tasks)
    return latencies


async def measure_phase(
    session: aiohttp.ClientSession, system: System, servers: list[Server], clients: Clients,
    conversation: int, subscribers: int, phase: str, count: int, template: bytes,
    rate: float | None, within: float,
) -> PhaseResult:
    cpu0 = server_cpu(servers)
    _, client0, _ = await clients.delivered(phase)
    began = time.monotonic_ns()
    post_ms = await post_all(session, system, servers, conversation, phase, count, template,
                             rate=rate, within=within)
    expected = len(post_ms) * subscribers
    # (bounded: what has not arrived by then counts as not delivered)
    delivered = await clients.wait_for(phase, expected, within=10 + expected / 20_000)
    cpu1 = server_cpu(servers)
    _, client1, _ = await clients.delivered(phase)
    reports = [a[1] for a in await clients.ask("report", phase)]
    hist = array("I", bytes(4 * BINS))
    last, duplicates, out_of_order = 0, 0, 0
    for report in reports:
        if report["hist"] is not None:
            part = array("I")
            part.frombytes(report["hist"])
            for i, v in enumerate(part):
                if v:
                    hist[i] += v
        last = max(last, report["last"])
        duplicates += report["duplicates"]
        out_of_order += report["out_of_order"]
    seconds = (last - began) / 1e9 if last else 0.0
    return PhaseResult(len(post_ms), count, delivered, expected, seconds, cpu1 - cpu0,
                       client1 - client0, duplicates, out_of_order, hist, post_ms)


async def run_one(
    system: System, subscribers: int, seeded: Seeded, args: argparse.Namespace,
    template: bytes,
) -> RunResult:
    conversation = seeded.conversations[subscribers]
    servers = [system.start(0), system.start(1)]
    clients: Clients | None = None
    try:
        connector = aiohttp.TCPConnector(limit=BURST_CONCURRENCY * 2)
        async with aiohttp.ClientSession(connector=connector) as session:
            probe = "/api/openapi.json" if system.name == "commons" else "/"
            await asyncio.gather(*(wait_until_up(s, session, probe) for s in servers))
            # Warm both servers (imports, pools, the hub's stream) before the RSS baseline.
            warm = [system.ws_target(s.port, seeded.users[0]) for s in servers]
            warm_clients = Clients(warm, 1)
            await warm_clients.ask("connect", 0)
            await post_all(session, system, servers, conversation, "z", 2, template, rate=None)
            await warm_clients.close()

            targets = [system.ws_target(servers[i % 2].port, seeded.users[i])
                       for i in range(subscribers)]
            clients = Clients(targets, args.clients)
            # A tenth of the sockets first: what the servers grow by for the first few
            # (worker threads, database connections) is not a cost per connection.
            first = await clients.ask("connect", 0, within=300)
            await asyncio.sleep(0.5)
            rss0 = sum(rss_kib(s.process.pid) for s in servers)
            rest = await clients.ask("connect", 1, within=300)
            connected = sum(a[1] for a in first + rest)
            added = sum(a[1] for a in rest)
            connect_seconds = max(a[3] for a in first) + max(a[3] for a in rest)
            errors = [e for a in first + rest for e in a[2]]
            if connected < subscribers:
                print(f"  ! {system.name}: {subscribers - connected} sockets failed to connect: "
                      f"{errors[:3]}", flush=True)
            await asyncio.sleep(1.0)
            rss1 = sum(rss_kib(s.process.pid) for s in servers)

            await post_all(session, system, servers, conversation, "w", 3, template, rate=None)
            await clients.wait_for("w", 3 * connected, within=20)
            phases: dict[str, PhaseResult] = {}
            rate_count = int(args.rate * args.seconds)
            phases["rate"] = await measure_phase(
                session, system, servers, clients, conversation, connected, "r", rate_count,
                template, args.rate, args.seconds + 3,
            )
            burst = max(1, min(args.burst, args.max_burst_deliveries // max(1, subscribers)))
            with profiling(servers if system.name == "commons" else [], args.profile,
                           f"burst-{subscribers}"):
                phases["burst"] = await measure_phase(
                    session, system, servers, clients, conversation, connected, "b", burst,
                    template, None, args.burst_seconds,
                )
            _, _, closed = await clients.delivered("r")
            sample = (await clients.ask("report", "r"))[0][2]
    finally:
        if clients is not None:
            await clients.close()
        for server in servers:
            server.stop()
    return RunResult(system.name, subscribers, connected, connect_seconds,
                     (rss1 - rss0) / max(1, added), phases, closed, sample)


@contextlib.contextmanager
def profiling(servers: list[Server], directory: Path | None, name: str) -> Iterator[None]:
    """py-spy (raw stacks, one file per server) on `servers` while the block runs; its
    sampling costs the servers CPU too, so a profiled run's figures are not the ones to quote."""
    if directory is None or not servers:
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    recorders = [subprocess.Popen(
        [spy, "record", "--rate", "200", "--format", "raw", "--nonblocking",
         "-o", str(directory / f"{name}-{i}.txt"), "--pid", str(server.process.pid)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i, server in enumerate(servers)]
    time.sleep(1.0)
    try:
        yield
    finally:
        for recorder in recorders:
            recorder.send_signal(signal.SIGINT)
        for recorder in recorders:
            with contextlib.suppress(subprocess.TimeoutExpired):
                recorder.wait(30)


def template_from(sample: bytes | None) -> bytes:
    """A publish body for the references: a Commons event frame with the marker in it."""
    if sample is None:  # Commons was not run: a frame of a typical size
        data = {"type": "event", "id": "1", "channel": "conversation:1",
                "event": "remark.created", "data": {"text": "@MARKER@", "pad": "x" * 1100}}
        return orjson.dumps(data)
    return re.sub(rb"fnmk\.[a-z]\.\d+\.\d+\.x", b"@MARKER@", sample)


# --- report ---------------------------------------------------------------------------------


def fmt(value: float, digits: int = 1) -> str:
    if value != value:  # nan
        return "-"
    return f"{value:,.{digits}f}"


def of_phase(phase: str, metric: Callable[[PhaseResult], float]) -> Callable[[RunResult], float]:
    return lambda r: metric(r.phases[phase])


def print_table(results: list[RunResult], args: argparse.Namespace) -> None:
    by = {(r.system, r.subscribers): r for r in results}
    systems = [s for s in args.systems if any(r.system == s for r in results)]
    refs = [s for s in systems if s != "commons"]
    header = ["", *systems, *[f"commons/{r}" for r in refs if "commons" in systems]]
    widths = [34, *[12] * (len(header) - 1)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    def row(label: str, value: Callable[[RunResult], float], digits: int = 1,
            ratio: bool = True) -> str:
        cells = [label]
        values = {}
        for s in systems:
            r = by.get((s, size))
            values[s] = value(r) if r else float("nan")
            cells.append(fmt(values[s], digits))
        if "commons" in systems:
            for ref in refs:
                ok = ratio and values[ref] and values[ref] == values[ref]
                cells.append(fmt(values["commons"] / values[ref], 2) if ok else "-")
        return line(cells)

    print()
    print(f"Fan-out: 2 server processes per system, {args.clients} client processes, "
          f"{os.cpu_count()} CPU(s) shared by servers, clients, PostgreSQL and Redis")
    print(line(header))
    for size in args.subscribers:
        print(f"-- {size:,} subscribers")
        print(row("sockets connected", lambda r: r.connected, 0, ratio=False))
        print(row("connect time s", lambda r: r.connect_seconds, 1))
        print(row("RSS per idle connection KiB *", lambda r: r.rss_per_connection_kib, 1))
        for phase, label in (("rate", f"rate {args.rate:g}/s x {args.seconds:g} s"),
                             ("burst", "burst")):
            print(f"   {label}")
            rows: list[tuple[str, Callable[[PhaseResult], float], int, bool]] = [
                ("  remarks posted", lambda ph: ph.remarks, 0, False),
                ("  remarks planned but not posted *", lambda ph: ph.planned - ph.remarks, 0,
                 False),
                ("  deliveries/s", lambda ph: ph.per_second, 0, True),
                ("  latency p50 ms", lambda ph: ph.percentile(50), 1, True),
                ("  latency p99 ms", lambda ph: ph.percentile(99), 1, True),
                ("  POST p50 ms", lambda ph: ph.post_percentile(50), 1, True),
                ("  POST p99 ms", lambda ph: ph.post_percentile(99), 1, True),
                ("  server CPU us/delivery", lambda ph: ph.cpu_us_per_delivery, 2, True),
                ("  client CPU % of server CPU", lambda ph: 100 * ph.client_cpu / ph.server_cpu
                 if ph.server_cpu else float("nan"), 0, False),
                ("  not delivered", lambda ph: ph.expected - ph.deliveries, 0, False),
                ("  duplicated", lambda ph: ph.duplicates, 0, False),
                ("  out of order (commons ids)", lambda ph: ph.out_of_order, 0, False),
            ]
            for label_, metric, digits, ratio in rows:
                print(row(label_, of_phase(phase, metric), digits, ratio))
    print()
    print("* RSS: marginal: the servers' RSS growth from 10% to 100% of the sockets (idle), "
          "divided by 90% of them")
    print("* not posted: a remark whose turn came after the phase's time limit (rate: --seconds "
          "+ 3 s, burst: --burst-seconds), i.e. the server could not keep up")
    print("Targets: CPU per delivery <= 1.5x floor and <= 1/3 of socketio; <= 20 KiB per idle "
          "connection; p99 < 50 ms at 1,000 subscribers and 10 remarks/s.")
    commons = [r for r in results if r.system == "commons"]
    issue13: list[str] = []
    for r in commons:
        verdicts = []
        floor = by.get(("floor", r.subscribers))
        sio = by.get(("socketio", r.subscribers))
        for phase in ("rate", "burst"):
            ours = r.phases[phase].cpu_us_per_delivery
            if floor:
                times = ours / floor.phases[phase].cpu_us_per_delivery
                verdicts.append(f"{phase} CPU {times:.2f}x floor "
                                f"({'ok' if times <= 1.5 else 'MISSED'})")
            if sio:
                times = ours / sio.phases[phase].cpu_us_per_delivery
                verdicts.append(f"{phase} CPU {times:.2f}x socketio "
                                f"({'ok' if times <= 1 / 3 else 'MISSED'})")
        rss = r.rss_per_connection_kib
        verdicts.append(f"RSS {rss:.1f} KiB/conn ({'ok' if rss <= 20 else 'MISSED'})")
        if floor:
            times = r.phases["burst"].cpu_us_per_delivery / floor.phases[
                "burst"].cpu_us_per_delivery
            issue13.append(f"burst CPU per delivery at {r.subscribers:,}: {times:.2f}x floor "
                           f"(target <= {BURST_CPU_TARGET}x: "
                           f"{'met' if times <= BURST_CPU_TARGET else 'MISSED'})")
        issue13.append(f"RSS per idle websocket at {r.subscribers:,}: {rss:.1f} KiB"
                       + (f" (floor {floor.rss_per_connection_kib:.1f})" if floor else "")
                       + f" (target <= {RSS_TARGET_KIB:g} KiB: "
                       f"{'met' if rss <= RSS_TARGET_KIB else 'MISSED'})")
        if r.subscribers == 1000 and args.rate == 10:
            p99 = r.phases["rate"].percentile(99)
            verdicts.append(f"p99 {p99:.1f} ms ({'ok' if p99 < 50 else 'MISSED'})")
        print(f"  commons at {r.subscribers:,}: " + "; ".join(verdicts))
    if issue13:
        print("Issue 13 targets (fan-out memory and bursts):")
        for verdict in issue13:
            print(f"  {verdict}")
    if commons and commons[0].sample:
        print(f"  event frame: {len(commons[0].sample)} bytes (the references publish the "
              "same bytes)")


# --- main -----------------------------------------------------------------------------------


def raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < needed:
        print(f"warning: the open-file limit is {hard}; {needed} sockets need more",
              file=sys.stderr)


def local_only(url: str, what: str) -> str:
    host = urlsplit(url).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"{what} must be on 127.0.0.1, not {host}")
    return url


@contextlib.contextmanager
def workdir() -> Iterator[Path]:
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="commons-fanout-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def run(args: argparse.Namespace) -> int:
    began = time.monotonic()
    raise_fd_limit(max(args.subscribers) * 2 + 1000)
    admin_dsn = local_only(args.admin_dsn, "PostgreSQL")
    redis_url = local_only(args.redis, "Redis")
    results: list[RunResult] = []
    template = template_from(None)
    with workdir() as work:
        async with fresh_database(admin_dsn, "commons_fanout") as dsn:
            seeded = await seed(dsn, sorted(set(args.subscribers)))
            print(f"seeded {max(args.subscribers):,} users and {len(args.subscribers)} "
                  f"conversation(s) in {time.monotonic() - began:.1f} s", flush=True)
            for name in args.systems:
                system = System(name, dsn, redis_url, work)
                for size in args.subscribers:
                    t0 = time.monotonic()
                    result = await run_one(system, size, seeded, args, template)
                    results.append(result)
                    if name == "commons" and result.sample is not None:
                        template = template_from(result.sample)
                    rate, burst = result.phases["rate"], result.phases["burst"]
                    print(f"{name:9} S={size:<6,} rate p99 {fmt(rate.percentile(99))} ms, "
                          f"{fmt(rate.cpu_us_per_delivery, 2)} us/delivery; burst "
                          f"{fmt(burst.per_second, 0)} deliveries/s, "
                          f"{fmt(burst.cpu_us_per_delivery, 2)} us/delivery "
                          f"({time.monotonic() - t0:.0f} s)", flush=True)
    print_table(results, args)
    load1, _, _ = os.getloadavg()
    print(f"total {time.monotonic() - began:.0f} s; load average {load1:.1f}")
    lost = any(p.deliveries < p.expected or p.duplicates or p.out_of_order for r in results
               for p in r.phases.values())
    return 1 if lost else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--subscribers", default="1000,5000",
                        help="comma-separated subscriber counts (default 1000,5000)")
    parser.add_argument("--rate", type=float, default=10.0, help="remarks per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the rate phase")
    parser.add_argument("--burst", type=int, default=500, help="remarks in the burst")
    parser.add_argument("--burst-seconds", type=float, default=6.0,
                        help="remarks of the burst not started by then are not posted")
    parser.add_argument("--max-burst-deliveries", type=int, default=250_000,
                        help="cap on burst remarks x subscribers (keeps large S short)")
    parser.add_argument("--clients", type=int, default=2, help="client processes")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="which of commons,floor,socketio to run")
    parser.add_argument("--profile", type=Path, default=None,
                        help="record py-spy profiles of the commons servers during each burst "
                             "into this directory")
    parser.add_argument("--admin-dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args(argv)
    args.subscribers = [int(s) for s in str(args.subscribers).split(",") if s.strip()]
    args.systems = [s.strip() for s in str(args.systems).split(",") if s.strip()]
    unknown = set(args.systems) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}")
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
