"""Every JSON form of a user, written once (key order as keys.md).

Rows come from storage.users (BASIC or FULL columns).
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

from app.render.avatars import profile_photo, user_avatars
from app.urls import user_url
from storage.rows import EmbeddedUserRow, FullFormRow, NameRow, UserRow

# contact_info keys in the order the real payloads print them; email is always present.
CONTACT_KEYS = (
    "cell_phone", "office_phone", "aim", "google_talk", "yahoo", "skype", "jabber", "twitter",
    "msn", "email", "location",
)

Row = Mapping[str, Any]


def display_name(row: NameRow) -> str:
    name = f"{row['first_name']} {row['last_name']}".strip()
    return name or row["username"]


_HTML_SPECIAL = re.compile("[&<>\"']")


def _html(text: str) -> str:
    """html.escape, which costs five replaces: most names have nothing to escape."""
    return html.escape(text) if _HTML_SPECIAL.search(text) else text


def _iso_date(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def embedded_user(row: EmbeddedUserRow, base: str) -> dict[str, Any]:
    """Author of a message or comment, manager, thanks sender: the 15 captured keys, then
    what interface.md lists and the captured payloads lack, in the interface's order
    (decisions.md): first_name, last_name, out_of_office_on (Commons keeps no out-of-office
    start date). One dict literal: users are rendered by the dozen per page."""
    user_id, username, first, last = (
        row["id"], row["username"], row["first_name"], row["last_name"])
    name = f"{first} {last}".strip() or username
    state = row["state"]
    back = row["back_in_office_on"]
    return {
        "id": user_id,
        "name": name,
        "html_name": _html(name),
        "url": f"{base}/users/{user_id}-{username.lower()}",  # app.urls.user_url
        "avatars": user_avatars(base, row["avatar_id"]),
        "username": username,
        "active": state == "active",
        "terminated": state == "terminated",
        "inactive": state != "active",
        "role": row["role"],
        "type": "User",
        "title": row["title"],
        "out_of_office": row["out_of_office"],
        "back_in_office_on": back.isoformat() if back is not None else None,
        "company_login": row["company_login"],
        "first_name": first,
        "last_name": last,
        "out_of_office_on": None,
    }


# The captured keys of embedded_user, without the interface's three extras.
_EXTRAS = ("first_name", "last_name", "out_of_office_on")


def recipient_user(row: EmbeddedUserRow, base: str) -> dict[str, Any]:
    """The embedded user with the captured mention_name (16th), then the extras."""
    embedded = embedded_user(row, base)
    extras = {key: embedded.pop(key) for key in _EXTRAS}
    embedded["mention_name"] = row["username"]
    embedded.update(extras)
    return embedded


def like_user(row: EmbeddedUserRow, base: str) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": display_name(row),
        "url": user_url(base, row["id"], row["username"]),
    }


def contact_info(row: UserRow) -> dict[str, str]:
    return contact_info_of(row["email"], row["contact_info"])


def contact_info_of(email: str, extra: Mapping[str, Any] | None) -> dict[str, str]:
    """`contact_info` of the e-mail address and the contact_info column's value."""
    if not extra:  # most users: the e-mail alone
        return {"email": email}
    out: dict[str, str] = {}
    for key in CONTACT_KEYS:
        if key == "email":
            out["email"] = email
        elif extra.get(key):
            out[key] = extra[key]
    return out


def custom_field_values(values: Sequence[Row]) -> list[dict[str, Any]]:
    return [{"id": str(v["id"]), "value": v["value"], "label": v["name"]} for v in values]


def custom_fields_of(triples: Sequence[Sequence[Any]] | None) -> list[dict[str, Any]]:
    """custom_field_values of a FULL row's `custom_values` ([id, name, value] each)."""
    return [{"id": str(i), "value": value, "label": name} for i, name, value in triples or ()]


def full_user(
    row: FullFormRow,
    base: str,
    *,
    viewer_id: int,
    contact: dict[str, str],
    manager: dict[str, Any] | None,
    custom_fields: list[dict[str, Any]],
) -> dict[str, Any]:
    """The 23 captured keys of the users index, search, followers, members (FULL or LISTED
    row), then first_name, last_name, out_of_office_on. `contact`: contact_info /
    contact_info_of (LISTED rows carry the column as JSON text); `manager`: the manager's
    embedded_user, which the rows of one page share; `custom_fields`: custom_fields_of /
    custom_field_values. The embedded_user keys come last, in its order, from embedded_user
    itself (one serializer of a user's own fields)."""
    return {
        "contact_info": contact,
        "manager": manager,
        "custom_fields": custom_fields,
        "followable": (row["id"] != viewer_id and row["state"] == "active"
                       and not row["viewer_follows"]),
        "contact_id": None,
        "following_count": row["following_count"],
        "followers_count": row["followers_count"],
        "status_message": row["status_message"],
        **embedded_user(row, base),
    }


def conversation_member(row: UserRow, base: str) -> dict[str, Any]:
    """The compact user of conversation members."""
    extra = row["contact_info"] or {}
    return {
        "id": row["id"],
        "name": display_name(row),
        "email": row["email"],
        "cell_phone": extra.get("cell_phone"),
        "office_phone": extra.get("office_phone"),
        "first_name": row["first_name"],
        "last_name": row["last_name"],
        "profile_photo": profile_photo(base, row["avatar_id"]),
        "inactive": row["state"] != "active",
        "terminated": row["state"] == "terminated",
    }
