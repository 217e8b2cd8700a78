"""ReachExtension JSON: the interface's table in its order, the color settings in the order the
interface lists them, then the container and the custom stream's filters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.urls import reach_extension_permalink, reach_extension_url
from storage.reach_extensions import COLORS

Row = Mapping[str, Any]


def reach_extension(row: Row, base: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": row["id"],
        "name": row["name"],
        "external_system_id": row["external_system_id"],
        "group_id": row["group_id"],
        "url": reach_extension_url(base, row["id"]),
        "permanent_url": reach_extension_permalink(base, row["id"]),
        "extension_type": row["extension_type"],
        "stream_type": row["stream_type"],
        "button_type": row["button_type"],
        "install_type": row["install_type"],
        "state": row["state"],
        "button_verb": row["button_verb"],
        "profile_heading": bool(row["profile_heading"]),
        "days_ago": row["days_ago"],
        "login_required": row["login_required"],
        "token": row["token"],
        "reach_border_style": row["reach_border_style"],
    }
    for color in COLORS:
        out[color] = row[color]
    out["container_id"] = row["group_id"]
    out["container_type"] = "Group" if row["group_id"] is not None else None
    out["reach_extension_tag_filters"] = [{"tag_name": t} for t in row["tag_filters"]]
    out["reach_extension_user_filters"] = [{"user_id": u} for u in row["user_filter_ids"]]
    return out
