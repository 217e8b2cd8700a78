"""The `thanks_announcement` extension of thanks messages, rendered from the thanks tables.

A thanks message stores its extension when posted; this renders it afresh (current names and
avatars, keys in the documented order) for any page of messages, in four queries whatever the
page's size. It imports nothing from app.actions.messages, so the message loader may call it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from app.render.badges import badge as render_badge
from app.render.users import embedded_user
from storage import badges as badge_storage
from storage import thanks as thanks_storage
from storage import users as user_storage
from storage.db import Conn

EXTENSION_TYPE = "thanks_announcement"
# The message_type of the message a thanks posts (the only messages with a thanks row).
THANKS_MESSAGE_TYPE = "thanks"


def announcement_extension(
    recipients: Sequence[asyncpg.Record], badge: asyncpg.Record | None, base: str
) -> dict[str, Any]:
    """{"extension_type", "recipient" (the first recipient), "recipients", "badge" (or null),
    "in_reference_to" (null: thanks are not given for a particular message here)}."""
    rendered = [embedded_user(r, base) for r in recipients]
    return {
        "extension_type": EXTENSION_TYPE,
        "recipient": rendered[0] if rendered else None,
        "recipients": rendered,
        "badge": render_badge(badge, base) if badge is not None else None,
        "in_reference_to": None,
    }


async def thanks_extensions(
    conn: Conn, community_id: int, message_ids: Sequence[int], base: str
) -> dict[int, list[dict[str, Any]]]:
    """message id -> its `extensions` for the thanks messages among `message_ids` (the others
    are absent)."""
    rows = await thanks_storage.by_messages(conn, community_id, message_ids)
    if not rows:
        return {}
    recipients = await thanks_storage.recipients(conn, [r["id"] for r in rows])
    user_ids = list({u for ids in recipients.values() for u in ids})
    users = {u["id"]: u for u in await user_storage.by_ids(conn, community_id, user_ids)}
    badges = await badge_storage.by_ids(
        conn, community_id, [r["badge_id"] for r in rows if r["badge_id"] is not None]
    )
    out: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        people = [users[u] for u in recipients.get(r["id"], []) if u in users]
        badge = badges.get(r["badge_id"]) if r["badge_id"] is not None else None
        out[r["message_id"]] = [announcement_extension(people, badge, base)]
    return out
