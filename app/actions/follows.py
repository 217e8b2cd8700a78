"""Following and unfollowing users."""

from __future__ import annotations

import asyncpg

from app.access import access_user, require_self_or_admin
from app.actions.notifications import notify_follow
from app.actions.work import work
from app.context import Viewer
from app.errors import Invalid, NotFound
from realtime.hub import Hub
from storage import follows


async def follow(pool: asyncpg.Pool, viewer: Viewer, user_id: int, hub: Hub | None = None) -> None:
    """Following someone new notifies them (followers); following again changes nothing."""
    async with work(pool, hub, viewer.community_id) as w:
        target = await access_user(w.conn, viewer, user_id)
        if target["id"] == viewer.id:
            raise Invalid("You can't follow yourself", fields={"user_id": ["is yourself"]})
        if target["state"] != "active":
            raise Invalid("That user is not active", fields={"user_id": ["is not active"]})
        if await follows.follow(w.conn, viewer.community_id, viewer.id, user_id):
            w.emit(*await notify_follow(w.conn, viewer, user_id))


async def unfollow(pool: asyncpg.Pool, viewer: Viewer, follower_id: int, followed_id: int) -> None:
    """`follower_id` stops following `followed_id`; only they themselves or an admin may."""
    async with work(pool, None, viewer.community_id) as w:
        await access_user(w.conn, viewer, followed_id)
        if follower_id != viewer.id:
            await access_user(w.conn, viewer, follower_id)  # 404 before 403
        require_self_or_admin(viewer, follower_id)
        if not await follows.unfollow(w.conn, viewer.community_id, follower_id, followed_id):
            raise NotFound("Not following that user")
