"""Notifications: made by mentions, comments, announcements and follows through the API (never
for the actor), listed with counts, filters and paging, marked read, with their realtime events
and push jobs."""

from __future__ import annotations

from typing import Any

import orjson

from app.actions import notifications
from app.actions.work import work
from app.context import Viewer
from tests.app.views.conversations_support import say, start
from tests.support import Member, World

NOTIFICATION_KEYS = ["id", "read", "notifiable_id", "notifiable_type", "notifiable_text",
                     "notifiable_url", "filter", "verb", "sent_by_user", "created_at"]


async def post(member: Member, body: str, **fields: Any) -> dict[str, Any]:
    resp = await member.api.post("/api/messages", json={"message": {"body": body, **fields}})
    assert resp.status == 201, resp.text
    message: dict[str, Any] = resp.json["message"]
    return message


async def comment(member: Member, message_id: int, text: str) -> dict[str, Any]:
    resp = await member.api.post(f"/api/messages/{message_id}/comments",
                                 json={"comment": {"text": text}})
    assert resp.status == 201, resp.text
    created: dict[str, Any] = resp.json["comment"]
    return created


async def notifications_of(member: Member, path: str = "/api/notifications",
                           **params: Any) -> dict[str, Any]:
    resp = await member.api.get(path, params=params)
    assert resp.status == 200, resp.text
    body: dict[str, Any] = resp.json
    return body


async def kinds_of(member: Member) -> list[tuple[str, str, int]]:
    """(filter, notifiable_type, notifiable_id) of the member's notifications, newest first."""
    body = await notifications_of(member, per_page=500)
    return [(n["filter"], n["notifiable_type"], n["notifiable_id"])
            for n in body["notifications"]]


async def events_on(world: World, member: Member) -> list[tuple[str, Any]]:
    rows = await world.pool.fetch(
        "SELECT name, data::text AS data FROM realtime_events "
        "WHERE community_id = $1 AND channel = $2 ORDER BY id",
        member.community.id, f"user:{member.id}",
    )
    return [(r["name"], orjson.loads(r["data"])) for r in rows if not r["name"].startswith("_")]


async def register(member: Member, token: str, notification_type: str = "main",
                   **switches: Any) -> None:
    resp = await member.api.put("/api/client_devices", json={
        "registration_id": token, "notification_type": notification_type,
        "client_device": switches,
    })
    assert resp.status == 204, resp.text


async def jobs(world: World) -> list[dict[str, Any]]:
    rows = await world.pool.fetch(
        "SELECT j.user_id, j.kind, j.payload::text AS payload, d.registration_id "
        "FROM push_jobs j JOIN client_devices d ON d.id = j.device_id ORDER BY j.id"
    )
    return [{"user_id": r["user_id"], "kind": r["kind"], "token": r["registration_id"],
             "payload": orjson.loads(r["payload"])} for r in rows]


# --- made by the feed ----------------------------------------------------------------------


