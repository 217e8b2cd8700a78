"""Badge JSON: {id, name, description, url, images {square30, square45, square70, square140}}.

Images are static assets (app/static/badges/<image_key>_<size>.png, served under /assets/).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.urls import asset_url

Row = Mapping[str, Any]
IMAGE_SIZES = ("square30", "square45", "square70", "square140")


def badge_url(base: str, badge_id: int) -> str:
    return f"{base}/badges/{badge_id}"


def badge_images(base: str, image_key: str) -> dict[str, str]:
    return {size: asset_url(base, f"badges/{image_key}_{size}.png") for size in IMAGE_SIZES}


def badge(row: Row, base: str) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "description": row["description"],
        "url": badge_url(base, row["id"]),
        "images": badge_images(base, row["image_key"]),
    }
