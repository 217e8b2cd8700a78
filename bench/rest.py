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
   latency, the CPU time the server process spent per request (from /proc: less sensitive to
   other work on the machine than req/s), and the ratio of the server's req/s to the floor's.
   With `--workers N` (2 by default; 1 turns it off) every scenario also runs, right after,
   on a second server started as `commons serve --workers N` (N processes on one port, with
   Redis as a multi-process deployment needs it: `--redis-url`, keys under a prefix of their
   own), not pinned; its req/s and CPU per request (all its processes) are printed beside one
   worker's.
5. Issue 13's targets, each with its figure and "met" or "missed" (TARGETS): CPU per request,
   userinfo's ratio to its floor, and the SQL statements of one POST /api/messages, counted in
   this process by the app's query observer (as tests/app/views/test_statement_counts.py does).
6. The cost of authentication: sequential requests to GET /api/userinfo as users whose
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

The feed scenarios read and write messages: the seed also posts FEED_MESSAGES messages (by
various users; half of them in groups the admin belongs to, some by the admin, some
@mentioning the admin, the rest elsewhere in the company), each with 3 comments and 5 likes
and a #hashtag, written straight in SQL in one transaction (bodies rendered by the real
markup code), so that the admin's Home stream (`GET /api/messages`, 20 per page) shows 20
messages with their comments and likes. `POST /api/messages` posts a short text with a
#hashtag and an @mention of a seeded user through the real action (notifications included);
it adds a message per request, so the table grows during the run.

`--scale large` (issue 14) measures instead how the feed holds up as the community grows: it
seeds one database at small scale and one at large scale with bench/feed_seed.py (20,000 vs
1,000,000 messages, 100,000 users, 1,000 groups; `--comments`/`--likes` per message at both
sizes, 3 and 5 by default as the issue measures), serves both, and loads, each scenario at both
sizes in turns (`--slices` slices of each run, a slice at each size in turn, so that load from
elsewhere on the machine falls on both alike), page 1 and page 50 of Home, Company, the biggest
group's stream and @Mentions, a search, the notifications, the conversation list and the floor
(`/healthz`: the server answering without PostgreSQL). The seeded
databases are kept and reused by the next run (bench/feed_seed.py; the large seed takes about 20
minutes on 2 busy cores; `--fresh` seeds throwaway ones). Before measuring, every scenario runs
once at both sizes for `--warm-pass` seconds at full concurrency: every pooled connection has
then prepared each statement and PostgreSQL has settled on its cached plan (after 5 runs), and
the pages read are in memory at both sizes. It prints for each the req/s, p50, p99, the server's
CPU and PostgreSQL's CPU per request (its backends for the bench database, from /proc), at both
scales, the large/small ratio of the p50 and whether it meets the issue's 1.5x. Then it posts
messages into the biggest group (10,000 members or more at large scale) one at a time, through
HTTP, and prints their p50 against the issue's 50 ms. Besides the floor row, the two scales are each
other's reference.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO_ROOT), str(Path(__file__).resolve().parent)]

import aiohttp  # noqa: E402
import asyncpg  # noqa: E402
import orjson  # noqa: E402
from aiohttp import web  # noqa: E402
from bench_db import fresh_database  # noqa: E402

DOMAIN = "bench.example"
ADMIN_EMAIL = "admin@bench.example"
ADMIN_PASSWORD = "bench admin password"


@dataclass(frozen=True)
class Scenario:
    name: str
    method: str
    path: str
    body: Any = None  # sent as JSON when not None
    # sent with If-None-Match: the ETag the path answers with just before the run (a 304 is
    # then the expected answer; the floor answers 304 to any If-None-Match)
    conditional: bool = False
    # authenticated by the session cookie POST /api/authentication issues (how web clients
    # poll, and mobile ones should: docs/polling.md), instead of Basic
    session: bool = False


# Cheap polling (issue 13): a 304 costs at most this much server CPU per request.
NOT_MODIFIED_TARGET_MS = 0.15


@dataclass(frozen=True)
class Target:
    """An issue-13 target of a scenario: server CPU per request at most `cpu_ms`, or req/s at
    least `floor_ratio` times the floor's."""

    cpu_ms: float | None = None
    floor_ratio: float | None = None

    def judge(self, ours: Result, bare: Result) -> tuple[str, bool]:
        """(what was measured against what, met)."""
        if self.cpu_ms is not None:
            cpu = ours.cpu_ms_per_request
            return f"server CPU {cpu:.3f} ms per request (at most {self.cpu_ms} ms)", \
                cpu <= self.cpu_ms
        assert self.floor_ratio is not None
        ratio = ours.rps / bare.rps if bare.rps else float("nan")
        return f"{ratio:.3f}x the floor's req/s (at least {self.floor_ratio}x)", \
            ratio >= self.floor_ratio


