"""Streams and group chat at small and large scale, in one run (issue 14).

    .venv/bin/python bench/feed_scale.py [--runs 30] [--warmup 10] [--comments 3 --likes 5]

Seeds two databases with bench/feed_seed.py (small: 20,000 messages; large: 1,000,000 messages,
100,000 users, 1,000 groups; 3 comments and 5 likes per message at both sizes by default, as
the issue measures), kept and reused by the next run (the large seed takes about 20 minutes on
2 busy cores; `--fresh` seeds throwaway ones), then, on each, calls the real actions (the page
query plus every rendering query, as the views do; HTTP and JSON encoding excluded: they do not
depend on the data's size) sequentially. Every scenario first runs once at both sizes (the
pages read come into memory at both), then each is measured `--runs` times at each size after
`--warmup` uncounted calls (more than 5: PostgreSQL plans a prepared statement afresh for its
first 5 runs, then settles on a cached plan), one call at each size in turn, so that load from
elsewhere on the machine falls on both sizes alike. It prints per scenario the p50 and p99 latency,
PostgreSQL's CPU time per call (its backend's user + system time from /proc, on one pooled
connection), the large/small ratio of the p50 and whether it meets the issue's 1.5x.

Scenarios: the floor (`SELECT 1` on the same pool: what a call costs on this machine at this
moment, doing nothing); page 1 and page 50 of Home, Company, the stream of the biggest group and
@Mentions; page 1 of a #tag and of a search; posting a chat message and a message into a group
of 10 and of 10,000 members (the write fan-out); and, for comparison, the query shape before
issue 14 on Home page 1 (its `before` row, capped by a statement timeout) and the per-member
write a chat post made (rolled back).

The machine is shared: compare the two columns of one run, not runs with each other.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO_ROOT), str(Path(__file__).resolve().parent)]

import asyncpg  # noqa: E402
from feed_seed import SCALES, seeded_database  # noqa: E402

BASE = "https://bench.example"
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Measure:
    latencies: list[float] = field(default_factory=list)
    pg_cpu: float = 0.0  # seconds, over the measured calls

    def p(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))] * 1000

    @property
    def cpu_ms(self) -> float:
        return self.pg_cpu * 1000 / len(self.latencies) if self.latencies else float("nan")


def backend_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a PostgreSQL backend on this machine; 0 when unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


# The page query before issue 14 (storage/messages.py then): every readable message of the
# community tested against the Home predicate, then all sorted by sticky first.
OLD_HOME = """
SELECT m.id FROM messages m LEFT JOIN groups g ON g.id = m.group_id
WHERE m.community_id = $1
  AND (CASE WHEN m.group_id IS NULL THEN (NOT $3 OR m.user_id = $2 OR EXISTS (
        SELECT 1 FROM message_recipients r_v
        WHERE r_v.message_id = m.id AND r_v.comment_id IS NULL AND r_v.user_id = $2))
       ELSE coalesce((EXISTS (SELECT 1 FROM group_memberships gm_v
                              WHERE gm_v.group_id = g.id AND gm_v.user_id = $2)
                      OR (NOT $3 AND g.permission = 'public')), false) END)
  AND (m.user_id = $2 OR m.is_announcement
       OR EXISTS (SELECT 1 FROM group_memberships gm_h
                  WHERE gm_h.group_id = m.group_id AND gm_h.user_id = $2)
       OR EXISTS (SELECT 1 FROM follows f_h
                  WHERE f_h.follower_id = $2 AND f_h.followed_id = m.user_id)
       OR EXISTS (SELECT 1 FROM message_recipients r_h
                  WHERE r_h.message_id = m.id AND r_h.user_id = $2))
ORDER BY (m.is_announcement AND m.sticky_until > now()) DESC, m.last_interacted_at DESC,
         m.id DESC
