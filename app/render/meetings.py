"""MeetingType and Meeting JSON (shapes decided here; the spec shows none).

MeetingType: {id, key, name, description, default_duration_minutes, type: "MeetingType"}.
Meeting: {id, title, description, location, meeting_type, starts_at, ends_at,
duration_minutes, group (short Group, or {} when none), user (embedded organizer),
attendees (embedded Users, in the order given), attendees_count, url, created_at,
type: "Meeting"}.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from app.render.groups_short import short_group
from app.render.users import embedded_user
from storage.rows import EmbeddedUserRow, ShortGroupRow

Row = Mapping[str, Any]


def iso_time(value: datetime) -> str:
    """ISO 8601 in UTC with an explicit +00:00 offset and no fractional seconds."""
    return value.astimezone(UTC).replace(microsecond=0).isoformat()


def meeting_type(row: Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "key": row["key"],
        "name": row["name"],
        "description": row["description"],
        "default_duration_minutes": row["default_duration_minutes"],
        "type": "MeetingType",
    }


def meeting(
    row: Row,
    base: str,
    *,
    type_row: Row,
    organizer: EmbeddedUserRow,
    group: ShortGroupRow | None,
    attendees: Sequence[EmbeddedUserRow],
) -> dict[str, Any]:
    return {
        "id": row["id"],
        "title": row["title"],
        "description": row["description"],
        "location": row["location"],
        "meeting_type": meeting_type(type_row),
        "starts_at": iso_time(row["starts_at"]),
        "ends_at": iso_time(row["ends_at"]),
        "duration_minutes": int((row["ends_at"] - row["starts_at"]).total_seconds() // 60),
        "group": short_group(group, base) if group is not None else {},
        "user": embedded_user(organizer, base),
        "attendees": [embedded_user(a, base) for a in attendees],
        "attendees_count": len(attendees),
        "url": f"{base}/meetings/{row['id']}",
        "created_at": iso_time(row["created_at"]),
        "type": "Meeting",
    }
