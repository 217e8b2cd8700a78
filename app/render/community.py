"""Community info and content filter JSON (shapes decided here; the spec shows none).

community_info: {id, name, domain, url, api_url, realtime_url, avatars (system avatar set),
member_count (active users), group_count (groups the viewer may see listed), badge_count,
created_at, features {...: bool}, limits {per_page_default, per_page_max, attachment_max_bytes,
suggestions_max_results}}.

content filter: {id, word, created_at}.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.render.avatars import system_avatars
from app.render.meetings import iso_time
from storage.communities import Community

Row = Mapping[str, Any]

# What this server implements, for clients that adapt their menus.
FEATURES = {
    "messages": True,
    "comments": True,
    "likes": True,
    "polls": True,
    "thanks": True,
    "badges": True,
    "topics": True,
    "groups": True,
    "group_chat": True,
    "conversations": True,
    "realtime": True,
    "push_notifications": True,
    "content_filters": True,
    "meetings": True,
    "external_systems": True,
    "webhooks": True,
}


def community_summary(community: Community) -> dict[str, Any]:
    """The `community` of GET /api/userinfo (decisions.md). Commons keeps no community-wide
    default profile photo (each default avatar is the system one), so its id is null."""
    return {"id": community.id, "name": community.name, "domain": community.domain,
            "default_profile_photo_id": None}


def community_info(row: Row, *, attachment_max_bytes: int) -> dict[str, Any]:
    base = row["base_url"]
    ws_base = "wss://" + base[len("https://"):] if base.startswith("https://") else (
        "ws://" + base[len("http://"):] if base.startswith("http://") else base
    )
    return {
        "id": row["id"],
        "name": row["name"],
        "domain": row["domain"],
        "url": base,
        "api_url": f"{base}/api",
        "realtime_url": f"{ws_base}/api/realtime",
        "avatars": system_avatars(base),
        "member_count": row["member_count"],
        "group_count": row["group_count"],
        "badge_count": row["badge_count"],
        "created_at": iso_time(row["created_at"]),
        "features": dict(FEATURES),
        "limits": {
            "per_page_default": 20,
            "per_page_max": 500,
            "attachment_max_bytes": attachment_max_bytes,
            "suggestions_max_results": 500,
        },
    }


def content_filter(row: Row) -> dict[str, Any]:
    return {"id": row["id"], "word": row["word"], "created_at": iso_time(row["created_at"])}
