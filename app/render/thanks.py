"""Thanks JSON: {id, body, badge, user, recipient, recipients, announcement} (the spec's order).

`user` is the sender and `recipients` the thanked users (embedded users); `recipient` is the
first of them (deprecated); `badge` a Badge or null; `announcement` the broadcast Message, or
null when the viewer may not read it (or it was deleted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.render.badges import badge as render_badge
from app.render.users import embedded_user
from storage.rows import EmbeddedUserRow

Row = Mapping[str, Any]


def thanks(
    row: Row,
    base: str,
    *,
    sender: EmbeddedUserRow,
    recipients: Sequence[EmbeddedUserRow],
    badge: Row | None,
    announcement: dict[str, Any] | None,
) -> dict[str, Any]:
    rendered = [embedded_user(r, base) for r in recipients]
    return {
        "id": row["id"],
        "body": row["body"],
        "badge": render_badge(badge, base) if badge is not None else None,
        "user": embedded_user(sender, base),
        "recipient": rendered[0] if rendered else None,
        "recipients": rendered,
        "announcement": announcement,
    }
