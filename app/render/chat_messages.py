"""Group chat message JSON (the spec leaves it open; decided here):

    {"id", "body", "html_body", "user": <embedded User>, "group_id",
     "attachments": [<Attachment>], "created_at"}

The same for every viewer: it is also the data of the `chat_message.created` event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.render.times import iso
from app.render.users import embedded_user
from storage.rows import EmbeddedUserRow

Row = Mapping[str, Any]


def chat_message(
    row: Row, base: str, *, user: EmbeddedUserRow, attachments: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """`user` is the author's BASIC row; `attachments` are rendered Attachment objects."""
    return {
        "id": row["id"],
        "body": row["body"],
        "html_body": row["html"],
        "user": embedded_user(user, base),
        "group_id": row["group_id"],
        "attachments": list(attachments),
        "created_at": iso(row["created_at"]),
    }
