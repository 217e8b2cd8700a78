"""Hooks the feed actions call after commit: notifications (at_mentions, replies, broadcast),
their realtime events and push jobs. Each receives ids only (re-read what you need: the change
is committed) and the `Outbox` of the action's AfterCommit (`AfterCommit(Outbox(pool, hub))`);
without one (None) a hook does nothing. The work runs in a transaction of its own
(app.actions.notifications.deliver); a failure is logged by AfterCommit and never undoes the
message.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from app.actions import notifications
from app.actions.after_commit import Outbox
from realtime.events import NewEvent


async def message_created(
    outbox: Outbox | None,
    community_id: int,
    message_id: int,
    author_id: int,
    mentioned_user_ids: Sequence[int],
) -> None:
    """A message was posted; `mentioned_user_ids` were @mentioned or addressed in it.
    at_mentions for them; broadcast for everyone else who may read an announcement."""
    if outbox is None:
        return

    async def make(conn: asyncpg.Connection) -> list[NewEvent]:
        return await notifications.notify_new_message(
            conn, community_id, message_id, author_id, mentioned_user_ids
        )

    await notifications.deliver(outbox, community_id, make)


async def message_updated(
    outbox: Outbox | None,
    community_id: int,
    message_id: int,
    newly_mentioned_user_ids: Sequence[int],
) -> None:
    """A message was edited; `newly_mentioned_user_ids` are mentioned now and were not before."""
    if outbox is None or not newly_mentioned_user_ids:
        return

    async def make(conn: asyncpg.Connection) -> list[NewEvent]:
        return await notifications.notify_message_mentions(
            conn, community_id, message_id, newly_mentioned_user_ids
        )

    await notifications.deliver(outbox, community_id, make)


async def message_deleted(community_id: int, message_id: int) -> None:
    """A message (and its comments, likes, flags, poll) was deleted. Nothing to do: the
    notifications about it and its comments went with it (foreign keys, migration 0009), and
    their pending pushes are skipped by the worker's re-check."""


async def comment_created(
    outbox: Outbox | None,
    community_id: int,
    message_id: int,
    comment_id: int,
    author_id: int,
    mentioned_user_ids: Sequence[int],
) -> None:
    """A comment was added: at_mentions for whom it @mentions, replies for the thread's author
    and commenters."""
    if outbox is None:
        return

    async def make(conn: asyncpg.Connection) -> list[NewEvent]:
        return await notifications.notify_new_comment(
            conn, community_id, message_id, comment_id, author_id, mentioned_user_ids
        )

    await notifications.deliver(outbox, community_id, make)


async def liked(
    community_id: int, message_id: int, comment_id: int | None, like_id: int, user_id: int
) -> None:
    """A message (comment_id None) or a comment was liked. No notification: the interface's
    filters have no kind for likes."""
