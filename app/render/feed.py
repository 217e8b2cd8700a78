"""What a page of messages needs besides its own rows, batch-loaded once per page
(app.actions.messages.load_feed) and shared by the message and comment renderers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.context import Viewer

Row = Mapping[str, Any]
Subject = tuple[str, int]  # ("message" | "comment", id)


@dataclass
class FeedData:
    base: str
    viewer: Viewer
    users: Mapping[int, Row] = field(default_factory=dict)
    # short group rows (storage.messages.GROUPS) with viewer_role and listed
    groups: Mapping[int, Row] = field(default_factory=dict)
    # message id -> message-level recipient rows (user_id or group_id), in order
    recipients: Mapping[int, list[Row]] = field(default_factory=dict)
    tags: Mapping[int, list[str]] = field(default_factory=dict)
    resources: Mapping[int, Row] = field(default_factory=dict)
    # rendered attachments and media files of each subject
    attachments: Mapping[Subject, list[dict[str, Any]]] = field(default_factory=dict)
    media_files: Mapping[Subject, list[dict[str, Any]]] = field(default_factory=dict)
    # message id -> its latest comments, oldest first
    comments: Mapping[int, list[Row]] = field(default_factory=dict)
    # (message id, comment id or None) -> top likes
    likes: Mapping[tuple[int, int | None], list[Row]] = field(default_factory=dict)
    # message id -> poll row
    polls: Mapping[int, Row] = field(default_factory=dict)
    # message id -> the readable message it shares
    shared: Mapping[int, Row] = field(default_factory=dict)
    # message id -> its `extensions` rendered afresh (thanks announcements); others show the
    # copy stored with the message
    extensions: Mapping[int, list[dict[str, Any]]] = field(default_factory=dict)
