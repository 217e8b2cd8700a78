"""Storage of the feed: the constraints that keep likes, flags and poll responses unique, topic
and resource upserts, concurrent writers, and the message query builder."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import asyncpg
import pytest

from storage import flags, likes, messages, polls, streams, topics
from storage.db import transaction
from storage.messages import MessageQuery
from tests.support import World


async def _message(world: World, community_id: int, user_id: int, body: str = "hi") -> int:
    async with transaction(world.pool) as conn:
        row = await messages.insert(
            conn, community_id, user_id=user_id, group_id=None, external_system_id=None,
            title="", body=body, html_body="", action="", verb=None,
            message_type="status_message", external_url=None, source="api",
            is_announcement=False, days_of_stickiness=0, shared_message_id=None,
            client_provided_guid=None, external_resource_ids=[], extensions=[],
        )
        return int(row["id"])


async def test_the_database_refuses_a_second_like_or_flag(world: World) -> None:
    admin = await world.community()
    cid = admin.community.id
    mid = await _message(world, cid, admin.id)
    insert = "INSERT INTO likes (community_id, user_id, message_id) VALUES ($1, $2, $3)"
    await world.pool.execute(insert, cid, admin.id, mid)
    with pytest.raises(asyncpg.UniqueViolationError):
        await world.pool.execute(insert, cid, admin.id, mid)
    flag = "INSERT INTO flags (community_id, user_id, message_id) VALUES ($1, $2, $3)"
    await world.pool.execute(flag, cid, admin.id, mid)
    with pytest.raises(asyncpg.UniqueViolationError):
        await world.pool.execute(flag, cid, admin.id, mid)


async def test_concurrent_likes_and_flags_make_one_row(world: World) -> None:
    admin = await world.community()
    cid = admin.community.id
    mid = await _message(world, cid, admin.id)

    async def like_once() -> asyncpg.Record:
        async with transaction(world.pool) as conn:
            return await likes.like(conn, cid, admin.id, mid)

    async def flag_once() -> asyncpg.Record:
        async with transaction(world.pool) as conn:
            return await flags.flag(conn, cid, admin.id, mid)

    liked = await asyncio.gather(*(like_once() for _ in range(6)))
    assert len({r["id"] for r in liked}) == 1 and sum(r["created"] for r in liked) == 1
    flagged = await asyncio.gather(*(flag_once() for _ in range(6)))
    assert len({r["id"] for r in flagged}) == 1 and sum(r["created"] for r in flagged) == 1
    assert await likes.count(world.pool, mid, None) == 1


async def test_poll_responses_move_between_answers(world: World) -> None:
    admin = await world.community()
    users = await world.many_users(admin, 5)
    cid = admin.community.id
    poll_id = await polls.insert(world.pool, cid, admin.id, "Q?", ["a", "b"])
    row = await polls.by_id(world.pool, cid, admin.id, poll_id)
    assert row is not None
    a, b = (answer["id"] for answer in row["answers"])
    await asyncio.gather(*(polls.respond(world.pool, cid, poll_id, u.id, a) for u in users))
    await asyncio.gather(*(polls.respond(world.pool, cid, poll_id, u.id, b) for u in users[:2]))
    row = await polls.by_id(world.pool, cid, users[0].id, poll_id)
    assert row is not None
    assert [x["response_count"] for x in row["answers"]] == [3, 2]
    assert row["my_response_id"] == b
    assert not await polls.respond(world.pool, cid, poll_id, admin.id, 999999)


async def test_topics_are_lower_case_and_upserted_once(world: World) -> None:
    admin = await world.community()
    cid = admin.community.id
    async with transaction(world.pool) as conn:
        first = await topics.upsert(conn, cid, ["Sales", "#meetings", "sales"], admin.id)
        again = await topics.upsert(conn, cid, ["SALES"], None)
        resources = await messages.upsert_resources(
            conn, cid, ["https://a.example", "https://b.example", "https://a.example"]
        )
        same = await messages.upsert_resources(conn, cid, ["https://b.example"])
    assert len(first) == 2 and again == first[:1]
    names = [r["name"] for r in await world.pool.fetch("SELECT name FROM topics ORDER BY id")]
    assert names == ["sales", "meetings"]
    assert len(resources) == 2 and same == resources[1:]
    with pytest.raises(asyncpg.CheckViolationError):
        await world.pool.execute(
            "INSERT INTO topics (community_id, name) VALUES ($1, 'Upper')", cid
        )


async def test_system_streams_are_made_once(world: World) -> None:
    admin = await world.community()
    cid = admin.community.id
    await asyncio.gather(*(streams.ensure(world.pool, cid, admin.id, False) for _ in range(4)))
    rows = await streams.of_viewer(world.pool, cid, admin.id, False)
    assert [r["kind"] for r in rows] == ["home", "mentions", "bookmarked", "sent", "company"]


def test_message_query_numbers_its_parameters_after_the_fixed_three() -> None:
    sql, args = MessageQuery(
        stream="home", author_id=5, topic="sales", since=datetime(2020, 1, 1, tzinfo=UTC),
        search="report", sticky_first=True,
    ).build(offset=20, limit=21)
    assert args[:3] == [5, "sales", datetime(2020, 1, 1, tzinfo=UTC)]
    assert args[-2:] == [20, 21]
    assert "m.user_id = $4" in sql and "t.name = $5" in sql and "> $6" in sql
    assert "websearch_to_tsquery('english', $7)" in sql
    assert sql.index("sticky DESC") < sql.index("rank DESC") < sql.index("last_interacted_at DESC")
    assert sql.rstrip().endswith("OFFSET $8 LIMIT $9")
