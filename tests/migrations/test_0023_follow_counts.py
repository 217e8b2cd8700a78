"""Migration 0023: follow counts are kept in follow_counts, filled from the follows already
there, and kept in step by every follow and unfollow (at its COMMIT), cascades included."""

from __future__ import annotations

import asyncpg

from migrations import apply_on, discover
from tests.migrations.support import old_community

BEFORE = [m for m in discover() if m.name < "0023"]
REST = [m for m in discover() if m.name >= "0023"]

COUNTED = """
SELECT u.id,
       (SELECT count(*) FROM follows f WHERE f.followed_id = u.id)::int AS followers,
       (SELECT count(*) FROM follows f WHERE f.follower_id = u.id)::int AS following
FROM users u ORDER BY u.id
"""
KEPT = """
SELECT u.id, coalesce(c.followers, 0) AS followers, coalesce(c.following, 0) AS following
FROM users u LEFT JOIN follow_counts c ON c.user_id = u.id ORDER BY u.id
"""


async def test_0023_fills_the_counts_and_keeps_them_in_step(fresh_database_url: str) -> None:
    conn = await asyncpg.connect(fresh_database_url)
    try:
        await apply_on(conn, BEFORE)
        cid = await old_community(conn)
        ids = [await conn.fetchval(
            "INSERT INTO users (community_id, email, username) "
            "VALUES ($1, $2, $3) RETURNING id", cid, f"{n}@old.example", n)
            for n in ("ann", "bob", "cy", "dee")]
        follow = ("INSERT INTO follows (community_id, follower_id, followed_id) "
                  "VALUES ($1, $2, $3)")
        for a, b in [(0, 1), (2, 1), (3, 1), (1, 0), (0, 2)]:
            await conn.execute(follow, cid, ids[a], ids[b])

        await apply_on(conn, REST)
        assert [tuple(r) for r in await conn.fetch(KEPT)] == [
            tuple(r) for r in await conn.fetch(COUNTED)]
        assert [tuple(r)[1:] for r in await conn.fetch(KEPT)] == [
            (1, 2), (3, 1), (1, 1), (0, 1)]

        # each way at once, in one transaction: counted at its COMMIT
        async with conn.transaction():
            await conn.execute(follow, cid, ids[3], ids[0])
            await conn.execute(follow, cid, ids[0], ids[3])
            await conn.execute(
                "DELETE FROM follows WHERE follower_id = $1 AND followed_id = $2", ids[2], ids[1])
            assert await conn.fetchval(
                "SELECT followers FROM follow_counts WHERE user_id = $1", ids[0]) == 1
        assert [tuple(r) for r in await conn.fetch(KEPT)] == [
            tuple(r) for r in await conn.fetch(COUNTED)]
        # a user deleted takes their follows with them: the others' counts follow
        await conn.execute("DELETE FROM users WHERE id = $1", ids[1])
        assert [tuple(r) for r in await conn.fetch(KEPT)] == [
            tuple(r) for r in await conn.fetch(COUNTED)]
    finally:
        await conn.close()
