"""Seed one community at scale for the feed benchmarks (issue 14), fast.

    .venv/bin/python bench/feed_seed.py --scale large      # seeds a throwaway database, times it

Everything is generated inside PostgreSQL (`INSERT ... SELECT` over generate_series, with a
fixed random seed), so no row crosses the wire: faster than COPY from a client, which would have
to ship the same rows. Sizes (SCALES):

- small: 2,000 users, 40 groups, 20,000 messages;
- large: 100,000 users, 1,000 groups, 1,000,000 messages.

Shape, at both sizes: a typical user is in 5 to 50 groups (most near 5), 20 users are in 500
(or all) groups, group 1 has 10,000 members (or everyone) for the write benchmarks; each user
follows 5 people; 60% of the messages are in groups, busier groups getting more; one in 20 has
an @mention, one in 10 a #topic (one topic per 1,000 messages, at most 200: every topic has at
least 100 messages at both sizes, so that a `#tag` page is a full page at both); `comments`
comments and `likes` likes per message (3 and 5 by default, as the issue measures); a year of
activity. The viewer (the community's admin) is in 30 groups including group 1, follows 50
people, is @mentioned in about 1,100 messages at both sizes (a person's mentions do not grow with
the company; and @Mentions page 50 exists at both), has bookmarked 200 messages, and sees two
sticky announcements. The tables are vacuumed and analyzed at the end, as autovacuum keeps a
database in service.

`seeded_database(admin_dsn, label, scale, keep=True)` keeps the seeded database (named after a
fingerprint of the scale, this seed and the migrations) and reuses it in later runs: the large
seed takes many minutes on a small machine. `--drop-kept` removes them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO_ROOT), str(Path(__file__).resolve().parent)]

import asyncpg  # noqa: E402


@dataclass(frozen=True)
class Scale:
    users: int
    groups: int
    messages: int
    comments: int = 3  # per message
    likes: int = 5  # per message
    big_group: int = 10_000  # members of group 1

    @property
    def topics(self) -> int:
        # at least 100 tagged messages per topic at every size (one message in 10 is tagged)
        return max(1, min(200, self.messages // 1000))


SCALES = {
    "small": Scale(users=2_000, groups=40, messages=20_000),
    "large": Scale(users=100_000, groups=1_000, messages=1_000_000),
}

# Each step: (label, SQL). $1 community, $2 admin (the viewer); sizes are formatted in.
STEPS = [
    ("users", """
INSERT INTO users (community_id, email, username, first_name, last_name)
SELECT $1, 'seed' || i || '@bench.example', 'seed' || i, 'Seed', 'User ' || i
FROM generate_series(1, {users}) i
"""),
    ("groups", """
INSERT INTO groups (community_id, name, groupname, permission, chat_enabled, creator_id)
SELECT $1, 'Seed group ' || i, 'seedgroup' || i,
       CASE WHEN i % 5 = 0 THEN 'private' ELSE 'public' END, true, $2
FROM generate_series(1, {groups}) i
"""),
    ("numbering", """
CREATE TEMP TABLE su AS
SELECT row_number() OVER (ORDER BY id) AS n, id FROM users
WHERE community_id = $1 AND username LIKE 'seed%';
CREATE UNIQUE INDEX ON su (n);
CREATE TEMP TABLE sg AS
SELECT row_number() OVER (ORDER BY id) AS n, id FROM groups
WHERE community_id = $1 AND groupname LIKE 'seedgroup%';
CREATE UNIQUE INDEX ON sg (n);
ANALYZE su; ANALYZE sg;
INSERT INTO streams (community_id, kind, group_id, name)
SELECT $1, k.kind, sg.id, 'Seed group ' || sg.n FROM sg
CROSS JOIN (VALUES ('group'), ('group_chat')) AS k(kind)
ON CONFLICT DO NOTHING
"""),
    ("memberships", """
