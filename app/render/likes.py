"""Likes (key order as keys.md "Like"; `parent_likes_count` only on creation)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from app.render.times import iso
from app.render.users import like_user
from storage.rows import EmbeddedUserRow

if TYPE_CHECKING:
    from app.render.feed import FeedData

Row = Mapping[str, Any]


def like(row: Row, user: EmbeddedUserRow, base: str, viewer_id: int) -> dict[str, Any]:
    """`unlikable`: the viewer may remove this like (it is theirs)."""
    return _like(row, like_user(user, base), viewer_id)


def like_of(row: Row, data: FeedData) -> dict[str, Any]:
    """`like` of a row on a page of the feed (its user rendered once per page)."""
    return _like(row, data.like_user(row["user_id"]), data.viewer.id)


def _like(row: Row, user: dict[str, Any], viewer_id: int) -> dict[str, Any]:
    return {
        "id": row["id"],
        "user": user,
        "created_at": iso(row["created_at"]),
        "unlikable": row["user_id"] == viewer_id,
    }


def created_like(
    row: Row, user: EmbeddedUserRow, base: str, viewer_id: int, parent_likes_count: int
) -> dict[str, Any]:
    out = like(row, user, base, viewer_id)
    out["parent_likes_count"] = parent_likes_count
    return out
