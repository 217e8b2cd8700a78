"""Meetings: GET /api/meetings (meeting types), POST /api/meetings, GET /api/meetings/:id."""

from __future__ import annotations

from typing import Any

from tests.app.views.test_suggestions import make_group
from tests.conftest import QueryLog
from tests.support import Member, World

MEETING_KEYS = [
    "id", "title", "description", "location", "meeting_type", "starts_at", "ends_at",
    "duration_minutes", "group", "user", "attendees", "attendees_count", "url", "created_at",
    "type",
]


async def create(member: Member, status: int = 201, **fields: Any) -> Any:
    resp = await member.api.post("/api/meetings", json={"meeting": fields})
    assert resp.status == status, resp.text
    return resp.json


async def test_meeting_types(world: World) -> None:
    admin = await world.community()
    member = await world.user(admin, "Mia")
    resp = await member.api.get("/api/meetings")
    assert resp.status == 200 and list(resp.json) == ["meetings"]
    types = resp.json["meetings"]
    assert [t["key"] for t in types] == ["in_person", "video_call", "phone_call", "town_hall"]
    assert list(types[0]) == [
        "id", "key", "name", "description", "default_duration_minutes", "type",
    ]
    assert types[1]["name"] == "Video call" and types[1]["type"] == "MeetingType"
    assert types[1]["default_duration_minutes"] == 30

    # each community has its own set
    other = await world.community("Other")
    theirs = (await other.api.get("/api/meetings")).json["meetings"]
    assert {t["id"] for t in theirs}.isdisjoint({t["id"] for t in types})


async def test_create_meeting(world: World) -> None:
    admin = await world.community()
    organizer = await world.user(admin, "Olive", "Organizer")
    ann = await world.user(admin, "Ann", "Attendee")
    ben = await world.user(admin, "Ben", "Attendee")

    body = await create(
        organizer, title="Planning", description="Q3 plans", location="Room 4",
        meeting_type="video_call", starts_at="2030-05-01T10:00:00+02:00",
        attendee_ids=[ben.id, ann.id, ben.id],
    )
    meeting = body["meeting"]
    assert list(body) == ["meeting"] and list(meeting) == MEETING_KEYS
    assert meeting["title"] == "Planning" and meeting["location"] == "Room 4"
    assert meeting["meeting_type"]["key"] == "video_call"
    assert meeting["starts_at"] == "2030-05-01T08:00:00+00:00"
    # default length: the type's default duration
    assert meeting["ends_at"] == "2030-05-01T08:30:00+00:00"
    assert meeting["duration_minutes"] == 30
    assert meeting["group"] == {}
    assert meeting["user"]["id"] == organizer.id and meeting["user"]["type"] == "User"
    assert [a["id"] for a in meeting["attendees"]] == [ben.id, ann.id]
    assert meeting["attendees_count"] == 2
    assert meeting["url"].endswith(f"/meetings/{meeting['id']}")
    assert meeting["type"] == "Meeting"

    # read back by an attendee
    shown = await ann.api.get(f"/api/meetings/{meeting['id']}")
    assert shown.status == 200 and shown.json["meeting"] == meeting


async def test_create_meeting_form_encoded_with_epoch_times_and_type_id(world: World) -> None:
    admin = await world.community()
    types = (await admin.api.get("/api/meetings")).json["meetings"]
    town_hall = next(t for t in types if t["key"] == "town_hall")
    attendee = await world.user(admin, "Ann")
    resp = await admin.api.post("/api/meetings", data=[
        ("meeting[title]", "All hands"), ("meeting[starts_at]", "1900000000"),
        ("meeting[ends_at]", "1900007200"), ("meeting[meeting_type_id]", str(town_hall["id"])),
        ("meeting[attendees][]", str(attendee.id)),
    ])
    assert resp.status == 201, resp.text
    meeting = resp.json["meeting"]
    assert meeting["meeting_type"]["id"] == town_hall["id"]
    assert meeting["duration_minutes"] == 120
    assert [a["id"] for a in meeting["attendees"]] == [attendee.id]


async def test_default_type_is_the_first(world: World) -> None:
    admin = await world.community()
    meeting = (await create(admin, title="Chat", starts_at="2030-01-01T09:00:00"))["meeting"]
    assert meeting["meeting_type"]["key"] == "in_person"
    assert meeting["starts_at"] == "2030-01-01T09:00:00+00:00"
    assert meeting["duration_minutes"] == 60