SELECT setseed(0.14);
INSERT INTO group_memberships (community_id, group_id, user_id, role)
SELECT $1, sg.id, x.id, 'member' FROM (
    -- most users near 5 groups, a few near 50; group choice skewed to low numbers
    SELECT DISTINCT su.id,
           1 + floor({groups} * power(random(), 1.5))::int AS g
    FROM su CROSS JOIN LATERAL generate_series(
        1, 5 + floor(45 * power(random(), 4))::int + (su.n * 0)) j
    UNION
    SELECT su.id, 1 + ((su.n * 7 + j) % {groups}) FROM su
    CROSS JOIN generate_series(1, least(500, {groups})) j WHERE su.n <= 20
    UNION
    SELECT su.id, 1 FROM su WHERE su.n <= {big_group}
) x JOIN sg ON sg.n = x.g
ON CONFLICT DO NOTHING;
INSERT INTO group_memberships (community_id, group_id, user_id, role)
SELECT $1, sg.id, $2, 'admin' FROM sg WHERE sg.n <= 30
ON CONFLICT DO NOTHING
"""),
    ("follows", """
INSERT INTO follows (community_id, follower_id, followed_id)
SELECT $1, a.id, b.id FROM su a CROSS JOIN generate_series(1, 5) j
JOIN su b ON b.n = 1 + (a.n * 31 + j * 977) % {users}
WHERE b.n <> a.n
ON CONFLICT DO NOTHING;
INSERT INTO follows (community_id, follower_id, followed_id)
SELECT $1, $2, su.id FROM su WHERE su.n % ({users} / 50) = 3 ORDER BY su.n LIMIT 50
ON CONFLICT DO NOTHING
"""),
    ("topics", """
INSERT INTO topics (community_id, name)
SELECT $1, 'topic' || i FROM generate_series(1, {topics}) i ON CONFLICT DO NOTHING
"""),
    ("messages", """
SELECT setseed(0.27);
INSERT INTO messages (community_id, user_id, group_id, body, html_body, source,
                      is_announcement, message_type, action, days_of_stickiness, sticky_until,
                      last_interacted_at, created_at, updated_at)
SELECT $1, su.id, sg.id, x.body, x.body, 'api', x.announcement,
       CASE WHEN x.announcement THEN 'broadcast_message' ELSE 'status_message' END,
       CASE WHEN x.announcement THEN 'made an announcement' ELSE '' END,
       CASE WHEN x.sticky THEN 3 ELSE 0 END,
       CASE WHEN x.sticky THEN now() + interval '3 days' END,
       x.at + interval '1 hour' * {comments}, x.at, x.at
FROM (
    SELECT i,
           1 + (i * 7919) % {users} AS author,
           CASE WHEN random() < 0.6 THEN 1 + floor({groups} * power(random(), 2))::int END
               AS g,
           'Update ' || i || ' on the ' || CASE WHEN i % 10 = 0
               THEN '#topic' || (1 + (i / 10) % {topics}) ELSE 'usual' END
               || ' work: see the notes and tell me what you think.'
               || CASE WHEN i % 20 = 0 THEN ' @seed' || (1 + (i * 13) % {users}) ELSE '' END
               AS body,
           i % 50000 = 25000 AS announcement,
           i IN (25000, 75000) AS sticky,
           now() - interval '365 days' * (1 - i::float8 / {messages}) AS at
    FROM generate_series(1::bigint, {messages}) i
) x
JOIN su ON su.n = x.author
LEFT JOIN sg ON sg.n = x.g
"""),
    ("numbering messages", """
CREATE TEMP TABLE sm AS
SELECT row_number() OVER (ORDER BY id) AS n, id, user_id, group_id, last_interacted_at,
       created_at
FROM messages WHERE community_id = $1;
CREATE UNIQUE INDEX ON sm (n);
ANALYZE sm
"""),
    ("recipients", """
INSERT INTO message_recipients (community_id, message_id, group_id, reason, position,
                                last_interacted_at)
SELECT $1, sm.id, sm.group_id, 'group', 0, sm.last_interacted_at FROM sm
WHERE sm.group_id IS NOT NULL;
INSERT INTO message_recipients (community_id, message_id, user_id, reason, position,
                                last_interacted_at)
SELECT $1, sm.id, su.id, 'mention', 1000, sm.last_interacted_at FROM sm
JOIN su ON su.n = 1 + (sm.n * 13) % {users} WHERE sm.n % 20 = 0
ON CONFLICT DO NOTHING;
INSERT INTO message_recipients (community_id, message_id, user_id, reason, position,
                                last_interacted_at)
