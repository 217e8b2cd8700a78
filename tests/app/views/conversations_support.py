"""Helpers shared by the conversation, remark and chat tests."""

from __future__ import annotations

from typing import Any

import orjson

from tests.support import Member, World


async def start(creator: Member, *others: Member, text: str | None = "Hello",
                name: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "conversation": {"members_emails": " ".join(o.email for o in others)}
    }
    if name is not None:
        body["conversation"]["name"] = name
    if text is not None:
        body["remark"] = {"text": text}
    resp = await creator.api.post("/api/conversations", json=body)
    assert resp.status == 201, resp.text
    conversation: dict[str, Any] = resp.json["conversation"]
    return conversation


async def say(member: Member, conversation_id: int, text: str) -> dict[str, Any]:
    resp = await member.api.post(f"/api/conversations/{conversation_id}/remarks",
                                 json={"remark": {"text": text}})
    assert resp.status == 201, resp.text
    activity: dict[str, Any] = resp.json["activity"]
    return activity


async def events_of(world: World, community_id: int) -> list[tuple[str, str, Any]]:
    rows = await world.pool.fetch(
        "SELECT channel, name, data::text AS data FROM realtime_events "
        "WHERE community_id = $1 ORDER BY id", community_id,
    )
    return [(r["channel"], r["name"], orjson.loads(r["data"])) for r in rows]