OFFSET 0 LIMIT 21
"""

# The per-member write of a chat post before issue 14 (storage/chat_messages.py COUNT_UNREAD).
OLD_CHAT_FAN_OUT = """
INSERT INTO group_chat_reads AS cr (community_id, group_id, user_id)
SELECT $1, gm.group_id, gm.user_id
FROM group_memberships gm WHERE gm.group_id = $2 AND gm.user_id <> $3
ON CONFLICT (group_id, user_id) DO UPDATE SET updated_at = now()
"""

Call = Callable[[], Awaitable[Any]]


RATIO_GOAL = 1.5  # issue 14: every p50 at large scale within 1.5x of the small figure
WARMUP = 10  # uncounted calls before measuring (see the docstring)


async def measure(
    pool: asyncpg.Pool, pid: int, call: Call, runs: int, warmup: int = WARMUP
) -> Measure:
    for _ in range(warmup):
        await call()
    out = Measure()
    cpu = backend_cpu(pid)
    for _ in range(runs):
        started = time.perf_counter()
        await call()
        out.latencies.append(time.perf_counter() - started)
    out.pg_cpu = backend_cpu(pid) - cpu
    return out


async def measure_sizes(
    prepared: dict[str, Prepared], name: str, warmup: int = WARMUP
) -> dict[str, Measure]:
    """One scenario at every size, interleaved: after `warmup` uncounted calls at each, one
    measured call at each size in turn (the order alternating), so that a burst of load from
    elsewhere on the machine falls on both alike."""
    labels = list(prepared)
    for _ in range(warmup):
        for label in labels:
            await prepared[label].scenarios[name][0]()
    out = {label: Measure() for label in labels}
    cpu = {label: backend_cpu(prepared[label].pid) for label in labels}
    runs = prepared[labels[0]].scenarios[name][1]
    for i in range(runs):
        for label in labels if i % 2 == 0 else labels[::-1]:
            call = prepared[label].scenarios[name][0]
            started = time.perf_counter()
            await call()
            out[label].latencies.append(time.perf_counter() - started)
    for label in labels:
        # each size has its own backend: its CPU is that size's alone
        out[label].pg_cpu = backend_cpu(prepared[label].pid) - cpu[label]
    return out


async def small_group(pool: asyncpg.Pool, cid: int, admin_id: int, members: int) -> int:
    """A chat-enabled group of `members` members (the admin and the first seeded users); the
    one of an earlier run when the database is a kept one."""
    async with pool.acquire() as conn:
        old: int | None = await conn.fetchval(
            "SELECT id FROM groups WHERE community_id = $1 AND groupname = 'bench' || $2::int",
            cid, members)
        if old is not None:
            return old
        gid: int = await conn.fetchval(
            "INSERT INTO groups (community_id, name, groupname, chat_enabled, creator_id) "
            "VALUES ($1, 'Bench ' || $3::int, 'bench' || $3::int, true, $2) RETURNING id",
            cid, admin_id, members)
        await conn.execute(
            "INSERT INTO group_memberships (community_id, group_id, user_id, role) "
            "SELECT $1, $2, id, CASE WHEN id = $3 THEN 'admin' ELSE 'member' END FROM users "
            "WHERE community_id = $1 ORDER BY id LIMIT $4", cid, gid, admin_id, members)
        await conn.execute(
            "INSERT INTO streams (community_id, kind, group_id, name) "
            "VALUES ($1, 'group', $2, 'Bench'), ($1, 'group_chat', $2, 'Bench')", cid, gid)
    return gid


@dataclass
class Prepared:
    pool: asyncpg.Pool
    hub: Any
    pid: int
    big_members: int
    scenarios: dict[str, tuple[Call, int]]  # name: (call, runs)
    chat_by_size: Callable[[], Awaitable[dict[int, Measure]]]


CHAT_SIZES = (11, 301, 3_001, 10_001)


async def prepare(dsn: str, cid: int, admin_id: int, runs: int) -> Prepared:
    """Build the scenarios of the seeded `dsn` (calls of the real actions)."""
    from app.actions.chat_messages import post_chat_message
    from app.actions.messages import NewMessage, create_message, list_messages
    from app.context import Viewer
    from realtime.hub import LocalHub
    from storage.db import create_pool
    from storage.messages import MessageQuery

    pool = await create_pool(dsn, size=1)
    hub = LocalHub(pool)
    pid = await pool.fetchval("SELECT pg_backend_pid()")
    big = await pool.fetchval(
        "SELECT group_id FROM group_memberships WHERE community_id = $1 "
        "GROUP BY group_id ORDER BY count(*) DESC LIMIT 1", cid)
    big_members = await pool.fetchval(
        "SELECT count(*) FROM group_memberships WHERE group_id = $1", big)
    print(f"  biggest group: {big_members} members", flush=True)
    ten = await small_group(pool, cid, admin_id, 10)
    viewer = Viewer(id=admin_id, community_id=cid, role="tenant_admin")

    def page(query: MessageQuery, n: int) -> Call:
        return lambda: list_messages(pool, viewer, BASE, query, page=n, per_page=20)

    def chat(group_id: int) -> Call:
        return lambda: post_chat_message(pool, hub, viewer, group_id, "hello all", (), BASE)

    def post(group_id: int) -> Call:
        return lambda: create_message(
            pool, viewer, BASE, NewMessage(body="news for the group", group_id=group_id), hub)

    async def old_home() -> None:
        async with pool.acquire() as conn:
            await conn.execute("SET statement_timeout = '50s'")
            try:
                await conn.fetch(OLD_HOME, cid, admin_id, False)
            except asyncpg.QueryCanceledError:
                pass
            finally:
                await conn.execute("RESET statement_timeout")

    async def old_chat_fan_out() -> None:
        # what posting a chat message wrote before issue 14, besides the message: one
        # group_chat_reads row per other member (its unread counter; the column is gone, so the
        # row's updated_at stands in for it), rolled back
        async with pool.acquire() as conn:
            tr = conn.transaction()
            await tr.start()
            try:
                await conn.execute(OLD_CHAT_FAN_OUT, cid, big, admin_id)
            finally:
                await tr.rollback()

    home = MessageQuery(stream="home", sticky_first=True)
    company = MessageQuery(stream="company", sticky_first=True)
    group = MessageQuery(group_id=big)
    mentions = MessageQuery(stream="mentions")
    calls: dict[str, Call] = {
        # the floor: a round trip to PostgreSQL on the same pool, doing nothing
        "floor: SELECT 1": lambda: pool.fetchval("SELECT 1"),
        "Home p1": page(home, 1),
        "Home p50": page(home, 50),
        "Company p1": page(company, 1),
        "Company p50": page(company, 50),
        "biggest group p1": page(group, 1),
        "biggest group p50": page(group, 50),
        "@Mentions p1": page(mentions, 1),
        "@Mentions p50": page(mentions, 50),
        "#tag p1": page(MessageQuery(stream="company", topic="topic7"), 1),
        "search p1": page(MessageQuery(stream="company", search="12345"), 1),
        "chat post, 10 members": chat(ten),
        "chat post, biggest group": chat(big),
        "message post, 10 members": post(ten),
        "message post, biggest group": post(big),
    }
    async def chat_by_size() -> dict[int, Measure]:
        """The issue's table: sequential chat posts into groups of 11 to 10,001 members."""
        users = await pool.fetchval("SELECT count(*) FROM users WHERE community_id = $1", cid)
        out = {}
        for size in (n for n in CHAT_SIZES if n <= users):
            gid = await small_group(pool, cid, admin_id, size)
            out[size] = await measure(pool, pid, chat(gid), runs)
        return out

    scenarios = {name: (call, runs) for name, call in calls.items()}
    scenarios["before: Home p1 query"] = (old_home, min(runs, 3))
    scenarios["before: chat fan-out, biggest group"] = (old_chat_fan_out, min(runs, 10))
    return Prepared(pool, hub, pid, big_members, scenarios, chat_by_size)


