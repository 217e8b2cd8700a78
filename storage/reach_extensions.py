"""Reach extensions: embeddable widgets of an external system (migrations/0010_integrations.sql).

Writes name their columns from the fixed allow-list SETTABLE; everything a list shows is in the
row itself (the custom stream's filters are arrays), so a page of any size costs one query.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import asyncpg

from storage.db import Conn

# The color settings, in the interface's order, with their defaults (also the columns'
# defaults in the migration).
COLOR_DEFAULTS: dict[str, str] = {
    "reach_border_color": "#cccccc",
    "reach_poweredby_bg": "#f2f2f2",
    "reach_entry_border_color": "#e5e5e5",
    "reach_comment_bg": "#f7f7f7",
    "reach_default_text": "#333333",
    "reach_secondary_text": "#777777",
    "reach_default_link": "#1a6fb5",
    "reach_secondary_link": "#5a8fc2",
    "reach_button_border": "#1a5a96",
    "reach_button_color": "#ffffff",
    "reach_button_bgcolor": "#2a7dc9",
    "reach_button_inner_border": "#4d97da",
    "reach_button_border_hover": "#134a7c",
    "reach_button_bgcolor_hover": "#1f6bb0",
    "reach_button_textshadow": "#134a7c",
    "reach_social_button_border": "#cccccc",
    "reach_social_button_text": "#333333",
    "reach_social_button_background": "#f5f5f5",
    "reach_separator_color": "#e5e5e5",
}
COLORS = tuple(COLOR_DEFAULTS)

# Columns a create or an update may set.
SETTABLE = (
    "external_system_id", "name", "group_id", "extension_type", "stream_type", "button_type",
    "install_type", "button_verb", "profile_heading", "days_ago", "login_required",
    "reach_border_style", *COLORS, "tag_filters", "user_filter_ids",
)

COLUMNS = ", ".join(
    f"r.{c}" for c in ("id", "community_id", *SETTABLE, "state", "token", "created_by",
                       "created_at", "updated_at")
)

LIST = f"""
SELECT {COLUMNS} FROM reach_extensions r
WHERE r.community_id = $1
ORDER BY r.id
OFFSET $2 LIMIT $3
"""

BY_ID = f"SELECT {COLUMNS} FROM reach_extensions r WHERE r.community_id = $1 AND r.id = $2"
BY_ID_FOR_UPDATE = BY_ID + " FOR UPDATE"


def _checked(values: Mapping[str, Any]) -> list[str]:
    unknown = set(values) - set(SETTABLE)
    if unknown:
        raise ValueError(f"not settable: {sorted(unknown)}")
    return list(values)


async def list_page(
    conn: Conn, community_id: int, offset: int, limit: int
) -> list[asyncpg.Record]:
    return await conn.fetch(LIST, community_id, offset, limit)


async def by_id(
    conn: Conn, community_id: int, extension_id: int, *, lock: bool = False
) -> asyncpg.Record | None:
    return await conn.fetchrow(BY_ID_FOR_UPDATE if lock else BY_ID, community_id, extension_id)


async def insert(
    conn: Conn, community_id: int, token: str, created_by: int, values: Mapping[str, Any]
) -> asyncpg.Record:
    """A new extension with the SETTABLE `values` (the others take their defaults)."""
    names = _checked(values)
    columns = ", ".join(["community_id", "token", "created_by", *names])
    params = ", ".join(f"${i + 1}" for i in range(3 + len(names)))
    sql = f"""
    INSERT INTO reach_extensions AS r ({columns}) VALUES ({params})
    RETURNING {COLUMNS}
    """
    row = await conn.fetchrow(sql, community_id, token, created_by,
                              *(values[n] for n in names))
    assert row is not None
    return row


async def update(
    conn: Conn, community_id: int, extension_id: int, changes: Mapping[str, Any]
) -> asyncpg.Record | None:
    names = _checked(changes)
    sets = "".join(f"{name} = ${i + 3}, " for i, name in enumerate(names))
    sql = f"""
    UPDATE reach_extensions AS r SET {sets}updated_at = now()
    WHERE r.community_id = $1 AND r.id = $2
    RETURNING {COLUMNS}
    """
    return await conn.fetchrow(sql, community_id, extension_id, *(changes[n] for n in names))
