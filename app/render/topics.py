"""Topic and Tag JSON (shapes decided here; the spec shows none).

Topic: {id, name, description, html_description, url, messages_count, contributors_count,
editable, type: "Topic"}: counts are of what the viewer may read; `editable` says whether the
viewer may change the description (its creator, or a community admin); `url` is the topic page,
the same as a message tag's url.
Tag: {id, name, url, messages_count}: a tag is a topic as a #hashtag (message tags show
{name, url}).
Topic entry (search suggestions): {id, name, url, type: "Topic"}.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.markup.html import render_html
from app.urls import topic_url

Row = Mapping[str, Any]


def html_description(text: str | None, base: str) -> str | None:
    """The description as Markdown rendered like message bodies (#tags link to topics)."""
    return render_html(text, base_url=base, mentions={}) if text is not None else None


def topic(row: Row, base: str, *, editable: bool) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "description": row["description"],
        "html_description": html_description(row["description"], base),
        "url": topic_url(base, row["name"]),
        "messages_count": row["messages_count"],
        "contributors_count": row["contributors_count"],
        "editable": editable,
        "type": "Topic",
    }


def tag(row: Row, base: str) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "url": topic_url(base, row["name"]),
        "messages_count": row["messages_count"],
    }


def topic_entry(row: Row, base: str) -> dict[str, Any]:
    return {"id": row["id"], "name": row["name"], "url": topic_url(base, row["name"]),
            "type": "Topic"}
