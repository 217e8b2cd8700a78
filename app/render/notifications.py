"""The Notification JSON (interface spec, "Notification"), written once: REST lists, the
`notification.created` realtime event and nothing else shape it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.render.times import iso
from app.render.users import embedded_user
from storage.rows import EmbeddedUserRow

Row = Mapping[str, Any]


def notification(row: Row, sender: EmbeddedUserRow | None, base: str) -> dict[str, Any]:
    """`row`: storage.notifications columns; `sender`: the sent_by user's BASIC row (None when
    no user sent it). notifiable_url is stored as a path under the community's base URL."""
    return {
        "id": row["id"],
        "read": row["read"],
        "notifiable_id": row["notifiable_id"],
        "notifiable_type": row["notifiable_type"],
        "notifiable_text": row["notifiable_text"],
        "notifiable_url": f"{base}{row['notifiable_url']}",
        "filter": row["filter"],
        "verb": row["verb"],
        "sent_by_user": embedded_user(sender, base) if sender is not None else None,
        "created_at": iso(row["created_at"]),
    }
