"""Follow relations between users of one community."""

from __future__ import annotations

import asyncpg

FOLLOW = """
INSERT INTO follows (community_id, follower_id, followed_id) VALUES ($1, $2, $3)
ON CONFLICT (follower_id, followed_id) DO NOTHING
"""
UNFOLLOW = """
DELETE FROM follows WHERE community_id = $1 AND follower_id = $2 AND followed_id = $3
"""


async def follow(
    conn: asyncpg.Connection, community_id: int, follower_id: int, followed_id: int
) -> bool:
    """True when a new relation was made (False: it already existed)."""
    status = await conn.execute(FOLLOW, community_id, follower_id, followed_id)
    return bool(status.endswith(" 1"))


async def unfollow(
    conn: asyncpg.Connection, community_id: int, follower_id: int, followed_id: int
) -> bool:
    status = await conn.execute(UNFOLLOW, community_id, follower_id, followed_id)
    return bool(status.endswith(" 1"))
