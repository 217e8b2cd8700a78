"""What a page of messages needs besides its own rows, batch-loaded once per page
(app.actions.messages.load_feed) and shared by the message and comment renderers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from app.context import Viewer
from app.render.groups_short import recipient_group, short_group
from app.render.users import embedded_user, like_user, recipient_user
from storage.rows import CommentRow, EmbeddedUserRow, FeedGroupRow, MessageRow

Row = Mapping[str, Any]
Subject = tuple[str, int]  # ("message" | "comment", id)

# The forms of a user, by the very values they are rendered from, shared across pages (issue
# 13: a page of 20 threads shows about 70 distinct users, and a polled page the same ones every
# time). The key is every column of EmbeddedUserRow, which is all the user renderers may read
# (mypy checks it), plus the base URL: the same key always renders the same JSON, so an entry
# can never be stale (a rename is another key), and no form of a user depends on the viewer.
# Bounded: emptied whenever full (about 7 MB when full, measured with tracemalloc).
USER_KEY: Callable[[EmbeddedUserRow], tuple[Any, ...]] = itemgetter(
    *EmbeddedUserRow.__annotations__)
USER_FORMS_SIZE = 4096
_USER_FORMS: dict[tuple[Any, ...], dict[str, Any]] = {}
UserRenderer = Callable[[EmbeddedUserRow, str], dict[str, Any]]


def user_form(render: UserRenderer, row: EmbeddedUserRow, base: str) -> dict[str, Any]:
    """render(row, base), shared with every other page that shows the same values (the
    returned dict is never mutated: nothing mutates rendered output)."""
    key = (render, base, USER_KEY(row))
    out = _USER_FORMS.get(key)
    if out is None:
        if len(_USER_FORMS) >= USER_FORMS_SIZE:
            _USER_FORMS.clear()
        out = _USER_FORMS[key] = render(row, base)
    return out


@dataclass
class FeedData:
    base: str
    viewer: Viewer
    users: Mapping[int, EmbeddedUserRow] = field(default_factory=dict)
    # short group rows (storage.messages.GROUPS) with viewer_role and listed
    groups: Mapping[int, FeedGroupRow] = field(default_factory=dict)
    # message id -> message-level recipient rows (user_id or group_id), in order
    recipients: Mapping[int, Sequence[Row]] = field(default_factory=dict)
    tags: Mapping[int, list[str]] = field(default_factory=dict)
    # comment id -> whom the comment addresses (user_id or group_id rows), and its tags
    comment_recipients: Mapping[int, Sequence[Row]] = field(default_factory=dict)
    comment_tags: Mapping[int, list[str]] = field(default_factory=dict)
    resources: Mapping[int, Row] = field(default_factory=dict)
    # rendered attachments and media files of each subject
    attachments: Mapping[Subject, list[dict[str, Any]]] = field(default_factory=dict)
    media_files: Mapping[Subject, list[dict[str, Any]]] = field(default_factory=dict)
    # message id -> its latest comments, oldest first
    comments: Mapping[int, list[CommentRow]] = field(default_factory=dict)
    # (message id, comment id or None) -> top likes
    likes: Mapping[tuple[int, int | None], list[Row]] = field(default_factory=dict)
    # message id -> poll row
    polls: Mapping[int, Row] = field(default_factory=dict)
    # message id -> the readable message it shares
    shared: Mapping[int, MessageRow] = field(default_factory=dict)
    # message id -> its `extensions` rendered afresh (thanks announcements); others show the
    # copy stored with the message
    extensions: Mapping[int, list[dict[str, Any]]] = field(default_factory=dict)
    # Forms rendered once per page: a user or group shows the same JSON everywhere on it (the
    # very same dict is placed wherever it appears; nothing mutates rendered output).
    _embedded_users: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False)
    _like_users: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False)
    _recipient_users: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False)
    _short_groups: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False)

    def embedded_user(self, user_id: int) -> dict[str, Any]:
        """app.render.users.embedded_user of data.users[user_id], rendered once per page."""
        out = self._embedded_users.get(user_id)
        if out is None:
            out = self._embedded_users[user_id] = user_form(
                embedded_user, self.users[user_id], self.base)
        return out

    def like_user(self, user_id: int) -> dict[str, Any]:
        out = self._like_users.get(user_id)
        if out is None:
            out = self._like_users[user_id] = user_form(
                like_user, self.users[user_id], self.base)
        return out

    def short_group(self, group_id: int) -> dict[str, Any]:
        """app.render.groups_short.short_group of data.groups[group_id], once per page."""
        out = self._short_groups.get(group_id)
        if out is None:
            out = self._short_groups[group_id] = short_group(self.groups[group_id], self.base)
        return out

    def render_recipients(self, rows: Sequence[Row]) -> list[dict[str, Any]]:
        """Recipient users and groups of these recipient rows (user_id or group_id)."""
        out: list[dict[str, Any]] = []
        for r in rows:
            if r["user_id"] is not None:
                uid = r["user_id"]
                rendered = self._recipient_users.get(uid)
                if rendered is None and uid in self.users:
                    rendered = self._recipient_users[uid] = user_form(
                        recipient_user, self.users[uid], self.base)
                if rendered is not None:
                    out.append(rendered)
            else:
                group = self.groups.get(r["group_id"])
                # a group the viewer may not even see is left out (never leak its name)
                if group is not None and group["listed"]:
                    out.append(recipient_group(group, self.base))
        return out
