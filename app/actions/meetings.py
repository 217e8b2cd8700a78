"""Meetings: the kinds a community offers, creating one, and who may see it.

- A meeting has a type (one of the community's enabled meeting types; default the first),
  a title, a start and an end (default: start plus the type's default duration; at most 31
  days long), an optional group, and attendees (active users of the community).
- With a group, the organizer must be allowed to post into it, as for messages: a group they
  may not read is a 422 on meeting[group_id]; an archived group, a group they are not a member
  of (community admins excepted), or one whose posting is off (its admins excepted) is a 403.
- A meeting is visible to its organizer, its attendees and, when it has a group, to whoever may
  read that group's content; to anyone else it does not exist (404).
- Title, description and location pass the community's content filters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from app.actions.content_filters import check_text
from app.actions.work import work
from app.context import Viewer
from app.errors import Forbidden, Invalid, NotFound
from app.render.meetings import meeting as render_meeting
from storage import meetings, users
from storage import messages as message_storage
from storage.db import Conn

MAX_TITLE = 200
MAX_TEXT = 10_000
MAX_ATTENDEES = 500
MAX_LENGTH = timedelta(days=31)


@dataclass
class MeetingFields:
    title: str | None = None
    description: str | None = None
    location: str | None = None
    meeting_type: str | None = None
    meeting_type_id: int | None = None
    starts_at: str | None = None
    ends_at: str | None = None
    group_id: int | None = None
    attendee_ids: list[int] = field(default_factory=list)


def parse_time(value: str | None, name: str) -> datetime | None:
    """Epoch seconds or ISO 8601 (an instant without an offset is taken as UTC)."""
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    try:
        if text.lstrip("-").isdigit():
            return datetime.fromtimestamp(int(text), UTC)
        parsed = datetime.fromisoformat(text)
    except (ValueError, OverflowError, OSError):
        raise Invalid.field(name, "is not a time (ISO 8601 or epoch seconds)") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


async def meeting_types(conn: Conn, viewer: Viewer) -> list[asyncpg.Record]:
    return await meetings.list_types(conn, viewer.community_id)


async def _meeting_type(conn: Conn, viewer: Viewer, fields: MeetingFields) -> asyncpg.Record:
    if fields.meeting_type_id is not None:
        row = await meetings.type_by_id(conn, viewer.community_id, fields.meeting_type_id)
        name = "meeting[meeting_type_id]"
    elif fields.meeting_type:
        row = await meetings.type_by_key(conn, viewer.community_id, fields.meeting_type.strip())
        name = "meeting[meeting_type]"
    else:
        types = await meetings.list_types(conn, viewer.community_id)
        if not types:
            raise Invalid.field("meeting[meeting_type]", "can't be blank",
                                "This community offers no meeting types")
        return types[0]
    if row is None:
        raise Invalid.field(name, "is not a meeting type of this community")
    return row


async def _attendees(
    conn: Conn, viewer: Viewer, ids: Sequence[int]
) -> list[int]:
    wanted = list(dict.fromkeys(ids))
    if len(wanted) > MAX_ATTENDEES:
        raise Invalid.field("meeting[attendee_ids]", f"has too many (maximum is {MAX_ATTENDEES})")
    rows = {r["id"]: r for r in await users.by_ids(conn, viewer.community_id, wanted)}
    bad = [i for i in wanted if i not in rows or rows[i]["state"] != "active"]
    if bad:
        raise Invalid.field(
            "meeting[attendee_ids]", f"are not active users of this community: "
            f"{', '.join(str(i) for i in bad)}",
        )
    return wanted


async def _check_group(conn: Conn, viewer: Viewer, group_id: int) -> None:
    """The rule of posting a message into the group (app/actions/messages.py)."""
    group = await message_storage.group_for_posting(
        conn, viewer.community_id, viewer.id, viewer.is_external, group_id
    )
    if group is None or not group["readable"]:
        raise Invalid.field("meeting[group_id]", "is not a group you can post in")
    if group["state"] != "active":
        raise Forbidden("This group is archived")
    group_admin = group["viewer_role"] == "admin" or viewer.is_admin
    if group["viewer_role"] is None and not viewer.is_admin:
        raise Forbidden("Only members of the group can make meetings in it")
    if not group["post_enabled"] and not group_admin:
        raise Forbidden("Only the group's admins can post in it")


def _text(value: str | None, name: str, limit: int) -> str:
    text = (value or "").strip()
    if len(text) > limit:
        raise Invalid.field(name, f"is too long (maximum is {limit} characters)")
    return text


async def create_meeting(pool: asyncpg.Pool, viewer: Viewer, fields: MeetingFields) -> int:
    title = _text(fields.title, "meeting[title]", MAX_TITLE)
    if not title:
        raise Invalid.field("meeting[title]", "can't be blank")
    description = _text(fields.description, "meeting[description]", MAX_TEXT)
    location = _text(fields.location, "meeting[location]", MAX_TEXT)
    starts_at = parse_time(fields.starts_at, "meeting[starts_at]")
    if starts_at is None:
        raise Invalid.field("meeting[starts_at]", "can't be blank")
    ends_at = parse_time(fields.ends_at, "meeting[ends_at]")
    async with work(pool, None, viewer.community_id) as w:
        type_row = await _meeting_type(w.conn, viewer, fields)
        if ends_at is None:
            ends_at = starts_at + timedelta(minutes=type_row["default_duration_minutes"])
        if ends_at <= starts_at:
            raise Invalid.field("meeting[ends_at]", "must be after starts_at")
        if ends_at - starts_at > MAX_LENGTH:
            raise Invalid.field("meeting[ends_at]", "is more than 31 days after starts_at")
        if fields.group_id is not None:
            await _check_group(w.conn, viewer, fields.group_id)
        attendee_ids = await _attendees(w.conn, viewer, fields.attendee_ids)
        for text, name in ((title, "meeting[title]"), (description, "meeting[description]"),
                           (location, "meeting[location]")):
            await check_text(w.conn, viewer.community_id, text, field=name)
        row = await meetings.insert(
            w.conn, viewer.community_id, meeting_type_id=type_row["id"], user_id=viewer.id,
            group_id=fields.group_id, title=title, description=description, location=location,
            starts_at=starts_at, ends_at=ends_at, attendee_ids=attendee_ids,
        )
    meeting_id: int = row["id"]
    return meeting_id


async def load_meeting(
    conn: Conn, viewer: Viewer, meeting_id: int, base: str
) -> dict[str, Any]:
    """The rendered meeting, or NotFound when the viewer may not see it."""
    row = await meetings.visible_by_id(
        conn, viewer.community_id, viewer.id, viewer.is_external, meeting_id
    )
    if row is None:
        raise NotFound("Meeting not found")
    type_row = await meetings.type_of(conn, viewer.community_id, row["meeting_type_id"])
    organizer = await users.by_id(conn, viewer.community_id, row["user_id"])
    group = (
        await meetings.group_by_id(conn, viewer.community_id, row["group_id"])
        if row["group_id"] is not None else None
    )
    attendees = await meetings.attendees(conn, meeting_id)
    assert type_row is not None and organizer is not None
    return render_meeting(
        row, base, type_row=type_row, organizer=organizer, group=group, attendees=attendees
    )
