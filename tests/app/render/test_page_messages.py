"""A list page's messages are kept as JSON under everything they are rendered from
(app.render.page_messages): after any change a viewer could see, the page served with the kept
forms is the page rendered afresh, for each viewer."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from app.context import Viewer
from app.render import page_messages
from app.render.feed import FeedData
from tests.support import Member, World


async def home(member: Member) -> list[Any]:
    resp = await member.api.get("/api/messages")
    assert resp.status == 200, resp.text
    messages: list[Any] = resp.json["messages"]
    return messages


async def assert_fresh(monkeypatch: pytest.MonkeyPatch, *members: Member) -> None:
    """Each member's Home, served with the forms kept so far, is what it is rendered afresh
    (and the kept forms were used: every member's page is kept after its first read)."""
    for member in members:
        kept = await home(member)
        assert page_messages._FORMS, "nothing kept"
        with monkeypatch.context() as empty:
            empty.setattr(page_messages, "_FORMS", {})
            fresh = await home(member)
        assert kept == fresh


async def test_every_change_a_viewer_sees_is_another_key(
    world: World, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(page_messages, "_FORMS", {})
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    cat = await world.user(admin, "Cat")
    group = await world.group(admin, "Crew", members=(bob, cat))
    for member in (bob, cat):
        assert (await member.api.post(f"/api/users/{admin.id}/followers")).status == 201
    posted = await admin.api.post("/api/messages", json={"message": {
        "body": f"Plans for #friday, @{bob.username}", "group_id": group["id"]}})
    assert posted.status == 201, posted.text
    mid = posted.json["message"]["id"]
    plain = await bob.api.post("/api/messages", json={"message": {"body": "Lunch?"}})
    assert plain.status == 201, plain.text
    comment = await bob.api.post(f"/api/messages/{mid}/comments",
                                 json={"comment": {"text": f"Count me in @{cat.username}"}})
    assert comment.status == 201, comment.text
    cid = comment.json["comment"]["id"]
    viewers = (admin, bob, cat)
    await assert_fresh(monkeypatch, *viewers)  # kept now

    changes = [
        ("put", f"/api/messages/{mid}", admin, {"message": {"body": "New plans for #friday"}}),
        ("post", f"/api/messages/{mid}/likes", cat, None),
        ("post", f"/api/messages/{mid}/comments/{cid}/likes", admin, None),
        ("put", f"/api/messages/{mid}/comments/{cid}", bob, {"comment": {"text": "Edited"}}),
        ("post", f"/api/messages/{mid}/comments", cat, {"comment": {"text": "Me too"}}),
        ("put", f"/api/users/{bob.id}", bob, {"user": {"first_name": "Robert"}}),
        ("put", f"/api/users/{cat.id}", admin, {"user": {"role": "admin"}}),
        ("put", f"/api/groups/{group['id']}", admin, {"group": {"name": "Crew 2"}}),
        ("post", f"/api/messages/{mid}/flags", bob, None),
    ]
    for method, path, who, body in changes:
        resp = await getattr(who.api, method)(path, json=body)
        assert resp.status in (200, 201), (path, resp.status, resp.text)
        await assert_fresh(monkeypatch, *viewers)
    likes = (await admin.api.get(f"/api/messages/{mid}")).json["message"]["likes"]
    unliked = await cat.api.delete(f"/api/messages/{mid}/likes/{likes[0]['id']}")
    assert unliked.status in (200, 204), unliked.text
    await assert_fresh(monkeypatch, *viewers)
    # the same message, kept once, serves viewers whose flags come out alike
    assert len({key[3][0] for key in page_messages._FORMS}) == 2  # both messages


async def test_what_the_key_does_not_cover_is_rendered_every_time(
    world: World, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(page_messages, "_FORMS", {})
    admin = await world.community()
    answers = [{"answer": "Yes"}, {"answer": "No"}]
    poll = await admin.api.post("/api/polls", json={"poll": {
        "question": "Lunch?", "poll_answers_attributes": answers}})
    assert poll.status == 201, poll.text
    posted = await admin.api.post("/api/messages", json={"message": {
        "body": "Vote", "poll_id": poll.json["poll"]["id"]}})
    assert posted.status == 201, posted.text
    assert [m["poll"]["question"] for m in await home(admin)] == ["Lunch?"]
    assert page_messages._FORMS == {}


def test_a_new_input_of_the_feed_is_a_question_for_the_key() -> None:
    """Tripwire: every FeedData field is either in the key (app.render.page_messages._key) or
    makes it give up, and of the viewer the key holds the role and (when it wrote something
    on the message) the id, which is all app.access's may_* read today. A new one must be
    added there before these lists."""
    assert [f.name for f in dataclasses.fields(Viewer)] == ["id", "community_id", "role", "row"]
    assert [f.name for f in dataclasses.fields(FeedData)] == [
        "base", "viewer", "users", "groups", "recipients", "tags", "comment_recipients",
        "comment_tags", "resources", "attachments", "media_files", "comments", "likes",
        "polls", "shared", "extensions", "_embedded_users", "_like_users",
        "_recipient_users", "_short_groups",
    ]