async def _main(args: argparse.Namespace) -> int:
    from tests.servers import ensure_postgres

    admin_dsn = ensure_postgres()
    scales = {label: replace(SCALES[label], comments=args.comments, likes=args.likes)
              for label in ("small", "large")}
    if args.only_small:
        del scales["large"]
    measured: dict[str, dict[str, Measure]] = {label: {} for label in scales}
    started = time.monotonic()
    async with contextlib.AsyncExitStack() as stack:
        prepared: dict[str, Prepared] = {}
        for label, scale in scales.items():
            print(f"{label}:", flush=True)
            t_seed = time.monotonic()
            dsn, cid, admin_id = await stack.enter_async_context(
                seeded_database(admin_dsn, label, scale, keep=not args.fresh, verbose=True))
            print(f"  ready ({scale}) in {time.monotonic() - t_seed:.0f} s", flush=True)
            prepared[label] = await prepare(dsn, cid, admin_id, args.runs)
            stack.push_async_callback(prepared[label].pool.close)
            stack.push_async_callback(prepared[label].hub.close)
        # every scenario once at both sizes before any is measured: what they read is in
        # memory at both
        for name in prepared["small"].scenarios:
            for ready in prepared.values():
                await ready.scenarios[name][0]()
        # each scenario at both sizes, one call at each in turn, so that both see the same
        # load on the (shared) machine, moment by moment
        for name in prepared["small"].scenarios:
            for label, m in (await measure_sizes(prepared, name, args.warmup)).items():
                measured[label][name] = m
        chat_tables = {label: await ready.chat_by_size() for label, ready in prepared.items()}
    if "large" not in measured:
        measured["large"] = measured["small"]
    print()
    print(f"Feed at scale: {args.runs} sequential calls per scenario after {args.warmup} "
          "warm-ups; "
          f"small = {scales['small'].messages:,} messages, large = "
          f"{scales.get('large', SCALES['large']).messages:,} messages "
          f"({args.comments} comments, {args.likes} likes each at both sizes)")
    head = (f"{'scenario':32} {'small p50':>9} {'p99':>7} {'pg cpu':>7} "
            f"{'large p50':>9} {'p99':>8} {'pg cpu':>7} {'ratio':>6} {'1.5x':>6}")
    print(head)
    print("-" * len(head))
    for key, large in measured["large"].items():
        small = measured["small"].get(key)
        if small is None:
            continue
        ratio = large.p(50) / small.p(50) if small.p(50) else float("nan")
        print(f"{key:32} {small.p(50):9.1f} {small.p(99):7.1f} "
              f"{small.cpu_ms:7.2f} {large.p(50):9.1f} {large.p(99):8.1f} "
              f"{large.cpu_ms:7.2f} {ratio:5.2f}x "
              f"{'met' if ratio <= RATIO_GOAL else 'missed':>6}")
    print("times in ms; pg cpu: PostgreSQL backend CPU ms per call; 1.5x: the issue's goal "
          "(the `before` rows are the old shapes, for comparison)")
    for label, table in chat_tables.items():
        print()
        print(f"POST chat message, sequential, {label} community: group members, p50, max, "
              "pg cpu (ms)")
        for size, m in table.items():
            print(f"  {size:>6}  {m.p(50):6.1f}  {max(m.latencies) * 1000:6.1f}  "
                  f"{m.cpu_ms:5.2f}")
    load1, load5, _ = os.getloadavg()
    print(f"total {time.monotonic() - started:.0f} s; load average {load1:.1f} (1 min), "
          f"{load5:.1f} (5 min)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=WARMUP,
                        help="uncounted calls per scenario before measuring")
    parser.add_argument("--comments", type=int, default=3,
                        help="comments per message at both sizes (the issue's 3)")
    parser.add_argument("--likes", type=int, default=5,
                        help="likes per message at both sizes (the issue's 5)")
    parser.add_argument("--fresh", action="store_true",
                        help="seed throwaway databases instead of reusing (and keeping) the "
                             "seeded ones (bench/feed_seed.py --drop-kept removes those)")
    parser.add_argument("--only-small", action="store_true",
                        help="a quick check of the script: the small scale only")
    args = parser.parse_args(argv)
    return asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())
