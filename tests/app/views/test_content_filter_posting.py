"""Blocked words of the community's content filters refuse messages and comments (422)."""

from __future__ import annotations

from tests.support import World


async def test_blocked_words_refuse_posts_comments_and_edits(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    added = await admin.api.post("/api/content_filters", json={"content_filter": {"word": "darn"}})
    assert added.status == 201, added.text

    refused = await bob.api.post("/api/messages", json={"message": {"body": "Darn it!"}})
    assert refused.status == 422
    assert refused.json["fields"] == {"message[body]": refused.json["fields"]["message[body]"]}
    titled = await bob.api.post("/api/messages", json={"message": {"title": "darn",
                                                                    "body": "fine"}})
    assert titled.status == 422
    assert (await bob.api.get("/api/messages")).json["messages"] == []

    ok = await bob.api.post("/api/messages", json={"message": {"body": "darning socks"}})
    assert ok.status == 201
    mid = ok.json["message"]["id"]
    edit = await bob.api.put(f"/api/messages/{mid}", json={"message": {"body": "darn"}})
    assert edit.status == 422
    assert (await bob.api.get(f"/api/messages/{mid}")).json["message"]["body"] == "darning socks"

    comment = await bob.api.post(f"/api/messages/{mid}/comments",
                                 json={"comment": {"text": "DARN"}})
    assert comment.status == 422
    assert "comment[text]" in comment.json["fields"]
    fine = await bob.api.post(f"/api/messages/{mid}/comments", json={"comment": {"text": "ok"}})
    assert fine.status == 201
    cid = fine.json["comment"]["id"]
    changed = await bob.api.put(f"/api/messages/{mid}/comments/{cid}",
                                json={"comment": {"text": "darn"}})
    assert changed.status == 422
