"""Likes (key order as keys.md "Like"; `parent_likes_count` only on creation)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def likes_of(rows: Sequence[Row], data: FeedData) -> list[dict[str, Any]]:
    """`like` of each row on a page of the feed (each user rendered once per page), in one
    loop (a page has a hundred likes or more: issue 13)."""
    viewer_id = data.viewer.id
    user = data.like_user
    return [
        {
            "id": row["id"],
            "user": user(row["user_id"]),
            "created_at": iso(row["created_at"]),
            "unlikable": row["user_id"] == viewer_id,
        }
        for row in rows
    ]


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
