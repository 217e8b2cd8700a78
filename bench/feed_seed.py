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
an @mention, one in 10 a #topic (200 topics); `comments` comments and `likes` likes per message
(3 and 5 by default, as the issue measures); a year of activity. The viewer (the community's
admin) is in 30 groups including group 1, follows 50 people, is @mentioned in one message in 500,
has bookmarked 200 messages, and sees two sticky announcements. The tables are vacuumed and
analyzed at the end, as autovacuum keeps a database in service.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
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
SELECT $1, 'topic' || i FROM generate_series(1, 200) i ON CONFLICT DO NOTHING
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
               THEN '#topic' || (1 + (i / 10) % 200) ELSE 'usual' END
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
WHERE sm.n % 500 = 7
ON CONFLICT DO NOTHING
"""),
    ("message topics", """
INSERT INTO message_topics (community_id, message_id, topic_id, last_interacted_at)
SELECT $1, sm.id, t.id, sm.last_interacted_at FROM sm
JOIN topics t ON t.community_id = $1 AND t.name = 'topic' || (1 + (sm.n / 10) % 200)
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


async def seed_scale(
    conn: asyncpg.Connection, community_id: int, admin_id: int, scale: Scale,
    *, verbose: bool = False,
) -> dict[str, float]:
    """Seed the community; returns the seconds each step took."""
    sizes = {
        "users": scale.users, "groups": scale.groups, "messages": scale.messages,
        "comments": scale.comments, "likes": scale.likes,
        "big_group": min(scale.big_group, scale.users),
    }
    timings: dict[str, float] = {}
    for label, sql in STEPS:
        started = time.monotonic()
        # ids are integers of our own, formatted in so that a step may hold several
        # statements (the simple query protocol)
        await conn.execute(sql.format(**sizes).replace("$1", str(int(community_id)))
                           .replace("$2", str(int(admin_id))))
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


async def _main(args: argparse.Namespace) -> int:
    from bench_db import fresh_database

    from tests.servers import ensure_postgres

    scale = replace(SCALES[args.scale], comments=args.comments, likes=args.likes)
    started = time.monotonic()
    async with fresh_database(ensure_postgres(), "commons_feed_seed") as dsn:
        await create_seeded(dsn, scale, verbose=True)
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
    return asyncio.run(_main(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
