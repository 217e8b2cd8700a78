"""Activity JSON: a conversation's remarks and membership/name changes (spec "Activity").

Rows come from storage.activities (activity columns plus `actor_*`). An activity is rendered
the same for every viewer (it is also the data of the `remark.created` event), so nothing here
depends on who asks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.render.avatars import profile_photo
from app.render.times import iso
from storage.rows import ActivityRow

Row = Mapping[str, Any]

# activity.object.objectType: a remark is a note; a membership or name change is about the
# conversation itself (a collection of members).
OBJECT_TYPES = {"post": "note", "update": "collection", "join": "collection",
                "leave": "collection"}


def actor_name(row: ActivityRow) -> str:
    name = f"{row['actor_first_name']} {row['actor_last_name']}".strip()
    return name or row["actor_username"]


def actor(row: ActivityRow, base: str) -> dict[str, Any]:
    state = row["actor_state"]
    return {
        "id": row["actor_id"],
        "displayName": actor_name(row),
        "firstName": row["actor_first_name"],
        "image": profile_photo(base, row["actor_avatar_id"]),
        "inactive": state != "active",
        "terminated": state == "terminated",
    }


def title(row: ActivityRow) -> str:
    name = actor_name(row)
    verb = row["verb"]
    if verb == "join":
        return f"{name} joined the conversation"
    if verb == "leave":
        return f"{name} left the conversation"
    if verb == "update":
        new_name = row["text"]
        return (f"{name} renamed the conversation to {new_name}" if new_name
                else f"{name} removed the conversation's name")
    return f"{name} posted a remark"


def activity_object(row: ActivityRow, shared_message: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "id": row["id"],
        "objectType": OBJECT_TYPES[row["verb"]],
        "replied_to_id": None,
        "replied_to_type": None,
        "replied_to_message_id": None,
        "replied_to": None,
        "client_provided_guid": row["client_provided_guid"],
        "content": row["text"] or "",
        "html_body": row["html"] or "",
        "shared_message": shared_message,
    }


def location(row: ActivityRow) -> dict[str, float | None] | None:
    if row["longitude"] is None and row["latitude"] is None:
        return None
    return {"longitude": row["longitude"], "latitude": row["latitude"]}


def activity_attachment(rendered: dict[str, Any]) -> dict[str, Any]:
    """An Attachment JSON with its objectType first: image for images, file otherwise."""
    content_type = str(rendered.get("content_type") or "")
    kind = "image" if content_type.startswith("image/") else "file"
    return {"objectType": kind, **rendered}


def activity(
    row: ActivityRow,
    base: str,
    *,
    attachments: Sequence[dict[str, Any]] = (),
    shared_message: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`attachments` are rendered Attachment objects; `shared_message` a rendered Message."""
    return {
        "id": row["id"],
        "verb": row["verb"],
        "title": title(row),
        "actor": actor(row, base),
        "object": activity_object(row, shared_message),
        "published": iso(row["created_at"]),
        "location": location(row),
        "generator": {"name": "API", "url": f"{base}/api"},
        "attachments": [activity_attachment(a) for a in attachments],
        "target": {"id": row["conversation_id"], "objectType": "conversation"},
    }