SELECT $1, sm.id, $2, 'mention', 1001, sm.last_interacted_at FROM sm
WHERE sm.n % greatest(1, {messages} / 1100) = 7
ON CONFLICT DO NOTHING
"""),
    ("message topics", """
INSERT INTO message_topics (community_id, message_id, topic_id, last_interacted_at)
SELECT $1, sm.id, t.id, sm.last_interacted_at FROM sm
JOIN topics t ON t.community_id = $1 AND t.name = 'topic' || (1 + (sm.n / 10) % {topics})
WHERE sm.n % 10 = 0
"""),
    ("comments", """
INSERT INTO comments (community_id, message_id, user_id, text, html_body, created_at,
                      updated_at)
SELECT $1, sm.id, su.id, 'Comment ' || c || ': agreed, let''s do it.',
       'Comment ' || c || ': agreed, let''s do it.',
       sm.created_at + interval '1 hour' * c, sm.created_at + interval '1 hour' * c
FROM sm CROSS JOIN generate_series(1, {comments}) c
JOIN su ON su.n = 1 + (sm.n * 17 + c * 7) % {users}
"""),
    ("likes", """
INSERT INTO likes (community_id, user_id, message_id, created_at)
SELECT $1, su.id, sm.id, sm.created_at + interval '5 minutes'
FROM sm CROSS JOIN generate_series(0, {likes} - 1) k
JOIN su ON su.n = 1 + (sm.n * 11 + k * ({users} / 5 + 1)) % {users}
ON CONFLICT DO NOTHING
"""),
    ("bookmarks", """
