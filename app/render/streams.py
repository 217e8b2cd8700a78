"""Streams: {id, name, new_updates, default, custom_stream, last_interacted_at, group}.

`last_interacted_at` (epoch seconds of the newest activity the stream shows the viewer) is
absent when the stream has shown nothing yet; `group` (the short group) only on group streams.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.render.groups_short import short_group
from app.render.times import epoch
from storage.rows import ShortGroupRow
from storage.streams import SYSTEM_NAMES

Row = Mapping[str, Any]

# A community with stream_names 'classic' serves these two names instead (decisions.md: older
# real clients look streams up by "Home Stream" and "Company Stream"); the others unchanged.
CLASSIC_NAMES = {"home": "Home Stream", "company": "Company Stream"}


def new_updates(row: Row) -> bool:
    activity = row["last_activity"]
    if activity is None:
        return False
    return row["last_read_at"] is None or activity > row["last_read_at"]


def system_name(kind: str, stream_names: str) -> str | None:
    if stream_names == "classic" and kind in CLASSIC_NAMES:
        return CLASSIC_NAMES[kind]
    return SYSTEM_NAMES.get(kind)


def stream(
    row: Row, base: str, group: ShortGroupRow | None = None, stream_names: str = "current"
) -> dict[str, Any]:
    kind = row["kind"]
    name = group["name"] if group is not None else (
        system_name(kind, stream_names) or row["name"])
    out: dict[str, Any] = {
        "id": row["id"],
        "name": name,
        "new_updates": new_updates(row),
        "default": kind == "home",
        "custom_stream": kind == "custom",
    }
    if row["last_activity"] is not None:
        out["last_interacted_at"] = epoch(row["last_activity"])
    if group is not None:
        out["group"] = short_group(group, base)
    return out
