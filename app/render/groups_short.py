"""The short forms of a group used inside messages (group, groups[], recipients[]).

Rows carry the columns of storage.groups.SHORT_COLUMNS:
id, name, groupname, permission, chat_enabled, post_enabled, avatar_id, state.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from app.render.avatars import group_avatars
from app.urls import group_url
from storage.rows import ShortGroupRow

Row = Mapping[str, Any]


def short_group(row: ShortGroupRow, base: str) -> dict[str, Any]:
    """`message.group` and `message.groups[]` (13 keys, as the 2017 payloads)."""
    url = group_url(base, row["id"], row["groupname"])
    return {
        "id": row["id"],
        "name": row["name"],
        "html_name": html.escape(row["name"]),
        "url": url,
        "type": "Group",
        "avatars": group_avatars(base, row["avatar_id"]),
        "username": row["groupname"],
        "groupname": row["groupname"],
        "private": row["permission"] != "public",
        "external_contributor": row["permission"] == "external_contributor",
        "chat_enabled": row["chat_enabled"],
        "post_enabled": row["post_enabled"] and row["state"] == "active",
        "activity_url": f"{url}/messages_activity",
    }


def recipient_group(row: ShortGroupRow, base: str) -> dict[str, Any]:
    """A group in `message.recipients[]`: no groupname, plus mention_name."""
    out = short_group(row, base)
    del out["groupname"]
    out["mention_name"] = row["groupname"]
    return out
