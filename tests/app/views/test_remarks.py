"""Remarks and activities: posting, the Activity shape, idempotent retries, lists, events."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from app.actions.messages import NewMessage, create_message
from app.context import Viewer
from tests.app.views.conversations_support import events_of, say, start
from tests.support import Member, World

ACTIVITY_KEYS = ["id", "verb", "title", "actor", "object", "published", "location",
                 "generator", "attachments", "target"]
OBJECT_KEYS = ["id", "objectType", "replied_to_id", "replied_to_type",
               "replied_to_message_id", "replied_to", "client_provided_guid", "content",
               "html_body", "shared_message"]


async def test_post_a_remark(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann", "Lee")
    bob = await world.user(admin, "Bob", "Ray")
    conv = await start(ann, bob, text=None)
    resp = await bob.api.post(f"/api/conversations/{conv['id']}/remarks.json", data={
        "remark[text]": "See **you** at #lunch",
        "remark[location][longitude]": "2.35",
        "remark[location][latitude]": "48.85",
        "remark[client_provided_guid]": "guid-1",
    })
    assert resp.status == 201, resp.text
    act = resp.json["activity"]
    assert list(act) == ACTIVITY_KEYS
    assert act["verb"] == "post"
    assert act["title"] == "Bob Ray posted a remark"
    assert act["actor"] == {
        "id": bob.id, "displayName": "Bob Ray", "firstName": "Bob",
        "image": {"height": 70, "width": 70,
                  "url": f"{admin.community.base_url}/assets/avatars/default_user_square70.png",
                  "is_system_default": True},
        "inactive": False, "terminated": False,
    }
    assert list(act["object"]) == OBJECT_KEYS
    assert act["object"]["id"] == act["id"]
    assert act["object"]["objectType"] == "note"
    assert act["object"]["content"] == "See **you** at #lunch"
    assert act["object"]["html_body"].startswith('<div class="markdown-body"><p>See <strong>')
    assert act["object"]["client_provided_guid"] == "guid-1"
    assert act["object"]["shared_message"] is None
    assert act["location"] == {"longitude": 2.35, "latitude": 48.85}
    assert act["generator"] == {"name": "API", "url": f"{admin.community.base_url}/api"}
    assert act["attachments"] == []
    assert act["target"] == {"id": conv["id"], "objectType": "conversation"}
    assert act["published"].endswith("+00:00")
    # read back
    one = await ann.api.get(f"/api/conversations/{conv['id']}/activities/{act['id']}")
    assert one.status == 200 and one.json["activity"] == act
    latest = (await ann.api.get(f"/api/conversations/{conv['id']}")).json["conversation"]
    assert latest["latest_activity"] == act


async def test_a_remark_needs_text_or_attachments(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    conv = await start(ann, bob, text=None)
    path = f"/api/conversations/{conv['id']}/remarks"
    for body in ({"remark": {"text": "   "}},
                 {"remark": {"location": {"longitude": 1, "latitude": 2}}}):
        resp = await ann.api.post(path, json=body)
        assert resp.status == 422, body
        assert resp.json["fields"] == {"remark[text]": ["can't be blank"]}
    nothing = await ann.api.post(path, json={})
    assert nothing.status == 422
    assert nothing.json["fields"] == {"remark": ["names no known field"]}
    half = await ann.api.post(path, json={"remark": {"text": "x", "location": {"longitude": 1}}})
    assert half.status == 422
    far = await ann.api.post(path, json={"remark": {"text": "x",
                                                    "location": {"longitude": 500,
                                                                 "latitude": 1}}})
    assert far.status == 422
    acts = await ann.api.get(f"/api/conversations/{conv['id']}/activities")
    assert acts.json["activities"] == []


async def test_client_provided_guid_makes_a_retry_idempotent(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    conv = await start(ann, bob, text=None)
    path = f"/api/conversations/{conv['id']}/remarks"
    body = {"remark": {"text": "once", "client_provided_guid": "abc-123"}}
    first = await ann.api.post(path, json=body)
    events_before = len(await events_of(world, admin.community.id))
    retry = await ann.api.post(path, json={"remark": {"text": "changed",
                                                      "client_provided_guid": "abc-123"}})
    assert first.status == retry.status == 201
    assert retry.json["activity"] == first.json["activity"]
    assert len(await events_of(world, admin.community.id)) == events_before
    # the same guid from someone else, or in another conversation, is another remark
    other = await bob.api.post(path, json=body)
    assert other.json["activity"]["id"] != first.json["activity"]["id"]
    acts = await ann.api.get(f"/api/conversations/{conv['id']}/activities")
    assert [a["object"]["content"] for a in acts.json["activities"]] == ["once", "once"]
    bob_view = await bob.api.get(f"/api/conversations/{conv['id']}")
    assert bob_view.json["conversation"]["unread_count"] == 0
    ann_view = await ann.api.get(f"/api/conversations/{conv['id']}")
    assert ann_view.json["conversation"]["unread_count"] == 1
    cy = await world.user(admin, "Cy")
    elsewhere = await start(ann, cy, text=None)
    moved = await ann.api.post(f"/api/conversations/{elsewhere['id']}/remarks", json=body)
    assert moved.json["activity"]["id"] != first.json["activity"]["id"]


async def test_activities_newest_first_and_paged(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    conv = await start(ann, bob, text="1")
    for text in ("2", "3", "4"):
        await say(bob, conv["id"], text)
    path = f"/api/conversations/{conv['id']}/activities"
    resp = await ann.api.get(path)
    assert resp.status == 200
    assert [a["object"]["content"] for a in resp.json["activities"]] == ["4", "3", "2", "1"]
    page2 = await ann.api.get(path, params={"page": "2", "per_page": "3"})
    assert [a["object"]["content"] for a in page2.json["activities"]] == ["1"]
    assert (await ann.api.get(path, params={"page": "3", "per_page": "3"})).json == {
        "activities": []}


async def test_activity_of_another_conversation_is_404(world: World) -> None:
    admin = await world.community()
    ann, bob, cy = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy")]
    mine = await start(ann, bob)
    theirs = await start(bob, cy)
    act_id = theirs["latest_activity"]["id"]
    resp = await ann.api.get(f"/api/conversations/{mine['id']}/activities/{act_id}")
    assert resp.status == 404
    assert (await ann.api.get(
        f"/api/conversations/{theirs['id']}/activities/{act_id}")).status == 404
    assert (await ann.api.get(
        f"/api/conversations/{mine['id']}/activities/nonsense")).status == 404


async def test_activity_list_queries_do_not_grow(world: World, query_log: Any) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    conv = await start(ann, bob, text="0")
    for i in range(10):
        await say(ann if i % 2 else bob, conv["id"], f"r{i}")
    counts = []
    for per_page in ("1", "500"):
        query_log.reset()
        resp = await ann.api.get(f"/api/conversations/{conv['id']}/activities",
                                 params={"per_page": per_page})
        assert len(resp.json["activities"]) == (1 if per_page == "1" else 11)
        counts.append(len(query_log))
    assert counts[0] == counts[1], counts


async def test_remark_event_is_the_activity(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    conv = await start(ann, bob, text=None)
    before = len(await events_of(world, admin.community.id))
    act = await say(bob, conv["id"], "ping")
    events = (await events_of(world, admin.community.id))[before:]
    assert events == [(f"conversation:{conv['id']}", "remark.created", act)]
    # a refused remark appends nothing
    await bob.api.post(f"/api/conversations/{conv['id']}/remarks", json={"remark": {}})
    assert len(await events_of(world, admin.community.id)) == before + 1


async def test_deactivated_actor_is_marked_inactive(world: World) -> None:
    admin = await world.community()
    ann, bob, cy = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy")]
    conv = await start(ann, bob, cy, text="bye")
    assert (await admin.api.delete(f"/api/users/{ann.id}")).status == 200
    acts = await bob.api.get(f"/api/conversations/{conv['id']}/activities")
    assert acts.json["activities"][0]["actor"]["inactive"] is True
    assert acts.json["activities"][0]["actor"]["terminated"] is False
    members = await bob.api.get(f"/api/conversations/{conv['id']}/members")
    assert [u["inactive"] for u in members.json["users"]] == [True, False, False]


async def _upload(member: Member, name: str, data: bytes, content_type: str) -> int:
    form = aiohttp.FormData()
    form.add_field("attachment", data, filename=name, content_type=content_type)
    resp = await member.api.post("/api/attachments", data=form)
    assert resp.status == 201, resp.text
    attachment_id: int = resp.json["attachment"]["id"]
    return attachment_id


async def test_remark_with_attachments(world: World) -> None:
    admin = await world.community()
    ann, bob, eve = [await world.user(admin, n) for n in ("Ann", "Bob", "Eve")]
    conv = await start(ann, bob, text=None)
    path = f"/api/conversations/{conv['id']}/remarks"
    doc = await _upload(ann, "notes.txt", b"hello", "text/plain")
    # attachments alone make a valid remark
    resp = await ann.api.post(path, json={"remark": {"attachment_ids": [doc]}})
    assert resp.status == 201, resp.text
    act = resp.json["activity"]
    assert act["object"]["content"] == "" and act["object"]["html_body"] == ""
    (att,) = act["attachments"]
    assert att["objectType"] == "file"
    assert att["id"] == doc and att["filename"] == f"{doc}-notes.txt"
    # files sent with the remark (multipart) are stored and attached, images as images
    form = aiohttp.FormData()
    form.add_field("remark[text]", "look")
    form.add_field("remark[attachments][]", PNG, filename="dot.png", content_type="image/png")
    form.add_field("remark[attachments][]", b"%PDF-1.4", filename="a b.pdf",
                   content_type="application/pdf")
    uploaded = await bob.api.post(path, data=form)
    assert uploaded.status == 201, uploaded.text
    kinds = [(a["objectType"], a["file_extension"]) for a in
             uploaded.json["activity"]["attachments"]]
    assert kinds == [("image", "png"), ("file", "pdf")]
    # members read them, others don't
    image_id = uploaded.json["activity"]["attachments"][0]["id"]
    assert (await ann.api.get(f"/api/attachments/{image_id}",
                              allow_redirects=False)).status == 302
    assert (await eve.api.get(f"/api/attachments/{image_id}",
                              allow_redirects=False)).status == 404
    # someone else's or an already attached upload is refused and nothing is posted
    again = await bob.api.post(path, json={"remark": {"text": "x", "attachment_ids": [doc]}})
    assert again.status == 422
    acts = await ann.api.get(f"/api/conversations/{conv['id']}/activities")
    assert len(acts.json["activities"]) == 2
    assert acts.json["activities"][1]["attachments"] == act["attachments"]


async def test_attachment_list_queries_do_not_grow(world: World, query_log: Any) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    conv = await start(ann, bob, text=None)
    for i in range(6):
        doc = await _upload(ann, f"f{i}.txt", b"x", "text/plain")
        await ann.api.post(f"/api/conversations/{conv['id']}/remarks",
                           json={"remark": {"text": str(i), "attachment_ids": [doc]}})
    counts = []
    for per_page in ("1", "500"):
        query_log.reset()
        resp = await bob.api.get(f"/api/conversations/{conv['id']}/activities",
                                 params={"per_page": per_page})
        assert all(len(a["attachments"]) == 1 for a in resp.json["activities"])
        counts.append(len(query_log))
    assert counts[0] == counts[1], counts


async def test_sharing_a_message(world: World) -> None:
    admin = await world.community()
    ann, bob, cy = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy")]
    public = await create_message(world.pool, _viewer(cy), admin.community.base_url,
                                  NewMessage(body="Worth a look"))
    resp = await bob.api.post("/api/groups", json={"group": {
        "name": "Secret", "permission_mode": "private"}})
    secret_group = resp.json["group"]["id"]
    secret = await create_message(world.pool, _viewer(bob), admin.community.base_url,
                                  NewMessage(body="inside", group_id=secret_group))
    conv = await start(ann, bob, text=None)
    path = f"/api/conversations/{conv['id']}/remarks"
    shared = await ann.api.post(path, json={"remark": {"text": "see",
                                                       "shared_message_id": public}})
    assert shared.status == 201, shared.text
    message = shared.json["activity"]["object"]["shared_message"]
    assert message["id"] == public and message["body"] == "Worth a look"
    assert message["shareable"] is True
    assert not {"comments", "likes", "shared_message"} & set(message)
    listed = await bob.api.get(f"/api/conversations/{conv['id']}/activities")
    assert listed.json["activities"][0]["object"]["shared_message"]["id"] == public
    # a message in a private group is not shareable, even by its author; an unknown one is
    # refused alike
    for message_id in (secret, 999_999):
        refused = await bob.api.post(path, json={"remark": {"text": "x",
                                                            "shared_message_id": message_id}})
        assert refused.status == 422
        assert "remark[shared_message_id]" in refused.json["fields"]
    assert len((await ann.api.get(f"/api/conversations/{conv['id']}/activities")
                ).json["activities"]) == 1


async def test_a_remark_is_rendered_before_the_conversation_is_locked(
    world: World, query_log: Any
) -> None:
    """Under the conversation's row lock only the writes run: the mention lookup and the
    shared message's rendering come before it, and the answer (the event's data) is the very
    JSON every later read shows, attachments in id order included."""
    admin = await world.community()
    ann, bob, cy = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy")]
    public = await create_message(world.pool, _viewer(cy), admin.community.base_url,
                                  NewMessage(body="Worth a look"))
    conv = await start(ann, bob, text=None)
    second = await _upload(ann, "b.txt", b"b", "text/plain")
    first = await _upload(ann, "a.txt", b"a", "text/plain")
    query_log.reset()
    resp = await ann.api.post(f"/api/conversations/{conv['id']}/remarks", json={"remark": {
        "text": f"see this @{bob.username}", "shared_message_id": public,
        "attachment_ids": [first, second]}})
    assert resp.status == 201, resp.text
    act = resp.json["activity"]
    assert act["object"]["shared_message"]["id"] == public
    assert f'data-user-id="{bob.id}"' in act["object"]["html_body"]
    assert [a["id"] for a in act["attachments"]] == sorted([first, second])
    locked = [i for i, q in enumerate(query_log) if "FOR UPDATE OF c" in q]
    assert len(locked) == 1
    under_lock = query_log[locked[0] + 1:]
    assert not [q for q in under_lock if "FROM messages" in q or "lower(u.username)" in q]
    assert len(under_lock) <= 9, under_lock  # insert, claim, 3 counters, push (2), append, COMMIT
    listed = await bob.api.get(f"/api/conversations/{conv['id']}/activities/{act['id']}")
    assert listed.status == 200 and listed.json["activity"] == act


async def test_mentions_in_a_remark_are_links(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    conv = await start(ann, bob, text=None)
    act = await say(ann, conv["id"], f"hi @{bob.username} and @nobody")
    html = act["object"]["html_body"]
    assert f'data-user-id="{bob.id}"' in html
    assert "@nobody" in html and html.count("<a ") == 1


def _viewer(member: Member) -> Viewer:
    return Viewer(id=member.id, community_id=member.community.id, role="member")


PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201e2a3f3"
    "6b0000000049454e44ae426082"
)


async def test_concurrent_retries_post_once(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    conv = await start(ann, bob, text=None)
    path = f"/api/conversations/{conv['id']}/remarks"
    body = {"remark": {"text": "flaky network", "client_provided_guid": "g-42"}}
    results = await asyncio.gather(*(ann.api.post(path, json=body) for _ in range(5)))
    assert {r.status for r in results} == {201}
    assert len({r.json["activity"]["id"] for r in results}) == 1
    acts = await bob.api.get(f"/api/conversations/{conv['id']}/activities")
    assert len(acts.json["activities"]) == 1
    assert (await bob.api.get(f"/api/conversations/{conv['id']}")).json[
        "conversation"]["unread_count"] == 1


async def test_a_remark_unhides_for_the_others_and_is_read_by_its_author(world: World) -> None:
    admin = await world.community()
    ann, bob = await world.user(admin, "Ann"), await world.user(admin, "Bob")
    pair = await start(ann, bob)
    assert (await ann.api.put(f"/api/conversations/{pair['id']}/hide")).status == 200
    assert (await bob.api.put(f"/api/conversations/{pair['id']}/hide")).status == 200
    posted = await say(bob, pair["id"], "still there?")
    listed = (await ann.api.get("/api/conversations")).json["conversations"]
    assert [(c["id"], c["unread_count"]) for c in listed] == [(pair["id"], 1)]
    # the author's own remark is read and unhides the conversation for them too
    mine = (await bob.api.get(f"/api/conversations/{pair['id']}")).json["conversation"]
    assert mine["unread_count"] == 0
    assert [c["id"] for c in (await bob.api.get("/api/conversations")).json["conversations"]] \
        == [pair["id"]]
    latest = await world.pool.fetchval(
        "SELECT latest_activity_id FROM conversations WHERE id = $1", pair["id"])
    assert latest == posted["id"]


async def test_a_former_member_remarks_nothing(world: World) -> None:
    admin = await world.community()
    ann, bob, cy = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy")]
    group = await start(ann, bob, cy)
    await say(cy, group["id"], "bye")
    assert (await cy.api.delete(f"/api/conversations/{group['id']}/members/me")).status == 204
    count = "SELECT count(*) FROM conversation_activities WHERE conversation_id = $1"
    before = await world.pool.fetchval(count, group["id"])
    for remark in ({"text": f"hi @{ann.username}"},
                   {"text": "again", "client_provided_guid": "g-1"}):
        resp = await cy.api.post(f"/api/conversations/{group['id']}/remarks",
                                 json={"remark": remark})
        assert resp.status == 404, resp.text
    assert await world.pool.fetchval(count, group["id"]) == before
