"""Avatar sets of users, groups and external systems (key order as the real payloads)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from app.urls import asset_url

SIZES = ("square16", "square30", "square45", "square70", "square140")
# Uploaded avatars are served as attachment thumbnails; the small squares share one.
_THUMB_FOR = {
    "square16": "square45", "square30": "square45", "square45": "square45",
    "square70": "stream_square", "square140": "stream_square",
}


@lru_cache(maxsize=1024)
def _defaults(base: str, kind: str) -> dict[str, str]:
    """Shared between calls: only ever copied (`**`) into a new dict, never returned."""
    return {size: asset_url(base, f"avatars/default_{kind}_{size}.png") for size in SIZES}


def user_avatars(base: str, avatar_id: int | None) -> dict[str, Any]:
    if avatar_id is None:
        return {"is_system_default": True, "id": None, **_defaults(base, "user")}
    out: dict[str, Any] = {"is_system_default": False, "id": avatar_id}
    for size in SIZES:
        out[size] = f"{base}/api/attachments/{avatar_id}/{_THUMB_FOR[size]}/avatar"
    out["original"] = f"{base}/api/attachments/{avatar_id}/original/avatar"
    return out


def group_avatars(base: str, avatar_id: int | None = None) -> dict[str, Any]:
    """A default group avatar has no `id` key at all (real payloads)."""
    if avatar_id is None:
        return {"is_system_default": True, **_defaults(base, "group")}
    out: dict[str, Any] = {"is_system_default": False, "id": avatar_id}
    for size in SIZES:
        out[size] = f"{base}/api/attachments/{avatar_id}/{_THUMB_FOR[size]}/avatar"
    return out


def system_avatars(base: str, avatar_id: int | None = None) -> dict[str, Any]:
    if avatar_id is None:
        return {"is_system_default": True, **_defaults(base, "system")}
    out: dict[str, Any] = {"is_system_default": False}
    for size in SIZES:
        out[size] = f"{base}/api/attachments/{avatar_id}/{_THUMB_FOR[size]}/avatar"
    return out


def profile_photo(base: str, avatar_id: int | None) -> dict[str, Any]:
    """The compact `profile_photo` / activity `image` of conversation members."""
    if avatar_id is None:
        url = asset_url(base, "avatars/default_user_square70.png")
    else:
        url = f"{base}/api/attachments/{avatar_id}/stream_square/avatar"
    return {"height": 70, "width": 70, "url": url, "is_system_default": avatar_id is None}