# Issue 13's REST targets, by scenario name (the statement count of POST message: below).
TARGETS: dict[str, Target] = {
    "users?per_page=20": Target(cpu_ms=0.25),
    "userinfo": Target(floor_ratio=0.4),
    "messages": Target(cpu_ms=1.0),
    "messages 304": Target(cpu_ms=NOT_MODIFIED_TARGET_MS),
    "notifications 304": Target(cpu_ms=NOT_MODIFIED_TARGET_MS),
    "userinfo 304": Target(cpu_ms=NOT_MODIFIED_TARGET_MS),
    "userinfo 304, session": Target(cpu_ms=NOT_MODIFIED_TARGET_MS),
    "new message": Target(cpu_ms=0.8),
    "remark": Target(cpu_ms=0.6),
}
POST_STATEMENTS_TARGET = 8  # SQL statements per POST /api/messages


MENTIONED = "robin"  # a user the seed creates, @mentioned by the posting scenario
FEED_MESSAGES = 200
FEED_GROUPS = 4

SCENARIOS: list[Scenario] = [
    Scenario("users?per_page=20", "GET", "/api/users?per_page=20"),
    Scenario("userinfo", "GET", "/api/userinfo"),
    Scenario("messages", "GET", "/api/messages"),
    # before "new message", which changes what they show
    Scenario("messages 304", "GET", "/api/messages", conditional=True),
    Scenario("notifications 304", "GET", "/api/notifications", conditional=True),
    Scenario("userinfo 304", "GET", "/api/userinfo", conditional=True),
    Scenario("userinfo 304, session", "GET", "/api/userinfo", conditional=True, session=True),
    Scenario("new message", "POST", "/api/messages",
             {"message": {"body": f"Shipping the #release today, thanks @{MENTIONED}!"}}),
]

# POST remark (issue 13): into a conversation of the admin and one other user, made once the
# server is up (its id is not known before).
REMARK = "remark"


async def remark_scenario(base: str, headers: dict[str, str], other_email: str) -> Scenario:
    async with aiohttp.ClientSession() as session, session.post(
        base + "/api/conversations", headers=headers,
        json={"conversation": {"members_emails": other_email}},
    ) as resp:
        conversation_id = (await resp.json())["conversation"]["id"]
    return Scenario(REMARK, "POST", f"/api/conversations/{conversation_id}/remarks",
                    {"remark": {"text": "On my way, see you at the #release party"}})


@dataclass
class Result:
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    cpu_seconds: float | None = None  # the server process's CPU time over the measured span
    expected: int | None = None  # the status every answer should have (else any 2xx)
    pg_cpu_seconds: float | None = None  # PostgreSQL's backends' (when metered), same span

    def add(self, other: Result) -> Result:
        """This result and another run of the same scenario, as one."""
        def total(a: float | None, b: float | None) -> float | None:
            return None if a is None and b is None else (a or 0.0) + (b or 0.0)

        statuses = dict(self.statuses)
        for status, n in other.statuses.items():
            statuses[status] = statuses.get(status, 0) + n
        return Result(self.requests + other.requests, self.errors + other.errors,
                      self.seconds + other.seconds, self.latencies + other.latencies, statuses,
                      cpu_seconds=total(self.cpu_seconds, other.cpu_seconds),
                      expected=self.expected,
                      pg_cpu_seconds=total(self.pg_cpu_seconds, other.pg_cpu_seconds))

    @property
    def cpu_ms_per_request(self) -> float:
        if self.cpu_seconds is None or not self.requests:
            return float("nan")
        return self.cpu_seconds * 1000 / self.requests

    @property
    def pg_cpu_ms_per_request(self) -> float:
        if self.pg_cpu_seconds is None or not self.requests:
            return float("nan")
        return self.pg_cpu_seconds * 1000 / self.requests

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
        feed = await seed_feed(pool)
        # Planner statistics, as a database in service has them (autovacuum would analyze
        # the fresh tables only later, in the middle of the runs).
        await pool.execute("ANALYZE")
    finally:
        await pool.close()
    return {**summary, "logins": logins, "password": DEMO_PASSWORD, "follows": follows,
            "custom_values": values, **feed}


