"""`since` on every list that takes it: Unix seconds; a far-future value (a client sending
milliseconds), a negative one or garbage is a 400 JSON error, never a 500 (issue 8, defect 7)."""

from __future__ import annotations

import pytest

from tests.support import Member, World

BAD = ["99999999999999", "1700000000000", "-1", "253402300800", "abc", "1e9", "1.5"]


async def _paths(admin: Member) -> list[str]:
    group = await admin.api.post("/api/groups", json={"group": {"name": "Chat", "chat": True}})
    assert group.status == 201, group.text
    topic = await admin.api.post("/api/topics", json={"topic": {"name": "since"}})
    assert topic.status == 201, topic.text
    system = await admin.api.post("/api/external_systems", json={
        "external_system": {"name": "Since", "url": "https://since.example"}})
    assert system.status == 201, system.text
    return [
        "/api/messages",
        "/api/messages/search?q=hello",
        "/api/thanks",
        f"/api/topics/{topic.json['topic']['id']}",
        f"/api/external_systems/{system.json['external_system']['id']}/messages",
        f"/api/groups/{group.json['group']['id']}/chat_messages",
    ]


async def test_since_outside_unix_seconds_is_a_400(world: World) -> None:
    admin = await world.community()
    for path in await _paths(admin):
        sep = "&" if "?" in path else "?"
        ok = await admin.api.get(f"{path}{sep}since=1700000000")
        assert ok.status == 200, (path, ok.text)
        for bad in BAD:
            resp = await admin.api.get(f"{path}{sep}since={bad}")
            assert resp.status == 400, (path, bad, resp.status, resp.text)
            assert resp.json["code"] == "bad_request"
            assert any("since" in m.lower() for m in resp.json["errors"]), resp.json


@pytest.mark.parametrize("good", ["0", " 1700000000 ", "253402300799", ""])
async def test_since_in_range_is_taken(world: World, good: str) -> None:
    admin = await world.community()
    resp = await admin.api.get(f"/api/messages?since={good}")
    assert resp.status == 200, resp.text
