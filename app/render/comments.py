"""Comments: the 17 keys of keys.md "Comment" in their order, then what interface.md lists
and the captured payloads lack, in the interface's order: recipients (whom the comment
addresses), watchable, watch, tags (the comment's own #tags) (decisions.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.access import may_comment, may_delete_comment, may_edit_comment, may_like
from app.render.feed import FeedData
from app.render.likes import like_of
from app.render.times import iso
from app.urls import comment_permalink, comment_url, topic_url
from storage.rows import CommentRow, MessageRow

Row = Mapping[str, Any]


def tag(name: str, base: str) -> dict[str, str]:
    return {"name": name, "url": topic_url(base, name)}


def external_resource(row: Row) -> dict[str, Any]:
    """A link found in a body. Nothing is fetched: title is the URL until a previewer fills
    in the rest; the other fields are null or empty."""
    return {
        "id": row["id"],
        "url": row["url"],
        "title": row["title"] or row["url"],
        "description": row["description"],
        "canonical_hashtag": None,
        "type": row["resource_type"],
        "source": None,
        "tags": [],
        "oembed": row["oembed"],
        "media_files": [],
        # listed by interface.md, absent from the captured payloads: last (decisions.md)
        "open_in_new_tab": True,
    }


def external_resources(ids: list[int] | None, data: FeedData) -> list[dict[str, Any]]:
    return [external_resource(data.resources[i]) for i in ids or () if i in data.resources]


def comment(row: CommentRow, message: MessageRow, data: FeedData) -> dict[str, Any]:
    """`message` is the row of the comment's message (for its slug and group rights)."""
    base, viewer = data.base, data.viewer
    subject = ("comment", row["id"])
    likes = data.likes.get((row["message_id"], row["id"]), [])
    return {
        "id": row["id"],
        "url": comment_url(base, row["message_id"], row["id"]),
        "user": data.embedded_user(row["user_id"]),
        "text": row["text"],
        "html_body": row["html_body"],
        "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]),
        "attachments": data.attachments.get(subject, []),
        "media_files": data.media_files.get(subject, []),
        "permalink_url": comment_permalink(base, row["message_id"], message["title"], row["id"]),
        "editable": may_edit_comment(viewer, row),
        "deletable": may_delete_comment(viewer, row, message),
        "likable": may_like(viewer, row["user_id"]) and may_comment(viewer, message),
        "external_resources": external_resources(row["external_resource_ids"], data),
        "likes": [like_of(lk, data) for lk in likes],
        "likes_count": row["likes_count"],
        "thumbnail_url": None,
        "recipients": data.render_recipients(data.comment_recipients.get(row["id"], ())),
        # nothing is watched in Commons (as on messages)
        "watchable": False,
        "watch": None,
        "tags": [tag(name, base) for name in data.comment_tags.get(row["id"], ())],
    }