async def seed_feed(pool: asyncpg.Pool) -> dict[str, int]:
    """Groups (made by the real action, the admin their admin) and FEED_MESSAGES messages
    with 3 comments and 5 likes each, in SQL in one transaction."""
    import random
    from datetime import UTC, datetime, timedelta

    from app.actions.groups import GroupFields, create_group
    from app.context import Viewer
    from app.markup.entities import extract_hashtags
    from app.markup.html import MentionTarget, render_html
    from app.urls import user_url
    from storage import topics as topic_storage
    from storage import users as user_storage
    from storage.db import transaction

    rng = random.Random(7)
    admin = await pool.fetchrow(
        "SELECT id, community_id, username FROM users WHERE email = $1", ADMIN_EMAIL)
    assert admin is not None
    cid, admin_id = admin["community_id"], admin["id"]
    base = f"https://{DOMAIN}"
    viewer = Viewer(id=admin_id, community_id=cid, role="tenant_admin")
    groups = [
        (await create_group(pool, viewer, GroupFields(name=f"Bench team {i}")))["id"]
        for i in range(FEED_GROUPS)
    ]
    async with transaction(pool) as conn:
        await user_storage.insert(conn, cid, email=f"{MENTIONED}@{DOMAIN}",
                                  username=MENTIONED, first_name="Robin", last_name="Bench")
        people = [r["id"] for r in await conn.fetch(
            "SELECT id FROM users WHERE community_id = $1 AND id <> $2 ORDER BY id",
            cid, admin_id)]
        await conn.executemany(
            "INSERT INTO group_memberships (community_id, group_id, user_id) VALUES ($1, $2, $3)"
            " ON CONFLICT DO NOTHING",
            [(cid, g, p) for g in groups for p in people[:60]],
        )
        mention = {admin["username"].lower(): MentionTarget(
            "user", admin_id, admin["username"], user_url(base, admin_id, admin["username"]),
            f"/api/users/{admin_id}-{admin['username'].lower()}.json")}
        tags = ["release", "design", "support", "hiring", "ops"]
        topic_ids = dict(zip(tags, await topic_storage.upsert(conn, cid, tags, admin_id),
                             strict=True))
        now = datetime.now(UTC)
        comments_made = likes_made = 0
        for i in range(FEED_MESSAGES):
            kind = i % 8
            group_id = groups[i % FEED_GROUPS] if kind < 4 else None
            author = admin_id if kind == 4 else rng.choice(people[:60])
            tag = tags[i % len(tags)]
            body = f"Update {i} on the #{tag} work: see the notes and tell me what you think."
            if kind == 5:
                body = f"@{admin['username']} could you look at the #{tag} plan? ({i})"
            when = now - timedelta(minutes=10 * (FEED_MESSAGES - i))
            message_id = await conn.fetchval(
                "INSERT INTO messages (community_id, user_id, group_id, body, html_body, "
                "source, last_interacted_at, created_at, updated_at) "
                "VALUES ($1, $2, $3, $4, $5, 'api', $6, $6, $6) RETURNING id",
                cid, author, group_id, body, render_html(body, base_url=base, mentions=mention),
                when,
            )
            recipients: list[tuple[int | None, int | None, str, int]] = []
            if group_id is not None:
                recipients.append((None, group_id, "group", 0))
            if kind == 5:
                recipients.append((admin_id, None, "mention", 1000))
            await conn.executemany(
                "INSERT INTO message_recipients (community_id, message_id, user_id, group_id, "
                "reason, position) VALUES ($1, $2, $3, $4, $5, $6)",
                [(cid, message_id, *r) for r in recipients],
            )
            await conn.execute(
                "INSERT INTO message_topics (community_id, message_id, topic_id) "
                "VALUES ($1, $2, $3)", cid, message_id, topic_ids[extract_hashtags(body)[0]])
            for c in range(3):
                text = f"Comment {c} on {i}: agreed, let's do it."
                await conn.execute(
                    "INSERT INTO comments (community_id, message_id, user_id, text, html_body, "
                    "created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)",
                    cid, message_id, rng.choice(people), text,
                    render_html(text, base_url=base, mentions={}),
                    when + timedelta(minutes=c + 1),
                )
                comments_made += 1
            await conn.executemany(
                "INSERT INTO likes (community_id, user_id, message_id, created_at) "
                "VALUES ($1, $2, $3, $4)",
                [(cid, u, message_id, when + timedelta(minutes=5))
                 for u in rng.sample(people, 5)],
            )
            likes_made += 5
    return {"messages": FEED_MESSAGES, "comments": comments_made, "likes": likes_made,
            "groups": len(groups)}


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
def commons_server(
    dsn: str, port: int, data_dir: Path, workers: int = 1, redis_url: str | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """`commons serve`: one process without Redis, or `workers` processes (`serve --workers`,
    which needs Redis: its rate limits, hub and shared credentials cache are there)."""
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "COMMONS_DATA_DIR": str(data_dir),
        "COMMONS_SECRET_KEY": "bench",
        "COMMONS_RATE_LIMIT_REQUESTS": str(10**9),
        "COMMONS_LOG_LEVEL": "WARNING",
    }
    env.pop("REDIS_URL", None)
    if redis_url is not None:
        env["REDIS_URL"] = redis_url
        env["COMMONS_REDIS_PREFIX"] = f"bench-{os.getpid()}-{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--no-bootstrap", "--workers", str(workers)],
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
            tag = request.headers.get("If-None-Match")
            if tag is not None:  # a conditional scenario: what the server answers, a 304
                return web.Response(status=304, headers={"ETag": tag})
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