async def test_a_mention_notifies_the_mentioned_user(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann", "Lee")
    bob = await world.user(admin, "Bob", "Ray")
    message = await post(ann, f"Lunch with @{bob.username}? and @{ann.username}")
    body = await notifications_of(bob)
    assert list(body) == ["notifications_count", "unread_notifications_count", "notifications"]
    assert body["notifications_count"] == 1 and body["unread_notifications_count"] == 1
    [note] = body["notifications"]
    assert list(note) == NOTIFICATION_KEYS
    assert note["read"] is False
    assert (note["filter"], note["verb"]) == ("at_mentions", "mentioned")
    assert (note["notifiable_type"], note["notifiable_id"]) == ("Message", message["id"])
    assert note["notifiable_text"] == f"Lunch with @{bob.username}? and @{ann.username}"
    assert note["notifiable_url"] == f"{admin.community.base_url}/messages/{message['id']}"
    assert note["sent_by_user"] == message["user"]  # the embedded user, as the message shows it
    assert note["created_at"].endswith("+00:00")
    # the actor is never notified, not even by mentioning themselves
    assert (await notifications_of(ann))["notifications_count"] == 0
    assert (await notifications_of(admin))["notifications_count"] == 0


async def test_no_notification_for_a_message_the_user_may_not_read(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    bob = await world.user(admin, "Bob")
    cy = await world.user(admin, "Cy")
    group = await world.group(ann, "Secret", members=(cy,), permission_mode="private")
    await post(ann, f"@{bob.username} and @{cy.username}", group_id=group["id"])
    assert await kinds_of(bob) == []  # not a member: the mention tells him nothing
    # newest first: the mention, then being added to the group
    assert [k[0] for k in await kinds_of(cy)] == ["at_mentions", "groups"]


async def test_an_edit_notifies_only_the_newly_mentioned(world: World) -> None:
    admin = await world.community()
    ann, bob, cy = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy")]
    message = await post(ann, f"hi @{bob.username}")
    resp = await ann.api.put(f"/api/messages/{message['id']}", json={
        "message": {"body": f"hi @{bob.username} and @{cy.username}"}})
    assert resp.status == 200, resp.text
    assert await kinds_of(bob) == [("at_mentions", "Message", message["id"])]
    assert await kinds_of(cy) == [("at_mentions", "Message", message["id"])]


async def test_comments_notify_the_author_and_earlier_commenters(world: World) -> None:
    admin = await world.community()
    ann, bob, cy, dee = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy", "Dee")]
    message = await post(ann, "Who wants cake?")
    first = await comment(bob, message["id"], "Me!")
    assert await kinds_of(ann) == [("replies", "Comment", first["id"])]
    assert await kinds_of(bob) == []  # not for his own comment
    second = await comment(cy, message["id"], f"Me too, and @{dee.username}")
    assert await kinds_of(ann) == [("replies", "Comment", second["id"]),
                                   ("replies", "Comment", first["id"])]
    assert await kinds_of(bob) == [("replies", "Comment", second["id"])]
    assert await kinds_of(cy) == []
    # mentioned in a comment: at_mentions, pointing at the comment
    [note] = (await notifications_of(dee))["notifications"]
    assert (note["filter"], note["notifiable_type"], note["notifiable_id"]) == (
        "at_mentions", "Comment", second["id"])
    assert note["notifiable_url"] == (
        f"{admin.community.base_url}/messages/{message['id']}/comments/{second['id']}")
    assert note["notifiable_text"] == f"Me too, and @{dee.username}"
    # the message's author mentioned in a comment gets at_mentions, not also replies
    third = await comment(bob, message["id"], f"@{ann.username} thanks!")
    assert (await kinds_of(ann))[0] == ("at_mentions", "Comment", third["id"])
    assert len(await kinds_of(ann)) == 3


async def test_an_announcement_notifies_everyone_who_reads_it(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    crowd = await world.many_users(admin, 30)
    outsider = await world.user(admin, "Ext", role="external_contributor")
    inactive = await world.user(admin, "Gone")
    assert (await admin.api.delete(f"/api/users/{inactive.id}")).status in (200, 204)
    other = await world.community("Other")
    message = await post(admin, f"All hands at 3, @{bob.username}",
                         message_type="broadcast_message")
    for member in (ann, *crowd):
        assert await kinds_of(member) == [("broadcast", "Message", message["id"])]
    [note] = (await notifications_of(ann))["notifications"]
    assert note["verb"] == "announced" and note["sent_by_user"]["id"] == admin.id
    assert await kinds_of(bob) == [("at_mentions", "Message", message["id"])]  # only that
    for nobody in (admin, outsider, inactive):
        assert await world.pool.fetchval(
            "SELECT count(*) FROM notifications WHERE user_id = $1", nobody.id) == 0
    assert await kinds_of(other) == []


async def test_following_notifies_once(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    for _ in range(2):
        resp = await bob.api.post(f"/api/users/{ann.id}/followers")
        assert resp.status == 201, resp.text
    [note] = (await notifications_of(ann))["notifications"]
    assert (note["filter"], note["verb"]) == ("followers", "followed")
    assert (note["notifiable_type"], note["notifiable_id"]) == ("User", bob.id)
    assert note["notifiable_text"] is None
    assert note["notifiable_url"] == (
        f"{admin.community.base_url}/users/{bob.id}-{bob.username.lower()}")
    assert note["sent_by_user"]["id"] == bob.id
    assert (await notifications_of(bob))["notifications_count"] == 0


async def test_deleting_a_message_deletes_its_notifications(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    message = await post(ann, f"oops @{bob.username}")
    await comment(bob, message["id"], "what?")
    assert len(await kinds_of(bob)) == 1 and len(await kinds_of(ann)) == 1
    assert (await ann.api.delete(f"/api/messages/{message['id']}")).status == 204
    assert await kinds_of(bob) == [] and await kinds_of(ann) == []


# --- the list --------------------------------------------------------------------------------


async def _three_kinds(world: World) -> tuple[Member, Member, Member]:
    """Ann gets: at_mentions (1), followers (1), replies (1); newest last listed here."""
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    await post(bob, f"hey @{ann.username}")
    assert (await bob.api.post(f"/api/users/{ann.id}/followers")).status == 201
    mine = await post(ann, "my news")
    await comment(bob, mine["id"], "nice")
    return admin, ann, bob


async def test_filters(world: World) -> None:
    _, ann, _ = await _three_kinds(world)
    body = await notifications_of(ann)
    assert [n["filter"] for n in body["notifications"]] == ["replies", "followers", "at_mentions"]
    assert (body["notifications_count"], body["unread_notifications_count"]) == (3, 3)
    for kind in ("replies", "followers", "at_mentions"):
        for one in (await notifications_of(ann, f"/api/notifications/{kind}"),
                    await notifications_of(ann, f"/api/notifications/{kind}.json"),
                    await notifications_of(ann, filter=kind)):
            assert [n["filter"] for n in one["notifications"]] == [kind]
            assert (one["notifications_count"], one["unread_notifications_count"]) == (1, 1)
    empty = await notifications_of(ann, "/api/notifications/town_halls")
    assert empty == {"notifications_count": 0, "unread_notifications_count": 0,
                     "notifications": []}
    assert (await ann.api.get("/api/notifications/likes")).status == 404
    bad = await ann.api.get("/api/notifications", params={"filter": "likes"})
    assert bad.status == 422 and "filter" in bad.json["fields"]


async def test_paging(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    crowd = await world.many_users(admin, 5)
    for member in crowd:
        await post(member, f"@{ann.username} hi")
    everything = [n["id"] for n in (await notifications_of(ann))["notifications"]]
    assert everything == sorted(everything, reverse=True) and len(everything) == 5
    senders = [n["sent_by_user"]["id"]
               for n in (await notifications_of(ann))["notifications"]]
    assert senders == [m.id for m in reversed(crowd)]
    page2 = await notifications_of(ann, page=2, per_page=2)
    assert [n["id"] for n in page2["notifications"]] == everything[2:4]
    assert page2["notifications_count"] == 5  # counts are of everything, not of the page
    assert (await notifications_of(ann, page=4, per_page=2))["notifications"] == []
    assert len((await notifications_of(ann, per_page=1000))["notifications"]) == 5
    for params in ({"page": 0}, {"per_page": "x"}, {"page": -1}):
        assert (await ann.api.get("/api/notifications", params=params)).status == 400


async def test_the_list_runs_a_fixed_number_of_queries(world: World, query_log: Any) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    crowd = await world.many_users(admin, 25)
    for member in crowd:
        await post(member, f"@{ann.username} hello")
    counts = []
    for per_page in (1, 500):
        query_log.reset()
        body = await notifications_of(ann, per_page=per_page)
        assert len(body["notifications"]) == min(per_page, 25)
        counts.append(len(query_log))
    assert counts[0] == counts[1], counts


async def test_notifications_are_private(world: World) -> None:
    admin, ann, bob = await _three_kinds(world)
    other = await world.community("Other")
    stranger = await world.user(other, "Stranger")
    assert (await notifications_of(bob))["notifications_count"] == 0
    assert (await notifications_of(stranger))["notifications_count"] == 0
    note = (await notifications_of(ann))["notifications"][0]
    for someone in (bob, admin, stranger, other):
        resp = await someone.api.post(f"/api/notifications/{note['id']}/read")
        assert resp.status == 404, someone
    assert (await notifications_of(ann))["unread_notifications_count"] == 3
    assert (await ann.api.get("/api/notifications")).status == 200
    assert (await ann.api.anonymous().get("/api/notifications")).status == 401


# --- reading ---------------------------------------------------------------------------------


async def test_mark_one_read(world: World) -> None:
    _, ann, _ = await _three_kinds(world)
    first, second, _ = (await notifications_of(ann))["notifications"]
    resp = await ann.api.post(f"/api/notifications/{second['id']}/read")
    assert resp.status == 204 and resp.text == ""
    body = await notifications_of(ann)
    assert [n["read"] for n in body["notifications"]] == [False, True, False]
    assert (body["notifications_count"], body["unread_notifications_count"]) == (3, 2)
    again = await ann.api.post(f"/api/notifications/{second['id']}.json/read")
    assert again.status == 404  # the suffix belongs at the end
    again = await ann.api.post(f"/api/notifications/{second['id']}/read.json")
    assert again.status == 204  # reading it twice is fine
    for bad in ("999999", "abc", "0"):
        assert (await ann.api.post(f"/api/notifications/{bad}/read")).status == 404
    reads = [data for name, data in await events_on(world, ann) if name == "notification.read"]
    assert reads == [{"ids": [second["id"]], "unread_notifications_count": 2}]  # once
    assert (await notifications_of(ann, "/api/notifications/followers"))[
        "unread_notifications_count"] == 0
    assert first["read"] is False


async def test_mark_all_read(world: World) -> None:
    _, ann, bob = await _three_kinds(world)
    await post(ann, f"@{bob.username} yo")
    ids = sorted(n["id"] for n in (await notifications_of(ann))["notifications"])
    resp = await ann.api.put("/api/notifications/mark_all_read")
    assert resp.status == 204
    body = await notifications_of(ann)
    assert body["unread_notifications_count"] == 0 and body["notifications_count"] == 3
    assert all(n["read"] for n in body["notifications"])
    assert (await notifications_of(bob))["unread_notifications_count"] == 1  # his stay unread
    assert (await ann.api.put("/api/notifications/mark_all_read.json")).status == 204
    reads = [data for name, data in await events_on(world, ann) if name == "notification.read"]
    assert reads == [{"ids": ids, "unread_notifications_count": 0}]  # nothing left the 2nd time
    assert (await ann.api.get("/api/notifications/mark_all_read")).status == 404


# --- realtime events and push jobs -----------------------------------------------------------


async def test_each_notification_is_a_realtime_event(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    await post(ann, f"@{bob.username} look")
    assert (await ann.api.post(f"/api/users/{bob.id}/followers")).status == 201
    listed = (await notifications_of(bob))["notifications"]
    created = [data for name, data in await events_on(world, bob)
               if name == "notification.created"]
    assert created == list(reversed(listed))  # the very JSON the list shows, in order
    assert [name for name, _ in await events_on(world, ann)] == []


async def test_push_jobs_follow_the_device_switches(world: World) -> None:
    admin = await world.community()
    ann, bob, cy, dee = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy", "Dee")]
    await register(bob, "bob-phone", push_mentions=False)
    await register(bob, "bob-tablet")
    await register(cy, "cy-phone", push_enabled=False)
    await register(dee, "dee-phone", push_replies=False)
    await register(dee, "dee-chat", notification_type="conversations")
    await register(ann, "ann-phone")
    message = await post(ann, f"@{bob.username} @{cy.username} @{dee.username} standup?")
    made = await jobs(world)
    assert [(j["user_id"], j["token"]) for j in made] == [(bob.id, "bob-tablet"),
                                                          (dee.id, "dee-phone")]
    note = (await notifications_of(bob))["notifications"][0]
    first = made[0]
    assert first["kind"] == "notification"
    assert first["payload"]["title"] == "Ann " + ann.row["last_name"] + " mentioned you"
    assert first["payload"]["body"] == note["notifiable_text"]
    assert first["payload"]["data"] == {
        "type": "notification", "notification_id": str(note["id"]), "filter": "at_mentions",
        "url": note["notifiable_url"]}
    assert first["payload"]["check"] == {"switch": "push_mentions",
                                         "notification_id": note["id"]}
    # replies: dee turned them off; the author's own comment pushes nobody
    await world.pool.execute("DELETE FROM push_jobs")
    await comment(dee, message["id"], "yes")
    await comment(bob, message["id"], "sure")
    assert [(j["user_id"], j["token"]) for j in await jobs(world)] == [
        (ann.id, "ann-phone"), (ann.id, "ann-phone")]
    assert [j["payload"]["check"]["switch"] for j in await jobs(world)] == ["push_replies"] * 2


async def test_remarks_push_to_the_other_members_conversation_devices(world: World) -> None:
    admin = await world.community()
    ann, bob, cy = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy")]
    await register(ann, "ann-chat", "conversations")
    await register(bob, "bob-chat", "conversations")
    await register(bob, "bob-main")  # a main device gets no remarks
    await register(cy, "cy-chat", "conversations", push_conversation_activity=False)
    conv = await start(ann, bob, cy, text=None)
    assert await jobs(world) == []  # no remark yet
    activity = await say(ann, conv["id"], "  Coffee?\n\nNow ")
    [job] = await jobs(world)
    assert (job["user_id"], job["token"], job["kind"]) == (bob.id, "bob-chat", "remark")
    assert job["payload"] == {
        "title": f"Ann {ann.row['last_name']}", "body": "Coffee? Now",
        "data": {"type": "remark", "conversation_id": str(conv["id"]),
                 "activity_id": str(activity["id"])},
        "thread": f"conversation:{conv['id']}",
        "check": {"switch": "push_conversation_activity", "conversation_id": conv["id"],
                  "activity_id": activity["id"]},
    }
    # starting a conversation with a remark pushes too
    await world.pool.execute("DELETE FROM push_jobs")
    await start(bob, ann, text="hello Ann")
    assert [(j["user_id"], j["token"]) for j in await jobs(world)] == [(ann.id, "ann-chat")]


async def test_a_failed_request_leaves_no_notification_and_no_job(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    await register(bob, "bob-phone")
    resp = await ann.api.post("/api/messages", json={
        "message": {"body": f"@{bob.username}", "message_type": "broadcast_message"}})
    assert resp.status == 403  # only community admins announce
    assert await kinds_of(bob) == [] and await jobs(world) == []


# --- the functions other actions call in their transaction (thanks, group memberships) -------


def _viewer(member: Member) -> Viewer:
    return Viewer(id=member.id, community_id=member.community.id, role=member.row["role"],
                  row=member.row)


async def test_notify_thanks_and_the_announcement_mentions(world: World) -> None:
    admin = await world.community()
    ann, bob, cy = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy")]
    await register(bob, "bob-phone")
    resp = await ann.api.post("/api/thanks", json={"thanks": {
        "body": f"Great demo, also cc @{cy.username}", "recipients": [bob.id, ann.id + 10**6]}})
    assert resp.status == 422  # (an unknown recipient: nothing made)
    resp = await ann.api.post("/api/thanks", json={"thanks": {
        "body": f"Great demo, also cc @{cy.username}", "recipients": [bob.id]}})
    assert resp.status == 201, resp.text
    thanks = resp.json["thanks"]
    message_id = thanks["announcement"]["id"]
    # one unit of work notified bob (thanks) and cy (at_mentions, by the announcement); the
    # thanked are not "mentioned" too, and ann is told nothing (each user's events are in
    # order on their own channel; the order across users is no contract)
    made = await world.pool.fetch(
        "SELECT channel, name, data FROM realtime_events WHERE name = 'notification.created' "
        "ORDER BY channel <> $1, id", f"user:{bob.id}")
    assert [(e["channel"], e["name"]) for e in made] == [
        (f"user:{bob.id}", "notification.created"), (f"user:{cy.id}", "notification.created")]
    [note] = (await notifications_of(bob))["notifications"]
    assert (note["filter"], note["verb"], note["notifiable_type"], note["notifiable_id"]) == (
        "thanks", "thanked", "Thanks", thanks["id"])
    assert note["notifiable_url"] == f"{admin.community.base_url}/thanks/{thanks['id']}"
    assert note["notifiable_text"] == thanks["body"]
    assert made[0]["data"] == note
    assert await kinds_of(cy) == [("at_mentions", "Message", message_id)]
    assert await kinds_of(ann) == []
    assert [j["payload"]["check"]["switch"] for j in await jobs(world)] == [None]


async def test_notify_group_membership(world: World) -> None:
    admin = await world.community()
    ann, bob, cy = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy")]
    group = await world.group(ann, "Cat Lovers")
    async with work(world.pool, None, admin.community.id) as w:
        w.emit(*await notifications.notify_group_membership(
            w.conn, _viewer(ann), group["id"], [bob.id, ann.id]))
        w.emit(*await notifications.notify_group_membership(
            w.conn, _viewer(ann), group["id"], [cy.id], approved=True))
        w.emit(*await notifications.notify_group_membership(
            w.conn, Viewer.system(admin.community.id), group["id"], [cy.id]))
    [added] = (await notifications_of(bob))["notifications"]
    assert (added["filter"], added["verb"], added["notifiable_type"], added["notifiable_id"]) \
        == ("groups", "added", "Group", group["id"])
    assert added["notifiable_text"] == "Cat Lovers"
    assert added["notifiable_url"] == group["url"]
    assert [(n["verb"], n["sent_by_user"] and n["sent_by_user"]["id"])
            for n in (await notifications_of(cy))["notifications"]] == [
        ("added", None), ("approved", ann.id)]
    assert await kinds_of(ann) == []
    # deleting the group deletes what was about it
    assert (await ann.api.delete(f"/api/groups/{group['id']}")).status in (200, 204)
    assert await kinds_of(bob) == [] and await kinds_of(cy) == []


async def test_being_added_to_a_group_notifies_and_joining_yourself_does_not(
    world: World,
) -> None:
    admin = await world.community()
    ann, bob, cy = [await world.user(admin, n) for n in ("Ann", "Bob", "Cy")]
    group = await world.group(ann, "Cat Lovers", members=(bob,))
    assert await kinds_of(bob) == [("groups", "Group", group["id"])]
    assert await kinds_of(ann) == []  # the creator is not told about their own group
    assert (await cy.api.post(f"/api/groups/{group['id']}/join")).status == 200
    assert await kinds_of(cy) == []
    private = await world.group(ann, "Inner", permission_mode="private",
                                allow_access_request=True)
    asked = await cy.api.post(f"/api/groups/{private['id']}/membership_requests")
    assert asked.status == 201
    request_id = asked.json["membership_request"]["id"]
    approved = await ann.api.post(
        f"/api/groups/{private['id']}/membership_requests/{request_id}/approve")
    assert approved.status == 200
    [note] = (await notifications_of(cy))["notifications"]
    assert (note["filter"], note["verb"], note["sent_by_user"]["id"]) == (
        "groups", "approved", ann.id)
