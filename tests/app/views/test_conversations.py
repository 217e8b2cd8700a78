"""Conversations: one-to-one and shared chats, members, read state, hiding, and their events."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.app.views.conversations_support import events_of, say, start
from tests.support import Member, World


async def test_one_to_one_conversation(world: World) -> None:
    admin = await world.community("Acme")
    ann = await world.user(admin, "Ann", "Lee")
    bob = await world.user(admin, "Bob", "Ray")
    resp = await ann.api.post(
        "/api/conversations.json",
        data={"conversation[members_emails]": bob.email, "remark[text]": "Lunch?"},
    )
    assert resp.status == 201, resp.text
    conv = resp.json["conversation"]
    assert list(conv) == ["id", "name", "title", "private", "unread", "unread_count",
                          "latest_activity", "members", "avatar"]
    assert conv["private"] is True
    assert conv["name"] is None
    assert conv["title"] == "Bob Ray"
    assert conv["unread"] is False and conv["unread_count"] == 0
    assert [m["id"] for m in conv["members"]] == [ann.id, bob.id]
    assert list(conv["members"][0]) == ["id", "name", "email", "cell_phone", "office_phone",
                                        "first_name", "last_name", "profile_photo", "inactive",
                                        "terminated"]
    assert conv["latest_activity"]["object"]["content"] == "Lunch?"
    assert list(conv["avatar"]) == ["url", "width", "height", "is_system_default"]
    assert conv["avatar"]["url"].endswith("default_user_square70.png")
    # Bob sees it titled after Ann, unread
    seen = await bob.api.get(f"/api/conversations/{conv['id']}")
    assert seen.status == 200
    assert seen.json["conversation"]["title"] == "Ann Lee"
    assert seen.json["conversation"]["unread"] is True
    assert seen.json["conversation"]["unread_count"] == 1


async def test_shared_conversation_title_and_name(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann", "Lee")
    bob = await world.user(admin, "Bob", "Ray")
    cy = await world.user(admin, "Cy", "Dee")
    dan = await world.user(admin, "Dan", "Fox")
    eve = await world.user(admin, "Eve", "Gold")
    conv = await start(ann, bob, cy, text=None)
    assert conv["private"] is False
    assert conv["title"] == "Bob Ray and Cy Dee"
    assert conv["latest_activity"] is None
    assert conv["avatar"]["url"].endswith("default_group_square70.png")
    big = await start(ann, bob, cy, dan, eve, text=None)
    assert big["title"] == "Bob Ray, Cy Dee, Dan Fox and 1 other"
    named = await start(bob, ann, dan, name="  Plans  ")
    assert named["name"] == "Plans" and named["title"] == "Plans"


async def test_same_member_set_reuses_the_conversation(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    bob = await world.user(admin, "Bob")
    cy = await world.user(admin, "Cy")
    first = await start(ann, bob, cy, text="one")
    # any order, any case, the creator named or not, from another member: the same conversation
    resp = await bob.api.post("/api/conversations", json={
        "conversation": {"members_emails": f"{cy.email.upper()}  {ann.email} {bob.email}"},
        "remark": {"text": "two"},
    })
    assert resp.status == 201
    assert resp.json["conversation"]["id"] == first["id"]
    assert resp.json["conversation"]["latest_activity"]["object"]["content"] == "two"
    acts = await ann.api.get(f"/api/conversations/{first['id']}/activities")
    assert [a["object"]["content"] for a in acts.json["activities"]] == ["two", "one"]
    # a one-to-one between two of them is another conversation
    pair = await start(ann, bob)
    assert pair["id"] != first["id"] and pair["private"] is True
    assert (await start(bob, ann))["id"] == pair["id"]


async def test_member_set_key_follows_the_members(world: World) -> None:
    admin = await world.community()
    ann, bob, cy, dan = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy", "Dan")]
    abc = await start(ann, bob, cy)
    abd = await start(ann, bob, dan)
    # abd gains Cy: its set is now {ann, bob, cy, dan}
    resp = await ann.api.post(f"/api/conversations/{abd['id']}/members",
                              json={"members_emails": cy.email})
    assert resp.status == 201
    assert (await start(dan, ann, bob, cy))["id"] == abd["id"]
    # abd lost its old set: {ann, bob, dan} makes a new conversation
    assert (await start(ann, bob, dan))["id"] not in (abc["id"], abd["id"])
    # Cy leaves abc: {ann, bob} is now a one-to-one, reused as one (decisions.md)
    assert (await cy.api.delete(f"/api/conversations/{abc['id']}/members/me")).status == 204
    pair = await start(ann, bob)
    assert pair["id"] == abc["id"] and pair["private"] is True
    # re-adding Cy makes it shared and reusable for {ann, bob, cy} again
    await ann.api.post(f"/api/conversations/{abc['id']}/members",
                       json={"members_emails": cy.email})
    again = await start(cy, ann, bob)
    assert again["id"] == abc["id"] and again["private"] is False


async def test_member_set_held_twice_reuses_the_most_recently_active(world: World) -> None:
    admin = await world.community()
    ann, bob, cy, dan = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy", "Dan")]
    abcd = await start(ann, bob, cy, dan)
    abc = await start(ann, bob, cy)
    resp = await ann.api.post(f"/api/conversations/{abc['id']}/members",
                              json={"members_emails": dan.email})
    assert resp.status == 201
    # abc's join is the newest activity of the two
    assert (await start(ann, bob, cy, dan, text=None))["id"] == abc["id"]
    await say(bob, abcd["id"], "newer here")
    assert (await start(ann, bob, cy, dan, text=None))["id"] == abcd["id"]


async def test_create_validation(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    missing = await ann.api.post("/api/conversations", json={"remark": {"text": "hi"}})
    assert missing.status == 422
    assert "conversation[members_emails]" in missing.json["fields"]
    unknown = await ann.api.post("/api/conversations", json={
        "conversation": {"members_emails": "nobody@nowhere.example"}})
    assert unknown.status == 422
    assert "nobody@nowhere.example" in unknown.json["errors"][0]
    alone = await ann.api.post("/api/conversations", json={
        "conversation": {"members_emails": ann.email}})
    assert alone.status == 422
    gone = await world.user(admin, "Gone")
    assert (await admin.api.delete(f"/api/users/{gone.id}")).status == 200
    inactive = await ann.api.post("/api/conversations", json={
        "conversation": {"members_emails": gone.email}})
    assert inactive.status == 422
    listed = await ann.api.get("/api/conversations")
    assert listed.json == {"conversations": []}


async def test_other_community_emails_are_422(world: World) -> None:
    acme = await world.community("Acme")
    ann = await world.user(acme, "Ann")
    other = await world.community("Other")
    stranger = await world.user(other, "Stranger")
    resp = await ann.api.post("/api/conversations", json={
        "conversation": {"members_emails": stranger.email}})
    assert resp.status == 422
    bob = await world.user(acme, "Bob")
    cy = await world.user(acme, "Cy")
    conv = await start(ann, bob, cy)
    add = await ann.api.post(f"/api/conversations/{conv['id']}/members",
                             json={"members_emails": stranger.email})
    assert add.status == 422
    members = await ann.api.get(f"/api/conversations/{conv['id']}/members")
    assert stranger.id not in [u["id"] for u in members.json["users"]]


async def test_list_order_filters_and_paging(world: World) -> None:
    admin = await world.community()
    ann, bob, cy, dan = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy", "Dan")]
    with_bob = await start(ann, bob, text="1")
    with_cy = await start(ann, cy, text="2")
    with_dan = await start(ann, dan, text="3")
    await say(bob, with_bob["id"], "bump")
    resp = await ann.api.get("/api/conversations")
    assert resp.status == 200
    assert [c["id"] for c in resp.json["conversations"]] == [
        with_bob["id"], with_dan["id"], with_cy["id"]]
    unread = await ann.api.get("/api/conversations", params={"unread": "true"})
    assert [c["id"] for c in unread.json["conversations"]] == [with_bob["id"]]
    page2 = await ann.api.get("/api/conversations", params={"per_page": "1", "page": "2"})
    assert [c["id"] for c in page2.json["conversations"]] == [with_dan["id"]]
    assert (await ann.api.get("/api/conversations", params={"page": "9"})).json == {
        "conversations": []}
    assert (await ann.api.get("/api/conversations", params={"per_page": "x"})).status == 400
    # Bob sees only his own
    mine = await bob.api.get("/api/conversations")
    assert [c["id"] for c in mine.json["conversations"]] == [with_bob["id"]]


async def test_rename(world: World) -> None:
    admin = await world.community()
    ann, bob, cy = [await world.user(admin, n, "X") for n in ("Ann", "Bob", "Cy")]
    conv = await start(ann, bob, cy)
    resp = await bob.api.put(f"/api/conversations/{conv['id']}",
                             json={"conversation": {"name": "Team"}})
    assert resp.status == 200
    assert resp.json["conversation"]["name"] == "Team"
    assert resp.json["conversation"]["title"] == "Team"
    assert resp.json["conversation"]["latest_activity"]["verb"] == "update"
    assert resp.json["conversation"]["latest_activity"]["title"] == \
        "Bob X renamed the conversation to Team"
    seen = await ann.api.get(f"/api/conversations/{conv['id']}")
    assert seen.json["conversation"]["name"] == "Team"
    # renaming is not a remark: nothing unread for Ann beyond the first remark (her own)
    assert seen.json["conversation"]["unread_count"] == 0
    cleared = await ann.api.put(f"/api/conversations/{conv['id']}",
                                data={"conversation[name]": ""})
    assert cleared.json["conversation"]["name"] is None
    assert cleared.json["conversation"]["title"] == "Bob X and Cy X"
    # a rename that names nothing is no rename (decisions.md: a 422, never a silent 200)
    blank = await ann.api.put(f"/api/conversations/{conv['id']}", json={})
    assert blank.status == 422
    assert blank.json["fields"] == {"conversation": ["names no known field"]}
    untouched = await ann.api.get(f"/api/conversations/{conv['id']}")
    assert untouched.json["conversation"]["title"] == "Bob X and Cy X"


async def test_members_list_add_and_leave(world: World) -> None:
    admin = await world.community()
    ann, bob, cy, dan = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy", "Dan")]
    conv = await start(ann, bob, cy)
    cid = conv["id"]
    members = await bob.api.get(f"/api/conversations/{cid}/members")
    assert members.status == 200
    assert [u["id"] for u in members.json["users"]] == [ann.id, bob.id, cy.id]
    paged = await bob.api.get(f"/api/conversations/{cid}/members",
                              params={"per_page": "2", "page": "2"})
    assert [u["id"] for u in paged.json["users"]] == [cy.id]
    # Dan can't see it until added
    assert (await dan.api.get(f"/api/conversations/{cid}")).status == 404
    added = await bob.api.post(f"/api/conversations/{cid}/members",
                               data={"members_emails": f"{dan.email} {cy.email}"})
    assert added.status == 201
    assert [u["id"] for u in added.json["users"]] == [ann.id, bob.id, cy.id, dan.id]
    joined = await dan.api.get(f"/api/conversations/{cid}")
    assert joined.status == 200
    # what was said before Dan came is not unread for him
    assert joined.json["conversation"]["unread_count"] == 0
    acts = await dan.api.get(f"/api/conversations/{cid}/activities")
    assert acts.json["activities"][0]["verb"] == "join"
    assert acts.json["activities"][0]["actor"]["id"] == dan.id
    # Cy leaves
    left = await cy.api.delete(f"/api/conversations/{cid}/members/me")
    assert left.status == 204
    assert (await cy.api.get(f"/api/conversations/{cid}")).status == 404
    assert (await cy.api.get("/api/conversations")).json["conversations"] == []
    after = await ann.api.get(f"/api/conversations/{cid}/members")
    assert [u["id"] for u in after.json["users"]] == [ann.id, bob.id, dan.id]
    assert (await cy.api.delete(f"/api/conversations/{cid}/members/me")).status == 404
    latest = (await ann.api.get(f"/api/conversations/{cid}")).json["conversation"]
    assert latest["latest_activity"]["verb"] == "leave"
    assert latest["latest_activity"]["actor"]["id"] == cy.id


async def test_private_follows_the_membership(world: World) -> None:
    """decisions.md: adding to a one-to-one makes it shared, and the newcomer sees only what
    comes from their joining on; leaving down to two makes it private again."""
    admin = await world.community()
    ann, bob, cy, dan = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy", "Dan")]
    pair = await start(ann, bob, text="just us")
    pid = pair["id"]
    secret = (await ann.api.get(f"/api/conversations/{pid}/activities")).json["activities"][0]
    # leaving a one-to-one is still refused (hide it instead)
    assert (await ann.api.delete(f"/api/conversations/{pid}/members/me")).status == 422
    add = await ann.api.post(f"/api/conversations/{pid}/members",
                             json={"members_emails": cy.email})
    assert add.status == 201, add.text
    assert [u["id"] for u in add.json["users"]] == [ann.id, bob.id, cy.id]
    shared = (await ann.api.get(f"/api/conversations/{pid}")).json["conversation"]
    assert shared["private"] is False
    await say(bob, pid, "welcome Cy")
    seen_by_cy = (await cy.api.get(f"/api/conversations/{pid}/activities")).json["activities"]
    assert (seen_by_cy[0]["verb"], seen_by_cy[0]["object"]["content"]) == ("post", "welcome Cy")
    assert "just us" not in [a["object"]["content"] for a in seen_by_cy]
    assert (await cy.api.get(f"/api/conversations/{pid}/activities/{secret['id']}")).status == 404
    seen_by_ann = (await ann.api.get(f"/api/conversations/{pid}/activities")).json["activities"]
    assert "just us" in [a["object"]["content"] for a in seen_by_ann]
    assert (await ann.api.get(f"/api/conversations/{pid}/activities/{secret['id']}")).status == 200
    # hide and unhide now apply to it no more
    assert (await ann.api.put(f"/api/conversations/{pid}/hide")).status == 422
    # the next newcomer does not see the one-to-one past either
    await ann.api.post(f"/api/conversations/{pid}/members", json={"members_emails": dan.email})
    seen_by_dan = (await dan.api.get(f"/api/conversations/{pid}/activities")).json["activities"]
    assert "just us" not in [a["object"]["content"] for a in seen_by_dan]
    # down to two again: private, and reused for that pair
    assert (await dan.api.delete(f"/api/conversations/{pid}/members/me")).status == 204
    assert (await cy.api.delete(f"/api/conversations/{pid}/members/me")).status == 204
    back = (await bob.api.get(f"/api/conversations/{pid}")).json["conversation"]
    assert back["private"] is True
    assert (await start(bob, ann, text=None))["id"] == pid
    assert (await ann.api.put(f"/api/conversations/{pid}/hide")).status == 200


async def test_unread_counts_per_member_and_acknowledge(world: World) -> None:
    admin = await world.community()
    ann, bob, cy = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy")]
    conv = await start(ann, bob, cy, text="a1")
    cid = conv["id"]
    await say(bob, cid, "b1")
    await say(bob, cid, "b2")

    async def unread(member: Member) -> int:
        resp = await member.api.get(f"/api/conversations/{cid}")
        count: int = resp.json["conversation"]["unread_count"]
        return count

    assert (await unread(ann), await unread(bob), await unread(cy)) == (2, 0, 3)
    ack = await cy.api.post(f"/api/conversations/{cid}/acknowledge")
    assert ack.status == 200
    assert ack.json["conversation"]["unread_count"] == 0
    assert ack.json["conversation"]["unread"] is False
    assert (await unread(ann), await unread(cy)) == (2, 0)
    await say(ann, cid, "a2")
    assert (await unread(ann), await unread(bob), await unread(cy)) == (0, 1, 1)
    other = await start(bob, cy, text="hey")
    assert (await cy.api.get("/api/conversations", params={"unread": "1"})).status == 200
    ack_all = await cy.api.post("/api/conversations/acknowledge_all")
    assert ack_all.status == 204
    listed = await cy.api.get("/api/conversations")
    assert {c["id"]: c["unread_count"] for c in listed.json["conversations"]} == {
        cid: 0, other["id"]: 0}
    assert await unread(bob) == 1


async def test_hide_and_unhide(world: World) -> None:
    admin = await world.community()
    ann, bob, cy = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy")]
    pair = await start(ann, bob)
    shared = await start(ann, bob, cy)
    hidden = await ann.api.put(f"/api/conversations/{pair['id']}/hide")
    assert hidden.status == 200
    assert hidden.json["conversation"]["id"] == pair["id"]
    visible = await ann.api.get("/api/conversations")
    assert [c["id"] for c in visible.json["conversations"]] == [shared["id"]]
    only_hidden = await ann.api.get("/api/conversations", params={"hidden": "true"})
    assert [c["id"] for c in only_hidden.json["conversations"]] == [pair["id"]]
    # hidden for Ann only
    assert len((await bob.api.get("/api/conversations")).json["conversations"]) == 2
    # a new remark brings it back
    await say(bob, pair["id"], "still there?")
    back = await ann.api.get("/api/conversations")
    assert [c["id"] for c in back.json["conversations"]] == [pair["id"], shared["id"]]
    await ann.api.put(f"/api/conversations/{pair['id']}/hide")
    unhidden = await ann.api.put(f"/api/conversations/{pair['id']}/unhide")
    assert unhidden.status == 200
    assert len((await ann.api.get("/api/conversations")).json["conversations"]) == 2
    # starting it again unhides it too
    await ann.api.put(f"/api/conversations/{pair['id']}/hide")
    assert (await start(ann, bob, text=None))["id"] == pair["id"]
    assert len((await ann.api.get("/api/conversations")).json["conversations"]) == 2
    # shared conversations can't be hidden
    assert (await ann.api.put(f"/api/conversations/{shared['id']}/hide")).status == 422
    assert (await ann.api.put(f"/api/conversations/{shared['id']}/unhide")).status == 422


def _paths(cid: int) -> list[tuple[str, str, dict[str, Any] | None]]:
    return [
        ("GET", f"/api/conversations/{cid}", None),
        ("PUT", f"/api/conversations/{cid}", {"conversation": {"name": "x"}}),
        ("GET", f"/api/conversations/{cid}/members", None),
        ("POST", f"/api/conversations/{cid}/members", {"members_emails": "{email}"}),
        ("DELETE", f"/api/conversations/{cid}/members/me", None),
        ("GET", f"/api/conversations/{cid}/activities", None),
        ("GET", f"/api/conversations/{cid}/activities/1", None),
        ("POST", f"/api/conversations/{cid}/remarks", {"remark": {"text": "x"}}),
        ("POST", f"/api/conversations/{cid}/acknowledge", None),
        ("PUT", f"/api/conversations/{cid}/hide", None),
        ("PUT", f"/api/conversations/{cid}/unhide", None),
    ]


async def _all_404(member: Member, cid: int, email: str) -> None:
    for method, path, body in _paths(cid):
        if body and "members_emails" in body:
            body = {"members_emails": email}
        resp = await member.api.request(method, path, json=body)
        assert resp.status == 404, (method, path, resp.status)
        assert resp.json["code"] == "not_found"


async def test_non_members_get_404_for_everything(world: World) -> None:
    admin = await world.community()
    ann, bob, eve = [await world.user(admin, n) for n in ("Ann", "Bob", "Eve")]
    pair = await start(ann, bob)
    await _all_404(eve, pair["id"], eve.email)
    # the community admin is no member either
    await _all_404(admin, pair["id"], admin.email)
    await _all_404(eve, 999_999, eve.email)
    # nothing changed
    conv = (await ann.api.get(f"/api/conversations/{pair['id']}")).json["conversation"]
    assert conv["name"] is None and len(conv["members"]) == 2
    acts = (await ann.api.get(f"/api/conversations/{pair['id']}/activities")).json
    assert len(acts["activities"]) == 1


async def test_another_communitys_conversation_is_404(world: World) -> None:
    acme = await world.community("Acme")
    ann, bob = [await world.user(acme, n) for n in ("Ann", "Bob")]
    pair = await start(ann, bob)
    other = await world.community("Other")
    stranger = await world.user(other, "Stranger")
    await _all_404(stranger, pair["id"], stranger.email)
    await _all_404(other, pair["id"], other.email)
    assert (await stranger.api.get("/api/conversations")).json == {"conversations": []}
    # the same path on the right host works
    assert (await ann.api.get(f"/api/conversations/{pair['id']}")).status == 200


async def test_conversation_list_queries_do_not_grow(world: World, query_log: Any) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    others = [await world.user(admin, f"U{i}") for i in range(6)]
    for i, other in enumerate(others):
        await start(ann, other, text=f"hi {i}")
        await start(ann, other, others[(i + 1) % len(others)], text=f"all {i}")
    counts = []
    for per_page in ("1", "500"):
        query_log.reset()
        resp = await ann.api.get("/api/conversations", params={"per_page": per_page})
        assert resp.status == 200
        assert len(resp.json["conversations"]) == (1 if per_page == "1" else 12)
        counts.append(len(query_log))
    assert counts[0] == counts[1], counts


async def test_events_of_a_new_conversation_and_members(world: World) -> None:
    admin = await world.community()
    ann, bob, cy, dan = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy", "Dan")]
    conv = await start(ann, bob, cy, text="hello")
    cid = conv["id"]
    channel = f"conversation:{cid}"
    events = await events_of(world, admin.community.id)
    assert [(c, n) for c, n, _ in events] == [
        (f"user:{ann.id}", "_subscriptions"),
        (f"user:{bob.id}", "_subscriptions"),
        (f"user:{cy.id}", "_subscriptions"),
        (channel, "conversation.updated"),
        (channel, "remark.created"),
    ]
    assert events[0][2] == {"subscribe": [channel], "unsubscribe": []}
    updated = events[3][2]
    assert list(updated) == ["id", "name", "private", "members"]
    assert updated["id"] == cid and updated["private"] is False
    assert [m["id"] for m in updated["members"]] == [ann.id, bob.id, cy.id]
    assert events[4][2] == conv["latest_activity"]

    add = await ann.api.post(f"/api/conversations/{cid}/members",
                             json={"members_emails": dan.email})
    assert add.status == 201
    await ann.api.put(f"/api/conversations/{cid}", json={"conversation": {"name": "N"}})
    assert (await bob.api.delete(f"/api/conversations/{cid}/members/me")).status == 204
    later = (await events_of(world, admin.community.id))[5:]
    assert [(c, n) for c, n, _ in later] == [
        (f"user:{dan.id}", "_subscriptions"),
        (channel, "conversation.member_added"),
        (channel, "conversation.updated"),
        (channel, "conversation.member_removed"),
        (f"user:{bob.id}", "_subscriptions"),
    ]
    assert later[0][2] == {"subscribe": [channel], "unsubscribe": []}
    assert later[1][2]["conversation_id"] == cid
    assert [u["id"] for u in later[1][2]["users"]] == [dan.id]
    assert later[2][2]["name"] == "N"
    assert [u["id"] for u in later[3][2]["users"]] == [bob.id]
    assert later[4][2] == {"subscribe": [], "unsubscribe": [channel]}
    # reads, acknowledgements and hiding append nothing
    await ann.api.get(f"/api/conversations/{cid}")
    await cy.api.post(f"/api/conversations/{cid}/acknowledge")
    assert len(await events_of(world, admin.community.id)) == 10
    # nothing in another community's log
    other = await world.community("Other")
    assert await events_of(world, other.community.id) == []


async def test_reused_conversation_appends_only_the_remark_event(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    await start(ann, bob, text=None)
    before = len(await events_of(world, admin.community.id))
    conv = await start(bob, ann, text="again")
    events = await events_of(world, admin.community.id)
    assert [(c, n) for c, n, _ in events[before:]] == [
        (f"conversation:{conv['id']}", "remark.created")]


async def test_concurrent_creations_make_one_conversation(world: World) -> None:
    admin = await world.community()
    ann, bob, cy = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy")]
    body = {"conversation": {"members_emails": f"{bob.email} {cy.email}"},
            "remark": {"text": "hi"}}
    results = await asyncio.gather(*(ann.api.post("/api/conversations", json=body)
                                     for _ in range(4)))
    assert {r.status for r in results} == {201}
    assert len({r.json["conversation"]["id"] for r in results}) == 1
    listed = await bob.api.get("/api/conversations")
    (conv,) = listed.json["conversations"]
    assert conv["unread_count"] == 4


async def test_a_large_member_set_is_still_reused(world: World) -> None:
    admin = await world.community()
    # long ids, as a large deployment has: 499 of them no longer fit an index entry as text
    await world.pool.execute("ALTER SEQUENCE users_id_seq RESTART WITH 1000000000")
    crowd = await world.many_users(admin, 499)
    emails = " ".join(m.email for m in crowd)
    first = await admin.api.post("/api/conversations", json={
        "conversation": {"members_emails": emails}, "remark": {"text": "all hands"}})
    assert first.status == 201, first.text
    again = await admin.api.post("/api/conversations", json={
        "conversation": {"members_emails": emails}, "remark": {"text": "again"}})
    assert again.status == 201
    assert again.json["conversation"]["id"] == first.json["conversation"]["id"]
    assert again.json["conversation"]["private"] is False
