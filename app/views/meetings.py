"""Meetings: GET /api/meetings (the meeting types the community offers), POST /api/meetings
(create a meeting), GET /api/meetings/:id.

- GET /api/meetings -> 200 {"meetings": [MeetingType]}: the community's enabled meeting types
  (each community starts with In person, Video call, Phone call and Town hall).
- POST /api/meetings -> 201 {"meeting": Meeting}. Parameters: meeting[title] (required),
  meeting[starts_at] (required; ISO 8601 or epoch seconds), meeting[ends_at] (default: start
  plus the type's default duration), meeting[meeting_type] (a type key) or
  meeting[meeting_type_id] (default: the first type), meeting[group_id],
  meeting[attendee_ids][] (or meeting[attendees][]; user ids), meeting[location],
  meeting[description].
- GET /api/meetings/:id -> 200 {"meeting": Meeting} for its organizer, attendees and readers
  of its group; 404 for anyone else.
Shapes: app/render/meetings.py.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import BaseModel, Field, model_validator

from app.actions import meetings as actions
from app.context import community_of, viewer_of
from app.params import LOOSE, IdList, OptionalId, parse, path_id
from app.render.meetings import meeting_type
from app.resources import pool_of
from app.responses import created, json_response


class MeetingParams(BaseModel):
    model_config = LOOSE
    title: str | None = None
    description: str | None = None
    location: str | None = None
    meeting_type: str | None = None
    meeting_type_id: OptionalId = None
    starts_at: str | None = None
    ends_at: str | None = None
    group_id: OptionalId = None
    attendee_ids: IdList = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _attendees_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and "attendee_ids" not in data and "attendees" in data:
            return {**data, "attendee_ids": data["attendees"]}
        return data


class MeetingBody(BaseModel):
    model_config = LOOSE
    meeting: MeetingParams = Field(default_factory=MeetingParams)


async def list_meeting_types(request: web.Request) -> web.Response:
    rows = await actions.meeting_types(pool_of(request), viewer_of(request))
    return json_response({"meetings": [meeting_type(r) for r in rows]})


async def create_meeting(request: web.Request) -> web.Response:
    body = await parse(request, MeetingBody)
    viewer = viewer_of(request)
    pool = pool_of(request)
    meeting_id = await actions.create_meeting(
        pool, viewer, actions.MeetingFields(**body.meeting.model_dump())
    )
    rendered = await actions.load_meeting(pool, viewer, meeting_id, community_of(request).base_url)
    return created({"meeting": rendered})


async def show_meeting(request: web.Request) -> web.Response:
    viewer = viewer_of(request)
    rendered = await actions.load_meeting(
        pool_of(request), viewer, path_id(request, "id"), community_of(request).base_url
    )
    return json_response({"meeting": rendered})
