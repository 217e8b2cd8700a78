"""Following and unfollowing users."""

from __future__ import annotations

import asyncpg

from app.access import access_user, require_self_or_admin
from app.actions.notifications import notify_follow
from app.context import Viewer
from app.errors import Invalid, NotFound
from realtime.events import Event
from realtime.hub import Hub
from storage import events as event_store
from storage import follows
from storage.db import transaction


async def follow(pool: asyncpg.Pool, viewer: Viewer, user_id: int, hub: Hub | None = None) -> None:
    """Following someone new notifies them (followers); following again changes nothing."""
    published: list[Event] = []
    async with transaction(pool) as conn:
        target = await access_user(conn, viewer, user_id)
        if target["id"] == viewer.id:
            raise Invalid("You can't follow yourself", fields={"user_id": ["is yourself"]})
        if target["state"] != "active":
            raise Invalid("That user is not active", fields={"user_id": ["is not active"]})
        if await follows.follow(conn, viewer.community_id, viewer.id, user_id):
            events = await notify_follow(conn, viewer, user_id)
            published = await event_store.append_events(conn, viewer.community_id, events)
    if hub is not None:
        await hub.publish(published)


async def unfollow(pool: asyncpg.Pool, viewer: Viewer, follower_id: int, followed_id: int) -> None:
    """`follower_id` stops following `followed_id`; only they themselves or an admin may."""
    async with transaction(pool) as conn:
        await access_user(conn, viewer, followed_id)
        if follower_id != viewer.id:
            await access_user(conn, viewer, follower_id)  # 404 before 403
        require_self_or_admin(viewer, follower_id)
        if not await follows.unfollow(conn, viewer.community_id, follower_id, followed_id):
            raise NotFound("Not following that user")
