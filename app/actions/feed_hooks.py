"""Hooks the feed actions call after commit: where notifications (at_mentions, replies, likes),
realtime events and push jobs will be sent from. They do nothing yet; the notifications issue
fills them in. Each receives ids only (re-read what you need: the change is committed).
"""

from __future__ import annotations

from collections.abc import Sequence


async def message_created(
    community_id: int, message_id: int, author_id: int, mentioned_user_ids: Sequence[int]
) -> None:
    """A message was posted; `mentioned_user_ids` were @mentioned or addressed in it."""


async def message_updated(
    community_id: int, message_id: int, newly_mentioned_user_ids: Sequence[int]
) -> None:
    """A message was edited; `newly_mentioned_user_ids` are mentioned now and were not before."""


async def message_deleted(community_id: int, message_id: int) -> None:
    """A message (and its comments, likes, flags, poll) was deleted."""


async def comment_created(
    community_id: int,
    message_id: int,
    comment_id: int,
    author_id: int,
    mentioned_user_ids: Sequence[int],
) -> None:
    """A comment was added (`replies` for the thread's author and commenters)."""


async def liked(
    community_id: int, message_id: int, comment_id: int | None, like_id: int, user_id: int
) -> None:
    """A message (comment_id None) or a comment was liked."""