INSERT INTO flags (community_id, user_id, message_id)
SELECT $1, $2, sm.id FROM sm WHERE sm.n % ({messages} / 200) = 11 LIMIT 200
ON CONFLICT DO NOTHING
"""),
    # as a database in service has them: statistics, the visibility map (index-only scans) and
    # the GIN pending list merged (autovacuum would do it, later, in the middle of a run)
    ("vacuum analyze", "VACUUM (ANALYZE)"),
]


# Steps whose rows skip triggers (and foreign key checks: the rows are consistent by
# construction): migration 0021's thread versions, bumped row by row, would add a quarter of an
# hour to the large seed; a seeded thread is at version 0, as one nothing changed since it was
# posted.
WITHOUT_TRIGGERS = ("comments", "likes")


async def seed_scale(
    conn: asyncpg.Connection, community_id: int, admin_id: int, scale: Scale,
    *, verbose: bool = False,
) -> dict[str, float]:
    """Seed the community; returns the seconds each step took."""
    sizes = {
        "users": scale.users, "groups": scale.groups, "messages": scale.messages,
        "comments": scale.comments, "likes": scale.likes,
        "big_group": min(scale.big_group, scale.users), "topics": scale.topics,
    }
    timings: dict[str, float] = {}
    for label, sql in STEPS:
        started = time.monotonic()
        # ids are integers of our own, formatted in so that a step may hold several
        # statements (the simple query protocol)
        sql = sql.format(**sizes).replace("$1", str(int(community_id)))
        if label in WITHOUT_TRIGGERS:
            sql = f"SET session_replication_role = replica;\n{sql};\nRESET session_replication_role"
        await conn.execute(sql.replace("$2", str(int(admin_id))))
        timings[label] = time.monotonic() - started
        if verbose:
            print(f"  {label}: {timings[label]:.1f} s", flush=True)
    return timings


async def create_seeded(
    dsn: str, scale: Scale, *, verbose: bool = False
) -> tuple[int, int, dict[str, float]]:
    """Migrate `dsn`, create the community `bench.example` (admin admin@bench.example) and seed
    it; returns (community id, admin id, timings)."""
    from app.actions.communities import create_community
    from app.config import Settings
    from app.passwords import Passwords
    from migrations import apply_migrations
    from storage.db import create_pool

    await apply_migrations(dsn)
    pool = await create_pool(dsn, size=1)
    try:
        community, admin = await create_community(
            pool, Passwords(Settings().argon2), name="Bench", domain="bench.example",
            admin_email="admin@bench.example", admin_password="bench admin password",
            base_url="https://bench.example",
        )
    finally:
        await pool.close()
    # a connection of its own: the app's pool has a command timeout, the big steps take minutes
    conn = await asyncpg.connect(dsn, command_timeout=None)
    try:
        await conn.execute("SET statement_timeout = 0")
        timings = await seed_scale(conn, community.id, admin["id"], scale, verbose=verbose)
    finally:
        await conn.close()
    return community.id, admin["id"], timings


KEPT_PREFIX = "commons_feed_kept_"


def fingerprint(scale: Scale) -> str:
    """What a kept database was seeded from: the scale, these steps and every migration."""
    digest = hashlib.sha256(repr(scale).encode())
    for _, sql in STEPS:
        digest.update(sql.encode())
    for path in sorted((REPO_ROOT / "migrations").glob("*.sql")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:10]


@contextlib.asynccontextmanager
async def seeded_database(
    admin_dsn: str, label: str, scale: Scale, *, keep: bool = True, verbose: bool = False
) -> AsyncIterator[tuple[str, int, int]]:
    """A database seeded at `scale`: (dsn, community id, admin id).

    With `keep`, it is named after `fingerprint(scale)`, left in place at the end and reused
    by the next run that asks for the same seed (benchmarks write a few hundred rows into it:
    their posts; negligible next to the seed). Without, a throwaway one, dropped at the end."""
    from bench_db import create_database, fresh_database, with_database

    if not keep:
        async with fresh_database(admin_dsn, f"commons_feed_{label}") as dsn:
            cid, admin_id, _ = await create_seeded(dsn, scale, verbose=verbose)
            yield dsn, cid, admin_id
        return
    name = f"{KEPT_PREFIX}{label}_{fingerprint(scale)}"
    dsn = with_database(admin_dsn, name)
    conn = await asyncpg.connect(admin_dsn)
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
    finally:
        await conn.close()
    found = None
    if exists:
        conn = await asyncpg.connect(dsn)
        try:
            if await conn.fetchval("SELECT to_regclass('bench_seeded') IS NOT NULL"):
                found = await conn.fetchrow("SELECT community_id, admin_id FROM bench_seeded")
        finally:
            await conn.close()
    if found is not None:
        if verbose:
            print(f"  reusing {name}", flush=True)
        yield dsn, found["community_id"], found["admin_id"]
        return
    # a half-seeded one (an interrupted run) is started again
    await create_database(admin_dsn, name, replace=True)
    cid, admin_id, _ = await create_seeded(dsn, scale, verbose=verbose)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "CREATE TABLE bench_seeded AS SELECT $1::bigint AS community_id, "
            "$2::bigint AS admin_id", cid, admin_id)
    finally:
        await conn.close()
    yield dsn, cid, admin_id


async def drop_kept(admin_dsn: str) -> list[str]:
    from bench_db import drop_databases

    conn = await asyncpg.connect(admin_dsn)
    try:
        names = [r["datname"] for r in await conn.fetch(
            "SELECT datname FROM pg_database WHERE datname LIKE $1", KEPT_PREFIX + "%")]
    finally:
        await conn.close()
    await drop_databases(admin_dsn, names)
    return names


async def _main(args: argparse.Namespace) -> int:
    from tests.servers import ensure_postgres

    if args.drop_kept:
        print("dropped", await drop_kept(ensure_postgres()))
        return 0
    scale = replace(SCALES[args.scale], comments=args.comments, likes=args.likes)
    started = time.monotonic()
    async with seeded_database(ensure_postgres(), args.scale, scale, keep=args.keep,
                               verbose=True) as (dsn, _, _):
        conn = await asyncpg.connect(dsn)
        try:
            counts = {t: await conn.fetchval(f"SELECT count(*) FROM {t}") for t in (
                "users", "groups", "group_memberships", "follows", "messages", "comments",
                "likes", "message_recipients", "message_topics")}
        finally:
            await conn.close()
    print(f"seeded {args.scale} ({scale}) in {time.monotonic() - started:.1f} s: {counts}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", choices=sorted(SCALES), default="small")
    parser.add_argument("--comments", type=int, default=3, help="comments per message")
    parser.add_argument("--likes", type=int, default=5, help="likes per message")
    parser.add_argument("--keep", action="store_true",
                        help="keep the seeded database for later runs (and reuse a kept one)")
    parser.add_argument("--drop-kept", action="store_true", help="drop every kept database")
    return asyncio.run(_main(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
