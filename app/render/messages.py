"""Messages (key order exactly keys.md "Message"; the create response adds
`in_origin_stream: true` as the 57th key), tags and sources.

Rows come from storage.messages (ROW columns); everything else a message shows comes from the
page's FeedData, loaded in a fixed number of queries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.access import may_comment, may_edit_message, may_like
from app.render.comments import external_resources, tag, thread
from app.render.feed import FeedData
from app.render.likes import likes_of
from app.render.polls import poll
from app.render.times import epoch, iso
from app.urls import message_permalink, message_url
from storage.rows import MessageRow

Row = Mapping[str, Any]

# source id -> (name, formal_name, with url). Real payloads: "web" has no url, "api" has one.
SOURCES: dict[str, tuple[str, str, bool]] = {
    "api": ("API", "API", True),
    "web": ("web", "Web App", False),
    "webhook": ("Webhook", "Incoming Webhook", True),
    "external_system": ("External System", "External System", True),
}

# Keys a shared message (and an activity's shared_message) goes without.
NOT_IN_SHARED = ("comments", "likes", "shared_message")


def source(source_id: str | None, base: str) -> dict[str, str] | None:
    if source_id is None:
        return None
    name, formal_name, with_url = SOURCES.get(source_id, (source_id, source_id, True))
    out = {"name": name}
    if with_url:
        out["url"] = f"{base}/api"
    out["formal_name"] = formal_name
    out["id"] = source_id
    return out


def _recipients(row: MessageRow, data: FeedData) -> list[dict[str, Any]]:
    return data.render_recipients(data.recipients.get(row["id"], ()))


def message(row: MessageRow, data: FeedData, *, shared: bool = False) -> dict[str, Any]:
    """The full message. `shared=True`: the form inside another message's `shared_message`,
    without comments, likes and shared_message."""
    base, viewer = data.base, data.viewer
    mid = row["id"]
    group_id = row["group_id"]
    rendered_group = (
        data.short_group(group_id)
        if group_id is not None and group_id in data.groups else None
    )
    poll_row = data.polls.get(mid)
    editable = may_edit_message(viewer, row)
    shared_row = data.shared.get(row["shared_message_id"]) if row["shared_message_id"] else None
    out: dict[str, Any] = {
        "id": mid,
        "user": data.embedded_user(row["user_id"]),
        "title": row["title"],
        "body": row["body"],
        "html_body": row["html_body"],
        "action": row["action"],
        "verb": row["verb"],
        "message_type": row["message_type"],
        "icon": None,
        "url": message_url(base, mid, row["title"]),
        "permalink_url": message_permalink(base, mid, row["title"]),
        "external_url": row["external_url"],
        "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]),
        "attachments": data.attachments.get(("message", mid), []),
        "media_files": data.media_files.get(("message", mid), []),
        "contains_url_only": None,
        "external_resources": external_resources(row["external_resource_ids"], data),
        "tags": [tag(name, base) for name in data.tags.get(mid, ())],
        "last_interacted_at": epoch(row["last_interacted_at"]),
        "group": rendered_group if rendered_group is not None else {},
        "category_id": None,
        "recipients": _recipients(row, data),
        "thumbnail_url": None,
        "player_url": None,
        "player_params": None,
        "likable": may_like(viewer, row["user_id"]) and may_comment(viewer, row),
        "ratable": False,
        "rating": None,
        "ratings_average": None,
        "ratings_count": None,
        "editable": editable,
        "deletable": editable,
        "watchable": False,
        "watch": None,
        "flag": {"id": row["viewer_flag_id"]} if row["viewer_flag_id"] is not None else None,
        "source": source(row["source"], base),
        "poll": poll(poll_row) if poll_row is not None else None,
        "embed": f"/polls/{poll_row['id']}" if poll_row is not None else None,
        "hidden": True if row["hidden"] else None,
        "subscribed": None,
        "groups": [rendered_group] if rendered_group is not None else [],
        "extensions": data.extensions.get(mid, list(row["extensions"] or ())),
        "new_group_id": None,
        "new_group_archived_at": None,
        "days_of_stickiness": row["days_of_stickiness"],
        "sticky_for_current_user": bool(row["sticky"]),
        "shareable": is_shareable(row),
        "share_count": row["share_count"],
        "client_provided_guid": row["client_provided_guid"],
        "comments_count": row["comments_count"],
        "comments": thread(row, data),
        "likes": likes_of(data.likes.get((mid, None), ()), data),
        "likes_count": row["likes_count"],
        "shared_message": (
            message(shared_row, data, shared=True)
            if shared_row is not None and not shared else None
        ),
        "commentable": may_comment(viewer, row),
    }
    if shared:
        for key in NOT_IN_SHARED:
            del out[key]
    return out


def is_shareable(row: MessageRow) -> bool:
    """A message can be shared (in a remark, or by another message) when it has no group or
    its group is public: sharing never carries private content out of its group."""
    return row["group_id"] is None or row["group_permission"] == "public"


def created_message(row: MessageRow, data: FeedData) -> dict[str, Any]:
    """The create response: the message plus `in_origin_stream: true` (57 keys)."""
    out = message(row, data)
    out["in_origin_stream"] = True
    return out
