"""Helpers shared by the feed tests (messages, comments, likes, flags, polls, streams).

Groups are made directly in the tables of migration 0002, so these tests depend only on the
schema, not on the group endpoints."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support import Member, World

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "socialcast"
CAPTURED_MESSAGE: dict[str, Any] = json.loads(
    (FIXTURES / "message_create.json").read_text()
)["message"]

_groups = itertools.count(1)


async def make_group(
    world: World,
    owner: Member,
    name: str | None = None,
    *,
    permission: str = "public",
    members: Sequence[Member] = (),
    admins: Sequence[Member] = (),
    state: str = "active",
    post_enabled: bool = True,
    allow_access_request: bool = False,
) -> int:
    """A group of owner's community with owner (and `admins`) as admins, `members` as members,
    and its stream."""
    n = next(_groups)
    name = name or f"Group{n}"
    groupname = "".join(ch for ch in name if ch.isalnum()) + str(n)
    async with world.pool.acquire() as conn:
        group_id: int = await conn.fetchval(
            "INSERT INTO groups (community_id, name, groupname, permission, state, "
            "post_enabled, allow_access_request, creator_id) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
            owner.community.id, name, groupname, permission, state, post_enabled,
            allow_access_request, owner.id,
        )
        for member, role in [(owner, "admin"), *((a, "admin") for a in admins),
                             *((m, "member") for m in members)]:
            await conn.execute(
                "INSERT INTO group_memberships (community_id, group_id, user_id, role) "
                "VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                owner.community.id, group_id, member.id, role,
            )
        await conn.execute(
            "INSERT INTO streams (community_id, kind, group_id, name) VALUES ($1, 'group', $2, $3)",
            owner.community.id, group_id, name,
        )
    return group_id


async def groupname_of(world: World, group_id: int) -> str:
    value: str = await world.pool.fetchval("SELECT groupname FROM groups WHERE id = $1", group_id)
    return value


async def post(member: Member, body: str = "Hello", **fields: Any) -> dict[str, Any]:
    """POST /api/messages as member; the created message."""
    resp = await member.api.post("/api/messages", json={"message": {"body": body, **fields}})
    assert resp.status == 201, resp.text
    message: dict[str, Any] = resp.json["message"]
    return message


async def comment(member: Member, message_id: int, text: str = "Nice") -> dict[str, Any]:
    resp = await member.api.post(f"/api/messages/{message_id}/comments",
                                 json={"comment": {"text": text}})
    assert resp.status == 201, resp.text
    created: dict[str, Any] = resp.json["comment"]
    return created


def message_ids(resp: Any) -> list[int]:
    assert resp.status == 200, resp.text
    return [m["id"] for m in resp.json["messages"]]


async def external(world: World, admin: Member, first_name: str = "Ext") -> Member:
    return await world.user(admin, first_name, role="external_contributor")


async def set_interacted(world: World, message_id: int, epoch_seconds: int) -> None:
    await world.pool.execute(
        "UPDATE messages SET last_interacted_at = to_timestamp($2) WHERE id = $1",
        message_id, epoch_seconds,
    )


async def stream_id(member: Member, name: str) -> int:
    """The id of one of member's streams, by name (Home, Company, a group's name...)."""
    resp = await member.api.get("/api/streams")
    assert resp.status == 200, resp.text
    (found,) = [s["id"] for s in resp.json["streams"] if s["name"] == name]
    return int(found)
