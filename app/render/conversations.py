"""Conversation JSON (spec "Conversation"), relative to the viewer: title, unread state and
avatar depend on who asks. `conversation_summary` is the viewer-free part, used as event data.

Rows come from storage.conversations (MEMBER_VIEW: conversation columns plus the viewer's
unread_count); members are BASIC user rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.render.avatars import profile_photo
from app.render.users import conversation_member, display_name
from app.urls import asset_url
from storage.rows import ConversationRow, EmbeddedUserRow, MemberConversationRow, UserRow

Row = Mapping[str, Any]

# Names spelled out in a default title before the rest is counted ("and 3 others").
TITLE_NAMES = 3


def default_title(others: Sequence[EmbeddedUserRow]) -> str:
    """"Ann Lee", "Ann Lee and Bob Ray", "Ann Lee, Bob Ray and Cy Dee",
    "Ann Lee, Bob Ray, Cy Dee and 2 others"."""
    names = [display_name(r) for r in others]
    if not names:
        return "No other members"
    if len(names) == 1:
        return names[0]
    if len(names) <= TITLE_NAMES:
        return ", ".join(names[:-1]) + " and " + names[-1]
    rest = len(names) - TITLE_NAMES
    return ", ".join(names[:TITLE_NAMES]) + f" and {rest} other{'s' if rest > 1 else ''}"


def avatar(base: str, private: bool, others: Sequence[UserRow]) -> dict[str, Any]:
    """A one-to-one conversation shows the other member's photo; a shared one the default."""
    if private and others:
        photo = profile_photo(base, others[0]["avatar_id"])
        return {"url": photo["url"], "width": photo["width"], "height": photo["height"],
                "is_system_default": photo["is_system_default"]}
    return {"url": asset_url(base, "avatars/default_group_square70.png"), "width": 70,
            "height": 70, "is_system_default": True}


def conversation(
    row: MemberConversationRow,
    base: str,
    *,
    viewer_id: int,
    members: Sequence[UserRow],
    latest_activity: dict[str, Any] | None,
) -> dict[str, Any]:
    others = [m for m in members if m["id"] != viewer_id]
    unread_count = int(row["unread_count"])
    return {
        "id": row["id"],
        "name": row["name"],
        "title": row["name"] or default_title(others),
        "private": row["private"],
        "unread": unread_count > 0,
        "unread_count": unread_count,
        "latest_activity": latest_activity,
        "members": [conversation_member(m, base) for m in members],
        "avatar": avatar(base, row["private"], others),
    }


def conversation_summary(
    row: ConversationRow, base: str, members: Sequence[UserRow]
) -> dict[str, Any]:
    """What every member sees alike (data of conversation.* events)."""
    return {
        "id": row["id"],
        "name": row["name"],
        "private": row["private"],
        "members": [conversation_member(m, base) for m in members],
    }