async def test_bad_input(world: World) -> None:
    admin = await world.community()
    member = await world.user(admin, "Mia")
    other = await world.community("Other")
    stranger = await world.user(other, "Sid")
    gone = await world.user(admin, "Gus")
    await admin.api.delete(f"/api/users/{gone.id}")
    other_types = (await other.api.get("/api/meetings")).json["meetings"]
    start = "2030-01-01T09:00:00Z"

    cases: list[tuple[dict[str, Any], str]] = [
        ({"starts_at": start}, "meeting[title]"),
        ({"title": "  ", "starts_at": start}, "meeting[title]"),
        ({"title": "x" * 201, "starts_at": start}, "meeting[title]"),
        ({"title": "T"}, "meeting[starts_at]"),
        ({"title": "T", "starts_at": "next tuesday"}, "meeting[starts_at]"),
        ({"title": "T", "starts_at": start, "ends_at": start}, "meeting[ends_at]"),
        ({"title": "T", "starts_at": start, "ends_at": "2029-12-31T09:00:00Z"},
         "meeting[ends_at]"),
        ({"title": "T", "starts_at": start, "ends_at": "2030-03-01T09:00:00Z"},
         "meeting[ends_at]"),
        ({"title": "T", "starts_at": start, "meeting_type": "seance"}, "meeting[meeting_type]"),
        ({"title": "T", "starts_at": start, "meeting_type_id": other_types[0]["id"]},
         "meeting[meeting_type_id]"),
        ({"title": "T", "starts_at": start, "attendee_ids": [stranger.id]},
         "meeting[attendee_ids]"),
        ({"title": "T", "starts_at": start, "attendee_ids": [gone.id]},
         "meeting[attendee_ids]"),
        ({"title": "T", "starts_at": start, "attendee_ids": [999999]},
         "meeting[attendee_ids]"),
    ]
    for fields, field in cases:
        body = await create(member, 422, **fields)
        assert field in body["fields"], (fields, body)


async def test_group_meetings(world: World) -> None:
    admin = await world.community()
    member = await world.user(admin, "Mia")
    outsider = await world.user(admin, "Oz")
    external = await world.user(admin, "Ed", role="external_contributor")
    public = await make_group(world, admin, "Public", members=(outsider,))
    secret = await make_group(world, admin, "Secret", permission="private", members=(member,))
    archived = await make_group(world, admin, "Old", state="archived", members=(member,))
    quiet = await make_group(world, admin, "Quiet", post_enabled=False, members=(member,))
    other = await world.community("Other")
    elsewhere = await make_group(world, other, "Elsewhere")
    start = "2030-01-01T09:00:00Z"

    in_secret = (await create(member, title="Secret sync", starts_at=start,
                              group_id=secret))["meeting"]
    assert in_secret["group"]["id"] == secret and in_secret["group"]["type"] == "Group"
    in_public = (await create(outsider, title="Open sync", starts_at=start,
                              group_id=str(public)))["meeting"]

    # who sees what: readers of the group; others get a 404
    assert (await member.api.get(f"/api/meetings/{in_secret['id']}")).status == 200
    assert (await admin.api.get(f"/api/meetings/{in_secret['id']}")).status == 200
    assert (await outsider.api.get(f"/api/meetings/{in_secret['id']}")).status == 404
    assert (await member.api.get(f"/api/meetings/{in_public['id']}")).status == 200
    assert (await external.api.get(f"/api/meetings/{in_public['id']}")).status == 404

    # as for posting: a readable group of this community, active, where one is a member and
    # posting is on (for the group's admins it always is)
    for group_id in (secret, elsewhere, 999999):
        body = await create(outsider, 422, title="T", starts_at=start, group_id=group_id)
        assert "meeting[group_id]" in body["fields"]
    await create(external, 422, title="T", starts_at=start, group_id=public)
    await create(member, 403, title="T", starts_at=start, group_id=public)
    await create(member, 403, title="T", starts_at=start, group_id=archived)
    await create(member, 403, title="T", starts_at=start, group_id=quiet)
    await create(admin, 201, title="T", starts_at=start, group_id=quiet)


async def test_visibility_and_tenancy(world: World) -> None:
    admin = await world.community()
    organizer = await world.user(admin, "Olive")
    attendee = await world.user(admin, "Ann")
    bystander = await world.user(admin, "Bea")
    meeting = (await create(organizer, title="1:1", starts_at="2030-01-01T09:00:00Z",
                            attendee_ids=[attendee.id]))["meeting"]
    path = f"/api/meetings/{meeting['id']}"

    assert (await organizer.api.get(path)).status == 200
    assert (await attendee.api.get(path)).status == 200
    # not invited, no group: it does not exist for them (community admins included)
    assert (await bystander.api.get(path)).status == 404
    assert (await admin.api.get(path)).status == 404
    other = await world.community("Other")
    assert (await other.api.get(path)).status == 404
    assert (await organizer.api.get("/api/meetings/abc")).status == 404
    assert (await organizer.api.anonymous().get(path)).status == 401


async def test_meeting_types_run_a_fixed_number_of_queries(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()

    async def count() -> int:
        query_log.reset()
        assert (await admin.api.get("/api/meetings", params={"per_page": "500"})).status == 200
        return len(query_log)

    await count()
    few = await count()
    async with world.pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO meeting_types (community_id, key, name, position)"
            " SELECT $1, 'extra' || i, 'Extra ' || i, 10 + i FROM generate_series(1, 20) i",
            admin.community.id,
        )
    assert await count() == few
    assert len((await admin.api.get("/api/meetings")).json["meetings"]) == 24
