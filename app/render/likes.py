"""Likes (key order as keys.md "Like"; `parent_likes_count` only on creation)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.render.times import iso
from app.render.users import like_user

Row = Mapping[str, Any]


def like(row: Row, user: Row, base: str, viewer_id: int) -> dict[str, Any]:
    """`unlikable`: the viewer may remove this like (it is theirs)."""
    return {
        "id": row["id"],
        "user": like_user(user, base),
        "created_at": iso(row["created_at"]),
        "unlikable": row["user_id"] == viewer_id,
    }


def created_like(
    row: Row, user: Row, base: str, viewer_id: int, parent_likes_count: int
) -> dict[str, Any]:
    out = like(row, user, base, viewer_id)
    out["parent_likes_count"] = parent_likes_count
    return out
