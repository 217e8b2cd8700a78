"""Streams: the list (system streams by name, group streams), the primary stream, what each
stream holds, new_updates and read state, external contributors, tenancy."""

from __future__ import annotations

from typing import Any

from tests.app.views.feed_support import (
    comment,
    external,
    make_group,
    message_ids,
    post,
    stream_id,
)
from tests.conftest import QueryLog
from tests.support import Member, World

SYSTEM = ["Home", "@Mentions", "Bookmarked", "Sent", "Company"]
STREAM_KEYS = ["id", "name", "new_updates", "default", "custom_stream"]


async def streams_of(member: Member) -> list[dict[str, Any]]:
    resp = await member.api.get("/api/streams")
    assert resp.status == 200, resp.text
    assert list(resp.json) == ["streams"]
    streams: list[dict[str, Any]] = resp.json["streams"]
    return streams


async def test_streams_are_the_system_ones_then_the_groups(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    await make_group(world, admin, "Zebras", members=[bob])
    await make_group(world, admin, "Ants", members=[bob])
    await make_group(world, admin, "Not mine")
    streams = await streams_of(bob)
    assert [s["name"] for s in streams] == [*SYSTEM, "Ants", "Zebras"]
    for s in streams:
        assert list(s)[:5] == STREAM_KEYS
        assert s["custom_stream"] is False
        assert s["default"] is (s["name"] == "Home")
    ants = streams[5]
    assert list(ants) == [*STREAM_KEYS, "group"]  # nothing posted yet: no last_interacted_at
    assert ants["group"]["name"] == "Ants" and ants["group"]["type"] == "Group"
    # made once: the same ids on the next call
    assert [s["id"] for s in await streams_of(bob)] == [s["id"] for s in streams]
    primary = await bob.api.get("/api/streams/primary")
    assert primary.status == 200 and list(primary.json) == ["stream"]
    assert primary.json["stream"]["name"] == "Home" and primary.json["stream"]["id"] == \
        streams[0]["id"]


async def test_what_each_stream_holds(world: World) -> None:
    admin = await world.community()
    me = await world.user(admin, "Me")
    friend = await world.user(admin, "Friend")
    stranger = await world.user(admin, "Stranger")
    team = await make_group(world, admin, "Team", members=[me])
    elsewhere = await make_group(world, stranger, "Elsewhere")
    await world.pool.execute(
        "INSERT INTO follows (community_id, follower_id, followed_id) VALUES ($1, $2, $3)",
        admin.community.id, me.id, friend.id,
    )
    by_friend = await post(friend, "from a friend")
    in_team = await post(admin, "team news", group_id=team)
    mention = await post(stranger, f"hey @{me.username}")
    in_comment = await post(stranger, "no mention here")
    await comment(stranger, in_comment["id"], f"but here @{me.username}")
    unrelated = await post(stranger, "unrelated", group_id=elsewhere)
    mine = await post(me, "my own")
    flagged = await post(stranger, "worth keeping")
    assert (await me.api.post(f"/api/messages/{flagged['id']}/flags")).status == 201

    async def stream(name: str) -> list[int]:
        return message_ids(await me.api.get(f"/api/streams/{await stream_id(me, name)}/messages"))

    assert set(await stream("Home")) == {by_friend["id"], in_team["id"], mention["id"],
                                         in_comment["id"], mine["id"]}
    assert await stream("@Mentions") == [in_comment["id"], mention["id"]]
    assert await stream("Bookmarked") == [flagged["id"]]
    assert await stream("Sent") == [mine["id"]]
    company = await stream("Company")
    assert unrelated["id"] in company and len(company) == 7
    assert await stream("Team") == [in_team["id"]]
    assert set(message_ids(await me.api.get("/api/messages"))) == set(await stream("Home"))


async def test_new_updates_until_the_stream_is_read(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    team = await make_group(world, admin, "Team", members=[bob])
    before = {s["name"]: s for s in await streams_of(bob)}
    assert before["Team"]["new_updates"] is False
    message = await post(admin, "news", group_id=team)
    after = {s["name"]: s for s in await streams_of(bob)}
    assert after["Team"]["new_updates"] is True
    assert after["Team"]["last_interacted_at"] == message["last_interacted_at"]
    assert after["Home"]["new_updates"] is True
    await bob.api.get(f"/api/streams/{after['Team']['id']}/messages")
    await bob.api.get("/api/messages")  # Home
    read = {s["name"]: s for s in await streams_of(bob)}
    assert read["Team"]["new_updates"] is False and read["Home"]["new_updates"] is False
    assert read["Company"]["new_updates"] is True
    # a later page does not mark it read; a comment is new activity
    await comment(admin, message["id"])
    await bob.api.get(f"/api/groups/{team}/messages", params={"page": 2})
    assert {s["name"]: s for s in await streams_of(bob)}["Team"]["new_updates"] is True
    await bob.api.get(f"/api/groups/{team}/messages")
    assert {s["name"]: s for s in await streams_of(bob)}["Team"]["new_updates"] is False


async def test_external_contributors_streams(world: World) -> None:
    admin = await world.community()
    ext = await external(world, admin)
    alone = await ext.api.get("/api/streams/primary")
    assert alone.status == 404 and alone.text == "true"
    assert [s["name"] for s in await streams_of(ext)] == SYSTEM[:4]  # no Company stream
    partners = await make_group(world, admin, "Partners", permission="external_contributor",
                                members=[ext])
    await post(admin, "company news")
    in_group = await post(admin, "partner news", group_id=partners)
    primary = await ext.api.get("/api/streams/primary")
    assert primary.status == 200 and primary.json["stream"]["name"] == "Home"
    assert [s["name"] for s in await streams_of(ext)] == [*SYSTEM[:4], "Partners"]
    assert message_ids(await ext.api.get("/api/messages")) == [in_group["id"]]
    admin_company = await stream_id(admin, "Company")
    assert (await ext.api.get(f"/api/streams/{admin_company}/messages")).status == 404


async def test_someone_elses_stream_is_404(world: World) -> None:
    admin = await world.community("Acme")
    bob = await world.user(admin, "Bob")
    private = await make_group(world, admin, "Board", permission="private")
    public = await make_group(world, admin, "Open")
    admin_home = await stream_id(admin, "Home")
    board = await stream_id(admin, "Board")
    open_stream = await stream_id(admin, "Open")
    assert (await bob.api.get(f"/api/streams/{admin_home}/messages")).status == 404
    assert (await bob.api.get(f"/api/streams/{board}/messages")).status == 404
    assert (await bob.api.post(f"/api/streams/{admin_home}/messages",
                               json={"message": {"body": "x"}})).status == 404
    assert (await bob.api.get("/api/messages", params={"stream_id": board})).status == 404
    # a public group's stream is readable by anyone inside (not posting: not a member)
    message = await post(admin, "open news", group_id=public)
    assert message_ids(await bob.api.get(f"/api/streams/{open_stream}/messages")) == [
        message["id"]
    ]
    other = await world.community("Other")
    assert (await other.api.get(f"/api/streams/{open_stream}/messages")).status == 404
    assert (await other.api.get("/api/streams/999999/messages")).status == 404
    assert private != public
    # the statement that finds a stream (or group) marks it read: a 404 marks nothing
    assert (await bob.api.get(f"/api/groups/{private}/messages")).status == 404
    assert (await other.api.get(f"/api/groups/{public}/messages")).status == 404
    assert (await other.api.get("/api/messages", params={"stream_id": open_stream})).status \
        == 404
    marked = await world.pool.fetch(
        "SELECT user_id, stream_id FROM stream_reads WHERE stream_id = ANY($1::bigint[])",
        [admin_home, board, open_stream])
    assert [(r["user_id"], r["stream_id"]) for r in marked] == [(bob.id, open_stream)]


async def test_stream_messages_query_count_is_fixed(world: World, query_log: QueryLog) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    team = await make_group(world, admin, "Team", members=[bob])
    for i in range(8):
        message = await post(admin, f"news {i}", group_id=team)
        await comment(bob, message["id"])
    team_stream = await stream_id(bob, "Team")
    path = f"/api/streams/{team_stream}/messages"
    await bob.api.get(path)
    query_log.reset()
    await bob.api.get(path, params={"per_page": 1})
    small = len(query_log)
    query_log.reset()
    many = await bob.api.get(path, params={"per_page": 500})
    assert len(query_log) == small and len(many.json["messages"]) == 8
    query_log.reset()
    await bob.api.get("/api/streams")
    few_groups = len(query_log)
    for i in range(5):
        await make_group(world, admin, f"More{i}", members=[bob])
    await bob.api.get("/api/streams")
    query_log.reset()
    assert len(await streams_of(bob)) == 11
    assert len(query_log) == few_groups
