"""ExternalSystem JSON (key order as the interface's table), and the create response's
credentials."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.render.avatars import SIZES, system_avatars
from app.urls import external_system_url

Row = Mapping[str, Any]


def external_system_avatars(row: Row, base: str) -> dict[str, Any]:
    """An uploaded photo (served as attachment thumbnails); else a picture address the admin
    gave (every size is that address: it is never fetched here); else the default set."""
    if row["avatar_id"] is None and row["profile_photo_url"]:
        return {"is_system_default": False, **{size: row["profile_photo_url"] for size in SIZES}}
    return system_avatars(base, row["avatar_id"])


def external_system(row: Row, base: str) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "username": None,
        "description": row["description"],
        "url": external_system_url(base, row["id"], row["name"]),
        "system_url": row["system_url"],
        "state": row["state"],
        "external_system_type": row["external_system_type"],
        "sharepoint_version": row["sharepoint_version"],
        "not_in_company_stream": row["not_in_company_stream"],
        "avatars": external_system_avatars(row, base),
        "type": "ExternalSystem",
    }


def created_external_system(row: Row, base: str, client_secret: str) -> dict[str, Any]:
    """The create response: the system, then its credentials (the secret only here)."""
    return {
        **external_system(row, base),
        "client_identifier": row["client_identifier"],
        "client_secret": client_secret,
    }
