"""The stream pages are planned as index walks (issue 14, docs/feed.md): at a moderate seeded size
(20,000 messages, ANALYZEd), no page query scans a feed table sequentially and no sort sees
more than the candidates of the page (a bounded number per source), whatever the stream.

Home, as the app reads it, is a k-way merge (a Merge Append of one walk per group of the viewer
and one per other source) with nothing above it that sees more than the page: a deep Home page
costs about the page, not groups x depth.

These assert the plan's shape (EXPLAIN (FORMAT JSON)), never timing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from storage import streams
from storage.messages import MessageQuery, home_group_count
from tests.support import World

MESSAGES = 20_000
USERS = 400
GROUPS = 60
# Tables whose size grows with the community: never read whole.
FEED_TABLES = {"messages", "message_recipients", "message_topics", "flags", "comments"}
# A sort may see the page's candidates (a bounded number per source), never the community.
MAX_SORTED = MESSAGES // 8
# A deep page in proportion to this table (100 rows deep, 0.5% of it; page 50 of a
# million-message community is 0.1%): much deeper into a 20,000-row table, reading it whole is
# truly cheaper and the planner rightly says so.
DEEP_PAGE = 5

SEED = f"""
INSERT INTO users (community_id, email, username, first_name, last_name)
SELECT $1, 'u' || i || '@example.com', 'seed' || i, 'Seed', 'User ' || i
FROM generate_series(1, {USERS}) i;

INSERT INTO groups (community_id, name, groupname, permission)
SELECT $1, 'Group ' || i, 'seedgroup' || i, CASE WHEN i % 3 = 0 THEN 'private' ELSE 'public' END
FROM generate_series(1, {GROUPS}) i;

CREATE TEMP TABLE seed_users AS
SELECT row_number() OVER (ORDER BY id) AS n, id FROM users WHERE community_id = $1;
CREATE TEMP TABLE seed_groups AS
SELECT row_number() OVER (ORDER BY id) AS n, id FROM groups
WHERE community_id = $1 AND groupname LIKE 'seedgroup%';

-- every user in about 5 groups, following about 10 people
INSERT INTO group_memberships (community_id, group_id, user_id)
SELECT $1, g.id, u.id FROM seed_users u JOIN seed_groups g ON (u.n + g.n) % 12 = 0;
INSERT INTO follows (community_id, follower_id, followed_id)
SELECT $1, a.id, b.id FROM seed_users a JOIN seed_users b ON b.n <> a.n AND (b.n - a.n) % 40 = 7;

-- 60% in groups, one announcement in 2,000, a thread every second
INSERT INTO messages (community_id, user_id, group_id, body, is_announcement, sticky_until,
                      external_system_id, last_interacted_at, created_at)
SELECT $1, u.id, g.id, 'message ' || i, i % 2000 = 0,
       CASE WHEN i % 4000 = 0 THEN now() + interval '3 days' END,
       CASE WHEN i % 50 = 0 THEN 7 END,
       now() - make_interval(secs => i), now() - make_interval(secs => i)
FROM generate_series(1, {MESSAGES}) i
JOIN seed_users u ON u.n = 1 + (i * 7919) % {USERS}
LEFT JOIN seed_groups g ON i % 5 < 3 AND g.n = 1 + (i * 104729) % {GROUPS};

CREATE TEMP TABLE seed_messages AS
SELECT row_number() OVER (ORDER BY id) AS n, id FROM messages WHERE community_id = $1;

-- one message in 10 mentions someone; one in 10 carries one of 20 topics
INSERT INTO message_recipients (community_id, message_id, user_id, reason)
SELECT $1, m.id, u.id, 'mention' FROM seed_messages m
JOIN seed_users u ON u.n = 1 + (m.n * 31) % {USERS} WHERE m.n % 10 = 0;
INSERT INTO topics (community_id, name) SELECT $1, 'topic' || i FROM generate_series(1, 20) i;
INSERT INTO message_topics (community_id, message_id, topic_id)
SELECT $1, m.id, t.id FROM seed_messages m
JOIN topics t ON t.community_id = $1 AND t.name = 'topic' || (1 + m.n % 20)
WHERE m.n % 10 = 3;
INSERT INTO comments (community_id, message_id, user_id, text)
SELECT $1, m.id, u.id, 'comment' FROM seed_messages m JOIN seed_users u ON u.n = 1 + m.n % {USERS}
WHERE m.n % 2 = 0;
INSERT INTO flags (community_id, user_id, message_id)
SELECT $1, u.id, m.id FROM seed_messages m JOIN seed_users u ON u.n = 1 + m.n % {USERS}
WHERE m.n % 7 = 0;
"""


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


def _problems(plan: dict[str, Any]) -> list[str]:
    found = []
    for node in _nodes(plan):
        kind = node["Node Type"]
        if kind == "Seq Scan" and node.get("Relation Name") in FEED_TABLES:
            found.append(f"Seq Scan on {node['Relation Name']}")
        if kind in ("Sort", "Incremental Sort") and node["Plan Rows"] > MAX_SORTED:
            found.append(f"Sort of {node['Plan Rows']} rows")
    return found


@pytest.fixture
async def seeded(world: World) -> tuple[World, int, int]:
    admin = await world.community()
    cid = admin.community.id
    async with world.pool.acquire() as conn:
        await conn.execute(SEED.replace("$1", str(cid)))
        await conn.execute("ANALYZE")
        viewer = await conn.fetchval(
            "SELECT id FROM users WHERE community_id = $1 AND username = 'seed12'", cid
        )
    return world, cid, viewer


def _merge_problems(plan: dict[str, Any], k: int, groups: int) -> list[str]:
    """A Home page read as a k-way merge: a Merge Append with a branch per group of the viewer
    (and the other sources), and nothing above it that sees more than the page's k rows (no
    sort or hash of every branch's candidates)."""
    def above(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
        # the nodes on top of the merge (its own branches are checked by _problems)
        yield node
        if node["Node Type"] != "Merge Append":
            for child in node.get("Plans", ()):
                yield from above(child)

    merges = [n for n in _nodes(plan) if n["Node Type"] == "Merge Append"]
    found = [] if merges else ["no Merge Append"]
    if merges and (branches := max(len(n["Plans"]) for n in merges)) < groups:
        found.append(f"a merge of {branches} branches for {groups} groups")
    for node in above(plan):
        if node["Node Type"] in ("Sort", "Incremental Sort", "HashAggregate", "Aggregate") \
                and node["Plan Rows"] > k:
            found.append(f"{node['Node Type']} of {node['Plan Rows']} rows above the merge")
    return found


async def _plan(world: World, sql: str, args: list[Any]) -> dict[str, Any]:
    async with world.pool.acquire() as conn:
        raw = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args)
    # the pool decodes json itself
    plan: dict[str, Any] = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    return plan