def cpu_time(pid: int | None) -> float | None:
    """User + system CPU seconds of a process so far (Linux /proc), else None."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (the worker processes of `serve --workers`), from /proc."""
    pids, i = [pid], 0
    while i < len(pids):
        try:
            pids += [int(c) for c in Path(
                f"/proc/{pids[i]}/task/{pids[i]}/children").read_text().split()]
        except (OSError, ValueError):
            pass
        i += 1
    return pids


def basic(login: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{login}:{password}".encode()).decode()


async def load(
    base: str, scenario: Scenario, headers: dict[str, str], concurrency: int,
    warmup: float, seconds: float, pid: int | None = None, pg_pids: list[int] | None = None,
    pg_dsn: str | None = None, if_none_match: str | None = None, tree: bool = False,
) -> Result:
    """`pg_pids`: PostgreSQL backends to meter; `pg_dsn`: meter the backends of that database
    as they are after the warm-up (the server's pool grows on demand). With `if_none_match`
    every request sends it, and every answer should be a 304. `tree`: the server's CPU is
    that of `pid` and its child processes (`serve --workers`)."""
    result = Result()
    data = orjson.dumps(scenario.body) if scenario.body is not None else None
    req_headers = dict(headers)
    if if_none_match is not None:
        req_headers["If-None-Match"] = if_none_match
        result.expected = 304
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
                    if (status != result.expected if result.expected is not None
                            else not 200 <= status < 300):
                        result.errors += 1

        async def cpu_meter() -> None:
            nonlocal pg_pids
            await asyncio.sleep(max(0.0, measure_from - time.perf_counter()))
            if pg_dsn is not None:
                pg_pids = await backend_pids(pg_dsn)
            pids = [] if pid is None else process_tree(pid) if tree else [pid]
            before = [cpu_time(p) for p in pids]
            pg_before = [cpu_time(p) for p in pg_pids or ()]
            await asyncio.sleep(max(0.0, end - time.perf_counter()))
            after = [cpu_time(p) for p in pids]
            pg_after = [cpu_time(p) for p in pg_pids or ()]
            if pids and None not in before and None not in after:
                result.cpu_seconds = sum(
                    (a or 0.0) - (b or 0.0) for a, b in zip(after, before, strict=True))
            if pg_pids:
                result.pg_cpu_seconds = sum(
                    (a or 0.0) - (b or 0.0) for a, b in zip(pg_after, pg_before, strict=True)
                    if a is not None and b is not None)

        await asyncio.gather(cpu_meter(), *(worker() for _ in range(concurrency)))
    result.seconds = seconds
    return result


async def session_headers(base: str) -> dict[str, str]:
    """The admin's session cookie, from POST /api/authentication, as request headers."""
    async with aiohttp.ClientSession() as session, session.post(
        base + "/api/authentication", headers={"Host": DOMAIN},
        json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD},
    ) as resp:
        await resp.read()
        if resp.status != 200 or "commons_session" not in resp.cookies:
            raise RuntimeError(f"POST /api/authentication: {resp.status}, no session cookie")
        cookie = resp.cookies["commons_session"].value
    return {"Cookie": f"commons_session={cookie}", "Host": DOMAIN}


async def etag_of(base: str, scenario: Scenario, headers: dict[str, str]) -> str:
    """The ETag `scenario`'s path answers with now."""
    async with aiohttp.ClientSession() as session, session.get(
        base + scenario.path, headers=headers
    ) as resp:
        await resp.read()
        if resp.status != 200 or "ETag" not in resp.headers:
            raise RuntimeError(f"{scenario.name}: {resp.status}, no ETag")
        return resp.headers["ETag"]


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
            headers = {"Authorization": basic(login, password), "Host": DOMAIN}
            for bucket in (cold, warm):
                t0 = time.perf_counter()
                async with session.get(base + "/api/userinfo", headers=headers) as resp:
                    await resp.read()
                    if resp.status != 200:
                        raise RuntimeError(f"userinfo as {login}: {resp.status}")
                bucket.append((time.perf_counter() - t0) * 1000)
    return cold, warm


async def post_statements(dsn: str, data_dir: Path, bodies: dict[str, Any]) -> dict[str, int]:
    """SQL statements PostgreSQL runs for one POST /api/messages of each body, counted as
    tests/app/views/test_statement_counts.py counts them (BEGIN, COMMIT and the authentication
    included): the app in this process, its pool observed. Each body is posted twice and the
    second counted (the first pays one-time reads: the community by host, type codecs)."""
    from aiohttp.test_utils import TestClient, TestServer

    from app.config import Settings
    from app.main import create_app

    statements: list[str] = []
    settings = Settings(database_url=dsn, data_dir=data_dir, secret_key="bench",
                        rate_limit_requests=10**9)
    app = create_app(settings, query_observer=statements.append)
    headers = {"Authorization": basic(ADMIN_EMAIL, ADMIN_PASSWORD), "Host": DOMAIN}
    counts: dict[str, int] = {}
    async with TestClient(TestServer(app)) as client:
        for label, body in bodies.items():
            for _ in range(2):
                await asyncio.sleep(0.05)  # asyncpg reports statements on a later turn
                statements.clear()
                resp = await client.post("/api/messages", json=body, headers=headers)
                if resp.status != 201:
                    raise RuntimeError(f"POST /api/messages: {resp.status} {await resp.text()}")
                await asyncio.sleep(0.05)
                counts[label] = len(statements)
    return counts


