"""A list page's messages are kept as JSON under their rows and the versions of what the rows
do not hold (app.render.page_messages): after any change a viewer could see, the page served
with the kept forms is the page rendered afresh, for each viewer."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

import migrations
from app.context import Viewer
from app.render import page_messages
from app.render.feed import FeedData
from storage.rows import EmbeddedUserRow
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
        assert page_messages._KEPT.entries, "nothing kept"
        assert await home(member) == kept  # served from what is kept
        with monkeypatch.context() as empty:
            empty.setattr(page_messages, "_KEPT", page_messages.Store())
            fresh = await home(member)
        assert kept == fresh


async def test_every_change_a_viewer_sees_is_another_key(
    world: World, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(page_messages, "_KEPT", page_messages.Store())
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
        ("put", f"/api/users/{cat.id}", cat, {"user": {"title": "Chef"}}),
        ("post", f"/api/messages/{mid}/comments", admin, {"comment": {"text": "Noted"}}),
    ]
    for method, path, who, body in changes:
        resp = await getattr(who.api, method)(path, json=body)
        assert resp.status in (200, 201), (path, resp.status, resp.text)
        await assert_fresh(monkeypatch, *viewers)
    likes = (await admin.api.get(f"/api/messages/{mid}")).json["message"]["likes"]
    unliked = await cat.api.delete(f"/api/messages/{mid}/likes/{likes[0]['id']}")
    assert unliked.status in (200, 204), unliked.text
    await assert_fresh(monkeypatch, *viewers)
    newest = (await admin.api.get(f"/api/messages/{mid}")).json["message"]["comments"][-1]
    deleted = await admin.api.delete(f"/api/messages/{mid}/comments/{newest['id']}")
    assert deleted.status in (200, 204), deleted.text
    await assert_fresh(monkeypatch, *viewers)
    gone = await admin.api.delete(f"/api/users/{cat.id}")  # deactivated
    assert gone.status in (200, 204), gone.text
    await assert_fresh(monkeypatch, admin, bob)
    # the same message, kept once, serves viewers whose flags come out alike: the admin, one
    # of its people (its author), and Bob, another (a commenter), have forms of their own
    kept = next(k for key, k in page_messages._KEPT.entries.items() if key[3][0] == mid)
    assert {admin.id, bob.id} <= kept.people and set(kept.forms) <= {*kept.people, None}


async def test_what_the_key_does_not_cover_is_rendered_every_time(
    world: World, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(page_messages, "_KEPT", page_messages.Store())
    admin = await world.community()
    answers = [{"answer": "Yes"}, {"answer": "No"}]
    poll = await admin.api.post("/api/polls", json={"poll": {
        "question": "Lunch?", "poll_answers_attributes": answers}})
    assert poll.status == 201, poll.text
    posted = await admin.api.post("/api/messages", json={"message": {
        "body": "Vote", "poll_id": poll.json["poll"]["id"]}})
    assert posted.status == 201, posted.text
    assert [m["poll"]["question"] for m in await home(admin)] == ["Lunch?"]
    assert page_messages._KEPT.entries == {}
    # nor a message addressed to a group besides its own: whether that group is listed
    # depends on the viewer's memberships, which the key does not hold
    crew = await world.group(admin, "Crew")
    to_crew = await admin.api.post("/api/messages", json={"message": {
        "body": f"For @{crew['groupname']}"}})
    assert to_crew.status == 201, to_crew.text
    assert to_crew.json["message"]["recipients"][0]["id"] == crew["id"]
    await home(admin)
    assert page_messages._KEPT.entries == {}, "a message addressed to a group was kept"


def test_a_new_input_of_the_feed_is_a_question_for_the_key() -> None:
    """Tripwire: every FeedData field is either covered by the key (the row, or a version of
    migration 0021) or makes a message not kept, and of the viewer the key holds the role and
    (when it is one of the message's people) the id, which is all app.access's may_* read
    today. A new one must be added there before these lists."""
    assert [f.name for f in dataclasses.fields(Viewer)] == ["id", "community_id", "role", "row"]
    assert [f.name for f in dataclasses.fields(FeedData)] == [
        "base", "viewer", "users", "groups", "recipients", "tags", "comment_recipients",
        "comment_tags", "resources", "attachments", "media_files", "comments", "likes",
        "polls", "shared", "extensions", "_embedded_users", "_like_users",
        "_recipient_users", "_short_groups",
    ]


def test_every_user_column_a_message_shows_bumps_the_directory() -> None:
    """Tripwire: migration 0021's users trigger compares every column the embedded forms of a
    user read (storage.rows.EmbeddedUserRow), so a renamed user is another key."""
    sql = (Path(migrations.__file__).parent / "0021_render_versions.sql").read_text()
    compared = re.search(r"WHEN \(\((OLD\.username[^)]*)\)\s+IS DISTINCT FROM", sql)
    assert compared is not None
    columns = {c.strip().removeprefix("OLD.") for c in compared.group(1).split(",")}
    assert columns == {*EmbeddedUserRow.__annotations__, "community_id"} - {"id"}


async def test_a_viewer_who_likes_a_message_gets_their_own_form(
    world: World, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The viewer's own like is shown first even beyond the likes others see: a liker never
    gets the form kept for anyone else, nor another liker's."""
    monkeypatch.setattr(page_messages, "_KEPT", page_messages.Store())
    admin = await world.community()
    early, late, fan, other = [
        await world.user(admin, name) for name in ("Early", "Late", "Fan", "Other")]
    for member in (early, late, fan, other):
        assert (await member.api.post(f"/api/users/{admin.id}/followers")).status == 201
    mid = (await admin.api.post("/api/messages", json={"message": {"body": "Hi"}})
           ).json["message"]["id"]
    older = await admin.api.post(f"/api/messages/{mid}/comments",
                                 json={"comment": {"text": "First"}})
    assert older.status == 201, older.text
    newer = await admin.api.post(f"/api/messages/{mid}/comments",
                                 json={"comment": {"text": "Second"}})
    assert newer.status == 201, newer.text
    # Fan likes only the older comment, which a page of one comment does not show
    liked = await fan.api.post(f"/api/messages/{mid}/comments/{older.json['comment']['id']}"
                               "/likes")
    assert liked.status == 201, liked.text
    for member in (early, late):
        assert (await member.api.post(f"/api/messages/{mid}/likes")).status == 201

    async def likes(member: Member) -> list[tuple[int, bool]]:
        resp = await member.api.get("/api/messages",
                                    params={"likes_limit": 1, "comments_limit": 1})
        assert resp.status == 200, resp.text
        return [(like["user"]["id"], like["unlikable"])
                for like in resp.json["messages"][0]["likes"]]

    assert await likes(other) == [(late.id, False)]  # kept for anyone else
    assert await likes(fan) == [(late.id, False)]  # a liker, but of nothing shown
    assert await likes(early) == [(early.id, True)]
    assert await likes(late) == [(late.id, True)]
    assert await likes(fan) == [(late.id, False)]
    assert await likes(early) == [(early.id, True)]
    assert await likes(other) == [(late.id, False)]
