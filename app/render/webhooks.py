"""Group webhook JSON (decisions.md, "Group webhook integrations"): the list form has no secret
and no url (the url carries the secret); the create response adds both, once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.render.times import iso
from app.urls import webhook_url

Row = Mapping[str, Any]


def webhook(row: Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "group_id": row["group_id"],
        "identifier": row["identifier"],
        "created_at": iso(row["created_at"]),
    }


def created_webhook(row: Row, base: str, secret: str) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "group_id": row["group_id"],
        "identifier": row["identifier"],
        "secret": secret,
        "url": webhook_url(base, row["identifier"], secret),
        "created_at": iso(row["created_at"]),
    }