async def test_stream_pages_walk_indexes(seeded: tuple[World, int, int]) -> None:
    """One seeded table (seeding is most of the cost) for every stream's page, the stream list
    and a control that shows the check can fail."""
    world, cid, viewer = seeded
    group_id = await world.pool.fetchval(
        "SELECT group_id FROM group_memberships WHERE user_id = $1 LIMIT 1", viewer
    )
    author = await world.pool.fetchval(
        "SELECT followed_id FROM follows WHERE follower_id = $1 LIMIT 1", viewer
    )
    since = datetime.now(UTC) - timedelta(hours=2)
    queries = {
        "home": MessageQuery(stream="home", sticky_first=True),
        "mentions": MessageQuery(stream="mentions"),
        "bookmarked": MessageQuery(stream="bookmarked"),
        "sent": MessageQuery(stream="sent"),
        "company": MessageQuery(stream="company", sticky_first=True),
        "group": MessageQuery(group_id=group_id),
        "user": MessageQuery(stream="company", author_id=author),
        "user in home": MessageQuery(stream="home", author_id=author, sticky_first=True),
        "external system": MessageQuery(external_system_id=7),
        "tag": MessageQuery(stream="company", topic="topic4"),
        "since": MessageQuery(stream="home", since=since, sticky_first=True),
    }
    problems = {}
    for name, query in queries.items():
        for page in (1, DEEP_PAGE):
            sql, args = query.build(offset=(page - 1) * 20, limit=21)
            plan = await _plan(world, sql, [cid, viewer, False, *args])
            if found := _problems(plan):
                problems[f"{name} page {page}"] = found
    assert problems == {}

    # Home as the app reads it (storage.messages.list_page): the viewer's groups first, each a
    # branch of a k-way merge, so that a deep page costs about the page, not groups x depth
    groups = await home_group_count(world.pool, cid, viewer)
    assert groups >= 3
    for name, query in {
        "home": queries["home"], "since": queries["since"],
    }.items():
        for page in (1, DEEP_PAGE, 50):
            k = page * 20 + 1
            sql, args = query.build(offset=(page - 1) * 20, limit=21, home_groups=groups)
            plan = await _plan(world, sql, [cid, viewer, False, *args])
            if found := _merge_problems(plan, k, groups) + _problems(plan):
                problems[f"{name} merged page {page}"] = found
    assert problems == {}
    # a viewer in very many groups reads page 1 as k rows per group (a statement with a branch
    # each would cost more to plan than it saves): storage.messages.MERGE_GROUPS
    sql, args = queries["home"].build(offset=0, limit=21, home_groups=500)
    assert "no Merge Append" in _merge_problems(
        await _plan(world, sql, [cid, viewer, False, *args]), 21, groups)
    # the check can fail: reading every group's k rows, then sorting them all, is caught
    sql, args = queries["home"].build(offset=49 * 20, limit=21)
    old_shape = _merge_problems(await _plan(world, sql, [cid, viewer, False, *args]), 1001,
                                groups)
    assert "no Merge Append" in old_shape and any("above the merge" in p for p in old_shape)

    # GET /api/streams: each stream's latest activity
    await streams.ensure(world.pool, cid, viewer, False)
    plan = await _plan(world, streams.OF_VIEWER,
                       [cid, viewer, False, list(streams.kinds_for(False))])
    assert _problems(plan) == []

    # the check can fail: the old shape (sort everything by sticky first) is caught
    old = (
        "SELECT m.id FROM messages m WHERE m.community_id = $1 AND m.user_id <> $2 AND NOT $3 "
        "ORDER BY (m.is_announcement AND m.sticky_until > now()) DESC, "
        "m.last_interacted_at DESC LIMIT 21"
    )
    assert _problems(await _plan(world, old, [cid, viewer, False])) != []
