"""Following and unfollowing users."""

from __future__ import annotations

import asyncpg

from app.access import access_user, require_self_or_admin
from app.context import Viewer
from app.errors import Invalid, NotFound
from storage import follows
from storage.db import transaction


async def follow(pool: asyncpg.Pool, viewer: Viewer, user_id: int) -> None:
    async with transaction(pool) as conn:
        target = await access_user(conn, viewer, user_id)
        if target["id"] == viewer.id:
            raise Invalid("You can't follow yourself", fields={"user_id": ["is yourself"]})
        if target["state"] != "active":
            raise Invalid("That user is not active", fields={"user_id": ["is not active"]})
        await follows.follow(conn, viewer.community_id, viewer.id, user_id)


async def unfollow(pool: asyncpg.Pool, viewer: Viewer, follower_id: int, followed_id: int) -> None:
    """`follower_id` stops following `followed_id`; only they themselves or an admin may."""
    require_self_or_admin(viewer, follower_id)
    async with transaction(pool) as conn:
        await access_user(conn, viewer, followed_id)
        if not await follows.unfollow(conn, viewer.community_id, follower_id, followed_id):
            raise NotFound("Not following that user")