# --- main -----------------------------------------------------------------------------------


def row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(
        zip(cells, widths, strict=True)))


async def backend_pids(dsn: str) -> list[int]:
    """The PostgreSQL backends serving the bench database (the server's pool), on this host."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()")
    finally:
        await conn.close()
    return [r["pid"] for r in rows]


RATIO_GOAL = 1.5  # issue 14: every p50 at large scale within 1.5x of the small figure
POST_GOAL_MS = 50  # issue 14: posting into a group of 10,000 members, p50


@dataclass
class Served:
    """One seeded database at one scale, served, with its scenarios."""

    base: str
    pid: int
    dsn: str
    big: int  # the biggest group
    members: int  # of the biggest group
    scenarios: list[Scenario]


async def serve_scale(
    stack: contextlib.AsyncExitStack, admin_dsn: str, label: str, scale: Any,
    args: argparse.Namespace, headers: dict[str, str],
) -> Served:
    """Seed a database at `scale` and serve it until `stack` closes."""
    from feed_seed import seeded_database

    t_start = time.monotonic()
    print(f"{label}: {scale}", flush=True)
    dsn, _, _ = await stack.enter_async_context(
        seeded_database(admin_dsn, label, scale, keep=not args.fresh, verbose=True))
    print(f"{label}: ready in {time.monotonic() - t_start:.0f} s", flush=True)
    big, members = await _biggest_group(dsn)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    data_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"commons-bench-{os.getpid()}-{label}"
    server = stack.enter_context(commons_server(dsn, port, data_dir))
    await wait_until_up(base + "/api/openapi.json", server)
    if not args.no_pin and (os.cpu_count() or 1) >= 2:
        pin(server.pid, 0)
        pin(0, 1)
    async with aiohttp.ClientSession() as session, session.get(
        base + "/api/streams", headers=headers
    ) as resp:
        streams = {s["name"]: s["id"] for s in (await resp.json())["streams"]}
    company, mentions = streams["Company"], streams["@Mentions"]
    scenarios = [
        Scenario("Home p1", "GET", "/api/messages"),
        Scenario("Home p50", "GET", "/api/messages?page=50"),
        Scenario("Company p1", "GET", f"/api/streams/{company}/messages"),
        Scenario("Company p50", "GET", f"/api/streams/{company}/messages?page=50"),
        Scenario("biggest group p1", "GET", f"/api/groups/{big}/messages"),
        Scenario("biggest group p50", "GET", f"/api/groups/{big}/messages?page=50"),
        Scenario("@Mentions p1", "GET", f"/api/streams/{mentions}/messages"),
        Scenario("@Mentions p50", "GET", f"/api/streams/{mentions}/messages?page=50"),
        Scenario("search", "GET", "/api/messages/search?q=12345"),
        Scenario("notifications", "GET", "/api/notifications"),
        Scenario("conversations", "GET", "/api/conversations"),
        # the floor: the server answering without PostgreSQL
        Scenario("floor: /healthz", "GET", "/healthz"),
    ]
    scenarios = [s for s in scenarios if not args.only or s.name in args.only]
    for scenario in scenarios:
        status, _, body = await record(base, scenario, headers)
        if not 200 <= status < 300:
            raise RuntimeError(f"{label} {scenario.name}: {status} {body[:300]!r}")
    assert server.pid is not None
    return Served(base, server.pid, dsn, big, members, scenarios)


async def _biggest_group(dsn: str) -> tuple[int, int]:
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            "SELECT group_id, count(*) AS n FROM group_memberships GROUP BY group_id "
            "ORDER BY count(*) DESC LIMIT 1")
    finally:
        await conn.close()
    assert row is not None
    return int(row["group_id"]), int(row["n"])


async def run_scale(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from feed_seed import SCALES

    from tests.servers import ensure_postgres

    admin_dsn = ensure_postgres()
    t_start = time.monotonic()
    scales = {label: replace(SCALES[label], comments=args.comments, likes=args.likes)
              for label in ("small", "large")}
    if args.scale == "small":
        del scales["large"]
    headers = {"Authorization": basic(ADMIN_EMAIL, ADMIN_PASSWORD), "Host": DOMAIN}
    results: dict[str, dict[str, Result]] = {label: {} for label in scales}
    async with contextlib.AsyncExitStack() as stack:
        served = {label: await serve_scale(stack, admin_dsn, label, scale, args, headers)
                  for label, scale in scales.items()}
        # fill each server's connection pool first, so that PostgreSQL's CPU is metered on
        # every backend that serves the runs (the pool grows on demand), then warm every
        # scenario at both sizes: statements prepared on every connection, plans cached,
        # pages in memory
        for one in served.values():
            await load(one.base, one.scenarios[0], headers, args.concurrency, 0.0, 1.0)
        for i in range(len(served["small"].scenarios)):
            for one in served.values():
                await load(one.base, one.scenarios[i], headers, args.concurrency, 0.0,
                           args.warm_pass)
        # each scenario at both sizes back to back, so that both see the same load on the
        # (shared) machine
        # (in `--slices` turns: a slice at each size in turn, so that a burst of load from
        # elsewhere on the machine falls on both alike)
        for i, scenario in enumerate(served["small"].scenarios):
            for turn in range(args.slices):
                for label, one in (list(served.items()) if turn % 2 == 0
                                   else list(served.items())[::-1]):
                    part = await load(
                        one.base, one.scenarios[i], headers, args.concurrency,
                        args.warmup if turn == 0 else 0.0, args.seconds / args.slices,
                        one.pid, await backend_pids(one.dsn))
                    results[label][scenario.name] = results[label].get(
                        scenario.name, Result()).add(part)
        # posting into the biggest group, one request at a time (the write fan-out's wall)
        posts = {}
        for label, one in served.items():
            posting = Scenario("post to the biggest group", "POST", "/api/messages", {
                "message": {"body": "News for the whole #group", "group_id": one.big}})
            await load(one.base, posting, headers, 1, 0.0, 1.0)
            posts[label] = await load(one.base, posting, headers, 1, 0.0, args.seconds,
                                      one.pid, await backend_pids(one.dsn))
    measured = {label: (results[label], served[label].members) for label in scales}
    print()
    print(f"Commons feed at scale: {args.concurrency} concurrent keep-alive connections, "
          f"{args.warmup:g} s warm-up + {args.seconds:g} s per run in {args.slices} slices "
          "per size, taken in turns; small = "
          f"{scales['small'].messages:,} messages (biggest group "
          f"{measured['small'][1]:,} members)"
          + (f", large = {scales['large'].messages:,} messages, {scales['large'].users:,} "
             f"users, {scales['large'].groups:,} groups ({scales['large'].comments} comments, "
             f"{scales['large'].likes} likes each; biggest group {measured['large'][1]:,} "
             "members)" if "large" in scales else ""))
    widths = [19, 6, 7, 7, 6, 6, 6, 7, 7, 6, 6, 6, 6]
    print(row(["endpoint", "req/s", "p50 ms", "p99 ms", "cpu", "pg cpu", "large",
               "p50 ms", "p99 ms", "cpu", "pg cpu", "ratio", "1.5x"], widths))
    small = measured["small"][0]
    large = measured.get("large", measured["small"])[0]
    for name, s_res in small.items():
        l_res = large[name]
        ratio = l_res.percentile(50) / s_res.percentile(50)
        print(row([name, f"{s_res.rps:.0f}", f"{s_res.percentile(50):.1f}",
                   f"{s_res.percentile(99):.1f}", f"{s_res.cpu_ms_per_request:.2f}",
                   f"{s_res.pg_cpu_ms_per_request:.2f}", f"{l_res.rps:.0f}",
                   f"{l_res.percentile(50):.1f}", f"{l_res.percentile(99):.1f}",
                   f"{l_res.cpu_ms_per_request:.2f}", f"{l_res.pg_cpu_ms_per_request:.2f}",
                   f"{ratio:.2f}x", "met" if ratio <= RATIO_GOAL else "missed"], widths))
        for label, res in (("small", s_res), ("large", l_res)):
            if res.errors:
                print(f"  ! {label}: {res.errors} non-2xx answers {res.statuses}")
    print("cpu: the server process's CPU ms per request; pg cpu: PostgreSQL's (the bench "
          "database's backends) per request; ratio: large p50 / small p50; 1.5x: the issue's "
          "goal")
    print()
    print("POST /api/messages into the biggest group, one request at a time:")
    for label, res in posts.items():
        p50 = res.percentile(50)
        print(f"  {label}: {served[label].members:,} members, {res.requests} posts, p50 "
              f"{p50:.1f} ms, p99 {res.percentile(99):.1f} ms, cpu "
              f"{res.cpu_ms_per_request:.2f}, pg cpu {res.pg_cpu_ms_per_request:.2f} ms; "
              f"goal p50 < {POST_GOAL_MS} ms: {'met' if p50 < POST_GOAL_MS else 'missed'}"
              + (f" ({res.errors} errors {res.statuses})" if res.errors else ""))
    load1, load5, _ = os.getloadavg()
    print(f"total {time.monotonic() - t_start:.0f} s; load average at the end {load1:.1f} "
          f"(1 min), {load5:.1f} (5 min): other work on the machine skews every figure")
    return 0


async def run(args: argparse.Namespace) -> int:
    if args.scale is not None:
        return await run_scale(args)
    scenarios = [s for s in SCENARIOS if not args.only or s.name in args.only]
    if not scenarios and REMARK not in (args.only or ()):
        print(f"no scenario named {args.only}; have {[s.name for s in SCENARIOS]}")
        return 2
    # DATABASE_URL's server, else 127.0.0.1:5432, else the one the test set-up starts (the
    # system cluster or the embedded PostgreSQL wheel): the same search as `make test`.
    from tests.servers import ensure_postgres

    admin_dsn = ensure_postgres()
    cpus = os.cpu_count() or 1
    pinning = not args.no_pin and cpus >= 2
    t_start = time.monotonic()
    async with fresh_database(admin_dsn, "commons_bench") as dsn:
        seeded = await seed(dsn, args.users)
        print(f"seeded {seeded['users_created']} users, {seeded['follows']} follows, "
              f"{seeded['custom_values']} custom field values, {seeded['groups']} groups, "
              f"{seeded['messages']} messages, {seeded['comments']} comments, "
              f"{seeded['likes']} likes ({time.monotonic() - t_start:.1f} s)")
        port, floor_port = free_port(), free_port()
        base, floor_base = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{floor_port}"
        # The community's own host name, as a real deployment sees it (a host that matches no
        # community costs one more query per request: the sole-community fallback is never
        # cached). aiohttp sends this Host header as given.
        headers = {"Authorization": basic(ADMIN_EMAIL, ADMIN_PASSWORD), "Host": DOMAIN}
        data_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"commons-bench-{os.getpid()}"
        many = args.workers > 1
        many_port = free_port()
        many_base = f"http://127.0.0.1:{many_port}"
        with contextlib.ExitStack() as servers:
            server = servers.enter_context(commons_server(dsn, port, data_dir))
            await wait_until_up(base + "/api/openapi.json", server)
            if pinning:
                pin(server.pid, 0)
                pin(0, 1)
            if many:  # not pinned: its processes take what the machine gives them
                spread = servers.enter_context(commons_server(
                    dsn, many_port, data_dir.with_name(data_dir.name + "-workers"),
                    workers=args.workers, redis_url=args.redis_url))
                await wait_until_up(many_base + "/api/openapi.json", spread)
            if not args.only or REMARK in args.only:
                scenarios.append(await remark_scenario(base, headers, seeded["logins"][0]))
            # the cookie is good on both servers (one secret key)
            cookie = await session_headers(base) if any(s.session for s in scenarios) else {}

            def headers_of(scenario: Scenario) -> dict[str, str]:
                return cookie if scenario.session else headers

            answers: dict[tuple[str, str], tuple[int, str, bytes]] = {}
            for scenario in scenarios:
                status, ctype, body = await record(base, scenario, headers_of(scenario))
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
                spread_results: dict[str, Result] = {}
                for scenario in scenarios:
                    # the server's current ETag, sent to the server and the floor alike
                    tag = await etag_of(base, scenario, headers_of(scenario)) \
                        if scenario.conditional else None
                    ours = await load(base, scenario, headers_of(scenario), args.concurrency,
                                      args.warmup, args.seconds, server.pid, pg_dsn=dsn,
                                      if_none_match=tag)
                    bare = await load(floor_base, scenario, headers_of(scenario), args.concurrency,
                                      args.warmup, args.seconds, floor.pid, if_none_match=tag)
                    size = 0 if tag else len(
                        answers[(scenario.method, scenario.path.split("?")[0])][2])
                    results.append((scenario, ours, bare, size))
                    if many:  # the same load on `serve --workers N`, right after
                        tag = await etag_of(many_base, scenario, headers_of(scenario)) \
                            if scenario.conditional else None
                        spread_results[scenario.name] = await load(
                            many_base, scenario, headers_of(scenario), args.concurrency,
                            args.warmup,
                            args.seconds, spread.pid, pg_dsn=dsn, if_none_match=tag, tree=True)
                cold, warm = await auth_cost(base, seeded["logins"][: args.auth_samples],
                                             seeded["password"])
            finally:
                stop(floor)
        statements: dict[str, int] = {}
        if not args.only or "new message" in args.only:
            statements = await post_statements(dsn, data_dir, {
                "plain": {"message": {"body": "Shipping the release today"}},
                "the bench's (an @mention and a #tag)":
                    next(s.body for s in SCENARIOS if s.name == "new message"),
            })

    print()
    print(f"Commons REST benchmark: {args.concurrency} concurrent keep-alive connections, "
          f"{args.warmup:g} s warm-up + {args.seconds:g} s per run, {cpus} CPU(s), "
          + ("server pinned to CPU 0, client to CPU 1" if pinning else "no CPU pinning"))
    widths = [22, 7, 7, 8, 8, 8, 7, 9, 9, 9, 8, 6]
    print(row(["endpoint", "bytes", "req/s", "p50 ms", "p99 ms", "cpu ms", "pg cpu",
               "floor r/s", "floor p50", "floor p99", "fl. cpu", "ratio"], widths))
    for scenario, ours, bare, size in results:
        ratio = ours.rps / bare.rps if bare.rps else float("nan")
        print(row([f"{scenario.method} {scenario.name}", str(size), f"{ours.rps:.0f}",
                   f"{ours.percentile(50):.1f}", f"{ours.percentile(99):.1f}",
                   f"{ours.cpu_ms_per_request:.2f}", f"{ours.pg_cpu_ms_per_request:.2f}",
                   f"{bare.rps:.0f}",
                   f"{bare.percentile(50):.1f}", f"{bare.percentile(99):.1f}",
                   f"{bare.cpu_ms_per_request:.2f}", f"{ratio:.2f}"], widths))
        for label, res in (("server", ours), ("floor", bare)):
            if res.errors:
                expected = "non-304" if res.expected == 304 else "non-2xx"
                print(f"  ! {label}: {res.errors} {expected} answers {res.statuses}")
    print("cpu ms: CPU time (user + system) of the server process per request over the measured "
          "span (PostgreSQL's share not included); steadier than req/s on a busy machine; "
          "pg cpu: PostgreSQL's (the bench database's backends) per request; "
          "304: with a matching If-None-Match")
    if spread_results:
        print()
        print(f"One worker (pinned to CPU 0, no Redis) beside `serve --workers {args.workers}` "
              "(not pinned; Redis for rate limits, hub and credentials cache), the same load "
              "right after:")
        widths = [22, 9, 8, 8, 10, 8, 8, 7]
        print(row(["endpoint", "1w req/s", "1w cpu", "1w pg", f"{args.workers}w req/s",
                   f"{args.workers}w cpu", f"{args.workers}w pg", "r/s x"], widths))
        for scenario, ours, _, _ in results:
            spread_result = spread_results[scenario.name]
            print(row([f"{scenario.method} {scenario.name}", f"{ours.rps:.0f}",
                       f"{ours.cpu_ms_per_request:.2f}", f"{ours.pg_cpu_ms_per_request:.2f}",
                       f"{spread_result.rps:.0f}", f"{spread_result.cpu_ms_per_request:.2f}",
                       f"{spread_result.pg_cpu_ms_per_request:.2f}",
                       f"{spread_result.rps / ours.rps if ours.rps else float('nan'):.2f}"],
                      widths))
            if spread_result.errors:
                print(f"  ! {args.workers} workers: {spread_result.errors} unexpected answers "
                      f"{spread_result.statuses}")
        print(f"cpu: all {args.workers} processes' CPU per request; on a 2-core machine they "
              "share the cores with this client and PostgreSQL")
    print()
    print("Issue 13's targets (server CPU per request of one worker, PostgreSQL's beside it):")
    for scenario, ours, bare, _ in results:
        target = TARGETS.get(scenario.name)
        if target is None:
            continue
        measured, met = target.judge(ours, bare)
        print(f"target {scenario.method} {scenario.name}: {measured}: "
              f"{'met' if met else 'missed'}; floor {bare.cpu_ms_per_request:.3f} ms, "
              f"PostgreSQL {ours.pg_cpu_ms_per_request:.3f} ms")
    for label, count in statements.items():
        print(f"target POST new message, {label}: {count} SQL statements (at most "
              f"{POST_STATEMENTS_TARGET}): "
              f"{'met' if count <= POST_STATEMENTS_TARGET else 'missed'}")
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
    parser.add_argument("--workers", type=int, default=2,
                        help="also run every scenario on `serve --workers N` (with Redis) and "
                             "print its figures beside one worker's; 1: one worker only")
    parser.add_argument("--redis-url", default=os.environ.get(
                            "REDIS_URL", "redis://127.0.0.1:6379/0"),
                        help="the Redis of `--workers N` (keys under a prefix of their own)")
    parser.add_argument("--scale", choices=["small", "large"],
                        help="the feed at scale instead (issue 14): small, or small and large "
                             "in one run with their ratio")
    parser.add_argument("--comments", type=int, default=3,
                        help="comments per seeded message at both scales (--scale; the issue's 3)")
    parser.add_argument("--likes", type=int, default=5,
                        help="likes per seeded message at both scales (--scale; the issue's 5)")
    parser.add_argument("--slices", type=int, default=2,
                        help="--scale: each run in this many slices, a slice at each size in "
                             "turn")
    parser.add_argument("--warm-pass", type=float, default=1.0,
                        help="--scale: seconds each scenario runs at each size before any is "
                             "measured")
    parser.add_argument("--fresh", action="store_true",
                        help="--scale: seed throwaway databases instead of reusing (and keeping) "
                             "the ones bench/feed_scale.py and feed_seed.py --keep seeded")
    args = parser.parse_args(argv)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
