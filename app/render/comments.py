"""Comments: the 17 keys of keys.md "Comment" in their order, then what interface.md lists
and the captured payloads lack, in the interface's order: recipients (whom the comment
addresses), watchable, watch, tags (the comment's own #tags) (decisions.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.access import may_comment, may_delete_comment, may_edit_comment, may_like
from app.render.feed import FeedData
from app.render.likes import likes_of
from app.render.times import iso
from app.urls import comment_permalinks, comment_url, topic_url
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
    return _comment(row, message, data,
                    comment_permalinks(data.base, message["id"], message["title"]),
                    may_comment(data.viewer, message))


def thread(message: MessageRow, data: FeedData) -> list[dict[str, Any]]:
    """The comments of `message` on this page (data.comments), each as `comment` renders it;
    what they share is worked out once (issue 13)."""
    rows = data.comments.get(message["id"])
    if not rows:
        return []
    permalink_base = comment_permalinks(data.base, message["id"], message["title"])
    commentable = may_comment(data.viewer, message)
    return [_comment(c, message, data, permalink_base, commentable) for c in rows]


def _comment(
    row: CommentRow, message: MessageRow, data: FeedData, permalink_base: str,
    commentable: bool,
) -> dict[str, Any]:
    base, viewer = data.base, data.viewer
    comment_id = row["id"]
    subject = ("comment", comment_id)
    likes = data.likes.get((row["message_id"], comment_id))
    tags = data.comment_tags.get(comment_id)
    recipients = data.comment_recipients.get(comment_id)
    resource_ids = row["external_resource_ids"]
    return {
        "id": comment_id,
        "url": comment_url(base, row["message_id"], comment_id),
        "user": data.embedded_user(row["user_id"]),
        "text": row["text"],
        "html_body": row["html_body"],
        "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]),
        "attachments": data.attachments.get(subject, []),
        "media_files": data.media_files.get(subject, []),
        "permalink_url": f"{permalink_base}{comment_id}",
        "editable": may_edit_comment(viewer, row),
        "deletable": may_delete_comment(viewer, row, message),
        "likable": may_like(viewer, row["user_id"]) and commentable,
        "external_resources": external_resources(resource_ids, data) if resource_ids else [],
        "likes": likes_of(likes, data) if likes else [],
        "likes_count": row["likes_count"],
        "thumbnail_url": None,
        "recipients": data.render_recipients(recipients) if recipients else [],
        # nothing is watched in Commons (as on messages)
        "watchable": False,
        "watch": None,
        "tags": [tag(name, base) for name in tags] if tags else [],
    }
