"""`commons backfill-feed` (storage/feed_backfill.py) on a database in service: while it fills the
copies of last_interacted_at in small transactions, messages are commented (with @mentions and
#tags: new recipient and topic rows, and the thread moves), liked and edited (the body's
mentions and tags replaced). Afterwards every copy equals its message's last_interacted_at, and
the streams that walk the copies read in the right order."""

from __future__ import annotations

import asyncio
import itertools

from tests.app.test_cli import commons
from tests.app.views.feed_support import comment, message_ids, stream_id
from tests.support import Member, World

MESSAGES = 150

# Copies that differ from their message's (NULL included): none once the backfill is done.
STALE = """
SELECT (SELECT count(*) FROM message_recipients r JOIN messages m ON m.id = r.message_id
        WHERE m.community_id = $1
          AND r.last_interacted_at IS DISTINCT FROM m.last_interacted_at)
     + (SELECT count(*) FROM message_topics t JOIN messages m ON m.id = t.message_id
        WHERE m.community_id = $1
          AND t.last_interacted_at IS DISTINCT FROM m.last_interacted_at)
"""


async def _seed(world: World, admin: Member, me: Member) -> list[int]:
    """MESSAGES messages from admin, each mentioning me and tagged, with their recipient and
    topic rows as a database upgraded from before migration 0012 has them (no copies)."""
    cid = admin.community.id
    async with world.pool.acquire() as conn:
        topic = await conn.fetchval(
            "INSERT INTO topics (community_id, name) VALUES ($1, 'backfill') RETURNING id", cid)
        ids: list[int] = [r["id"] for r in await conn.fetch(
            "INSERT INTO messages (community_id, user_id, body, html_body, source, action, "
            "message_type, last_interacted_at, created_at) "
            "SELECT $1, $2, '@' || $3 || ' #backfill ' || i, '@' || $3 || ' #backfill ' || i, "
            "'api', '', 'status_message', now() - make_interval(mins => i), "
            "now() - make_interval(mins => i) "
            "FROM generate_series(1, $4::int) i RETURNING id",
            cid, admin.id, me.username, MESSAGES)]
        await conn.execute(
            "INSERT INTO message_recipients (community_id, message_id, user_id, reason, position) "
            "SELECT $1, id, $2, 'mention', 1000 FROM unnest($3::bigint[]) id", cid, me.id, ids)
        await conn.execute(
            "INSERT INTO message_topics (community_id, message_id, topic_id) "
            "SELECT $1, id, $2 FROM unnest($3::bigint[]) id", cid, topic, ids)
        await conn.execute(
            "UPDATE message_recipients SET last_interacted_at = NULL WHERE community_id = $1", cid)
        await conn.execute(
            "UPDATE message_topics SET last_interacted_at = NULL WHERE community_id = $1", cid)
    return ids


async def test_backfill_under_live_writes_leaves_every_copy_exact(
    world: World, database_url: str
) -> None:
    admin = await world.community()
    me = await world.user(admin, "Me")
    fan = await world.user(admin, "Fan")
    ids = await _seed(world, admin, me)
    cid = admin.community.id
    assert await world.pool.fetchval(STALE, cid) == 2 * MESSAGES

    done = asyncio.Event()
    writes = {"comment": 0, "like": 0, "edit": 0}
    # writes made while the backfill was part way (some copies filled, some not)
    interleaved = 0

    async def writer() -> None:
        nonlocal interleaved
        # round the messages, newest and oldest alike, until the backfill is over
        for n, message_id in enumerate(itertools.cycle(ids)):
            if done.is_set() and n >= 30:
                return
            empty = await world.pool.fetchval(
                "SELECT count(*) FROM message_recipients WHERE community_id = $1 "
                "AND last_interacted_at IS NULL", cid)
            if not done.is_set() and 0 < empty < MESSAGES:
                interleaved += 1
            kind = ("comment", "like", "edit")[n % 3]
            if kind == "comment":
                await comment(fan, message_id, f"@{me.username} see #backfill{n % 4}")
            elif kind == "like":
                resp = await fan.api.post(f"/api/messages/{message_id}/likes")
                assert resp.status in (200, 201), resp.text
            else:
                resp = await admin.api.put(
                    f"/api/messages/{message_id}",
                    json={"message": {"body": f"@{fan.username} edited #edited{n % 5}"}})
                assert resp.status == 200, resp.text
            writes[kind] += 1

    async def backfill() -> tuple[int, str, str]:
        try:
            # a batch of 2: hundreds of short transactions interleaved with the writes
            return await commons(database_url, "backfill-feed", "--batch", "2")
        finally:
            done.set()

    code_out_err, _ = await asyncio.gather(backfill(), writer())
    code, out, err = code_out_err
    assert code == 0, err
    assert '"filled"' in out
    assert min(writes.values()) >= 10, writes
    assert interleaved >= 5, (interleaved, writes)

    # every copy is its message's, none left empty
    assert await world.pool.fetchval(STALE, cid) == 0
    assert await world.pool.fetchval(
        "SELECT count(*) FROM message_recipients WHERE community_id = $1 "
        "AND last_interacted_at IS NULL", cid) == 0
    # and the streams that walk them are in page order: @Mentions (me: in the bodies not yet
    # edited and in the comments), a tag of the comments
    newest_first = [r["id"] for r in await world.pool.fetch(
        "SELECT DISTINCT m.id, m.last_interacted_at FROM messages m "
        "JOIN message_recipients r ON r.message_id = m.id "
        "WHERE m.community_id = $1 AND r.user_id = $2 "
        "ORDER BY m.last_interacted_at DESC, m.id DESC LIMIT 20", cid, me.id)]
    mentions = await stream_id(me, "@Mentions")
    page = await me.api.get(f"/api/streams/{mentions}/messages", params={"per_page": "20"})
    assert message_ids(page) == newest_first and len(newest_first) == 20
    tagged = [r["id"] for r in await world.pool.fetch(
        "SELECT DISTINCT m.id, m.last_interacted_at FROM messages m "
        "JOIN message_topics mt ON mt.message_id = m.id JOIN topics t ON t.id = mt.topic_id "
        "WHERE m.community_id = $1 AND t.name = 'backfill1' "
        "ORDER BY m.last_interacted_at DESC, m.id DESC", cid)]
    assert tagged
    page = await me.api.get("/api/messages", params={"tag": "backfill1", "per_page": "50"})
    assert message_ids(page) == tagged[:50]
