"""The full Group JSON, group memberships and membership requests (key order as keys.md).

Group rows carry the FULL columns of storage.groups; the per-viewer flags are computed here
from the viewer's role and pending request, which those rows carry too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.access import is_group_admin
from app.context import Viewer
from app.render.groups_short import short_group
from app.render.topics import html_description
from storage.rows import GroupRow

Row = Mapping[str, Any]

ROLE_LABELS = {"admin": "Admin", "member": "Member"}
EXTERNAL_LABEL = "External Contributor"
_CHAT_DEFAULTS: dict[str, Any] = {
    "last_viewed_at": 0,
    "unread_count": 0,
    "push_notifications_enabled": True,
    "push_notification_on_group_chat_message": True,
    "push_notification_on_chat_mention": True,
}


def role_label(role: str | None, user_role: str | None = None) -> str:
    """The label of a membership role: Admin, Member, or External Contributor for a member
    who is one. `role` is None only for a non-member, whom no membership form shows."""
    if role is None:
        raise KeyError("no membership role")  # what ROLE_LABELS[None] raised before
    if role != "admin" and user_role == "external_contributor":
        return EXTERNAL_LABEL
    return ROLE_LABELS[role]


def viewer_flags(row: GroupRow, viewer: Viewer) -> dict[str, Any]:
    """role_key and the can_* flags of the group for this viewer (in JSON key order)."""
    role = row["viewer_role"]
    member = role is not None
    active = row["state"] == "active"
    private = row["permission"] != "public"
    requested = bool(row["viewer_requested"]) and not member
    last_admin = role == "admin" and len(row["admin_ids"]) <= 1
    return {
        "role_key": role,
        "can_request_membership": (
            not member and active and private and row["allow_access_request"]
            and not viewer.is_external and not requested
        ),
        "can_cancel_membership_request": requested,
        "can_join": not member and active and not private and not viewer.is_external,
        "can_leave": member and not last_admin,
        "can_administer": is_group_admin(viewer, row),
    }


def full_group(row: GroupRow, base: str, viewer: Viewer) -> dict[str, Any]:
    """The 27-key Group (create, show, lists); chat-enabled groups add five chat keys; then
    html_description and rule_managed."""
    out = short_group(row, base)
    out["admin_ids"] = list(row["admin_ids"])
    out["description"] = row["description"]
    out["state"] = row["state"]
    out["permission"] = row["permission"]
    out["group_type"] = row["group_type"]
    out["member_count"] = row["member_count"]
    out.update(viewer_flags(row, viewer))
    out["chat_stream_id"] = row["chat_stream_id"] if row["chat_enabled"] else None
    out["post_stream_id"] = row["post_stream_id"]
    if row["chat_enabled"]:
        chat = {**_CHAT_DEFAULTS, **(row["chat_read"] or {})}
        out["chats_last_viewed_at"] = chat["last_viewed_at"]
        out["unread_chats_count"] = chat["unread_count"]
        out["push_notifications_enabled"] = chat["push_notifications_enabled"]
        out["push_notification_on_group_chat_message"] = (
            chat["push_notification_on_group_chat_message"]
        )
        out["push_notification_on_chat_mention"] = chat["push_notification_on_chat_mention"]
    # listed by interface.md, absent from the captured payloads: last (decisions.md). No group
    # is managed by membership rules in Commons.
    out["html_description"] = html_description(row["description"], base)
    out["rule_managed"] = False
    return out


def group_membership(row: GroupRow, base: str, viewer: Viewer) -> dict[str, Any]:
    """An entry of GET /api/group_memberships: the viewer's membership of the group `row`."""
    return {
        "group": full_group(row, base, viewer),
        "role": role_label(row["viewer_role"], viewer.role),
        "role_key": row["viewer_role"],
    }


def membership(
    membership_id: int | None, user_id: int | None, role: str, user_role: str | None
) -> dict[str, Any]:
    """A member as add_members answers it: {id, user_id, role, role_key}."""
    return {
        "id": membership_id,
        "user_id": user_id,
        "role": role_label(role, user_role),
        "role_key": role,
    }


def invitation(email: str, role: str) -> dict[str, Any]:
    """An invited e-mail address that is not a user yet (add_members)."""
    out = membership(None, None, role, None)
    out["invite"] = email
    return out


def membership_with_user(row: Row, user: dict[str, Any]) -> dict[str, Any]:
    """{id, user_id, role, role_key, user}: a member row (membership_id, membership_role, and
    the FULL user columns) with its rendered full user."""
    out = membership(row["membership_id"], row["id"], row["membership_role"], row["role"])
    out["user"] = user
    return out


def membership_request(row: Row, user: dict[str, Any]) -> dict[str, Any]:
    """{id, group_id, user_id, created_at, user}: a request row (request_id, request_group_id,
    requested_at, and the FULL user columns) with its rendered full user."""
    return {
        "id": row["request_id"],
        "group_id": row["request_group_id"],
        "user_id": row["id"],
        "created_at": row["requested_at"].isoformat(timespec="seconds"),
        "user": user,
    }
