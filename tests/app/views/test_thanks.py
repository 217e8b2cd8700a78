"""Thanks (POST/GET /api/thanks, GET /api/users/:id/thanks) and the messages of badges."""

from __future__ import annotations

from typing import Any

from tests.conftest import QueryLog
from tests.support import Member, World

THANKS_KEYS = ["id", "body", "badge", "user", "recipient", "recipients", "announcement"]
EXTENSION_KEYS = ["extension_type", "recipient", "recipients", "badge", "in_reference_to"]


async def badge_ids(member: Member) -> list[int]:
    return [b["id"] for b in (await member.api.get("/api/badges")).json["badges"]]


async def thank(sender: Member, recipients: list[Member], body: str = "Thanks!",
                badge_id: int | None = None, status: int = 201) -> Any:
    payload: dict[str, Any] = {"body": body, "recipients": [r.id for r in recipients]}
    if badge_id is not None:
        payload["badge_id"] = badge_id
    resp = await sender.api.post("/api/thanks", json={"thanks": payload})
    assert resp.status == status, resp.text
    return resp.json


async def test_send_thanks(world: World) -> None:
    admin = await world.community()
    alice = await world.user(admin, "Alice", "Sender")
    bob = await world.user(admin, "Bob", "Builder")
    carol = await world.user(admin, "Carol", "Coder")
    reader = await world.user(admin, "Rita", "Reader")
    badge = (await badge_ids(admin))[2]

    body = await thank(alice, [bob, carol], "Shipped it #launch", badge)
    assert list(body) == ["thanks"]
    thanks = body["thanks"]
    assert list(thanks) == THANKS_KEYS
    assert thanks["body"] == "Shipped it #launch"
    assert thanks["badge"]["id"] == badge and thanks["badge"]["name"] == "Above and Beyond"
    assert list(thanks["badge"]["images"]) == ["square30", "square45", "square70", "square140"]
    assert thanks["user"]["id"] == alice.id and thanks["user"]["type"] == "User"
    assert "contact_info" not in thanks["user"]  # embedded users
    assert [r["id"] for r in thanks["recipients"]] == [bob.id, carol.id]
    assert thanks["recipient"] == thanks["recipients"][0]

    announcement = thanks["announcement"]
    assert announcement["message_type"] == "thanks"
    assert announcement["user"]["id"] == alice.id
    assert announcement["body"] == "Shipped it #launch"
    assert announcement["action"] == "thanked Bob Builder and Carol Coder"
    assert announcement["group"] == {}
    assert [r["id"] for r in announcement["recipients"]] == [bob.id, carol.id]
    [extension] = announcement["extensions"]
    assert list(extension) == EXTENSION_KEYS
    assert extension["extension_type"] == "thanks_announcement"
    assert extension["recipient"] == thanks["recipient"]
    assert extension["recipients"] == thanks["recipients"]
    assert extension["badge"] == thanks["badge"]
    assert extension["in_reference_to"] is None

    # read back: the thanks, and the announcement as a message anyone in the company reads
    shown = await reader.api.get(f"/api/thanks/{thanks['id']}")
    assert shown.status == 200 and shown.json["thanks"]["id"] == thanks["id"]
    assert shown.json["thanks"]["recipients"] == thanks["recipients"]
    message = await reader.api.get(f"/api/messages/{announcement['id']}")
    assert message.status == 200 and message.json["message"]["message_type"] == "thanks"
    listed = (await reader.api.get("/api/thanks")).json["thanks"]
    assert [t["id"] for t in listed] == [thanks["id"]]


async def test_form_encoding_and_deprecated_recipient(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    resp = await admin.api.post("/api/thanks", data=[
        ("thanks[body]", "Cheers"), ("thanks[recipient]", str(bob.id)),
        ("thanks[recipients][]", str(carol.id)), ("thanks[recipients][]", str(bob.id)),
    ])
    assert resp.status == 201, resp.text
    thanks = resp.json["thanks"]
    assert [r["id"] for r in thanks["recipients"]] == [bob.id, carol.id]
    assert thanks["recipient"]["id"] == bob.id

    only_deprecated = await admin.api.post(
        "/api/thanks.json", json={"thanks": {"body": "Ta", "recipient": str(carol.id)}}
    )
    assert only_deprecated.status == 201
    assert [r["id"] for r in only_deprecated.json["thanks"]["recipients"]] == [carol.id]


async def test_thanks_without_badge(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    thanks = (await thank(admin, [bob]))["thanks"]
    assert thanks["badge"] is None
    assert thanks["announcement"]["extensions"][0]["badge"] is None


async def test_bad_input_creates_nothing(world: World) -> None:
    admin = await world.community()
    alice = await world.user(admin, "Alice")
    bob = await world.user(admin, "Bob")
    gone = await world.user(admin, "Gus")
    await admin.api.delete(f"/api/users/{gone.id}")
    other = await world.community("Other")
    stranger = await world.user(other, "Sid")
    their_badge = (await badge_ids(other))[0]

    cases: list[tuple[dict[str, Any], str]] = [
        ({"body": "Me!", "recipients": [alice.id]}, "thanks[recipients]"),
        ({"body": "Us!", "recipients": [bob.id, alice.id]}, "thanks[recipients]"),
        ({"body": "Who?", "recipients": [999999]}, "thanks[recipients]"),
        ({"body": "Hi", "recipients": [stranger.id]}, "thanks[recipients]"),
        ({"body": "Hi", "recipients": [gone.id]}, "thanks[recipients]"),
        ({"body": "Hi", "recipients": []}, "thanks[recipients]"),
        ({"body": "Hi"}, "thanks[recipients]"),
        ({"body": "Hi", "recipients": ["bob"]}, "thanks[recipients]"),
        ({"body": "  ", "recipients": [bob.id]}, "thanks[body]"),
        ({"recipients": [bob.id]}, "thanks[body]"),
        ({"body": "x" * 5001, "recipients": [bob.id]}, "thanks[body]"),
        ({"body": "Hi", "recipients": [bob.id], "badge_id": their_badge}, "thanks[badge_id]"),
        ({"body": "Hi", "recipients": [bob.id], "badge_id": 999999}, "thanks[badge_id]"),
    ]
    for payload, field in cases:
        resp = await alice.api.post("/api/thanks", json={"thanks": payload})
        assert resp.status == 422, (payload, resp.text)
        assert any(f.startswith(field) for f in resp.json["fields"]), (payload, resp.json)
    assert (await alice.api.get("/api/thanks")).json["thanks"] == []
    async with world.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM messages") == 0
    assert (await stranger.api.get("/api/thanks")).json["thanks"] == []


async def test_content_filters_apply(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    await admin.api.post("/api/content_filters", json={"word": "darn"})
    resp = await admin.api.post(
        "/api/thanks", json={"thanks": {"body": "Darn good job", "recipients": [bob.id]}}
    )
    assert resp.status == 422 and "thanks[body]" in resp.json["fields"]
    assert (await admin.api.get("/api/thanks")).json["thanks"] == []


async def test_external_contributors_cannot_thank(world: World) -> None:
    admin = await world.community()
    external = await world.user(admin, "Ed", role="external_contributor")
    bob = await world.user(admin, "Bob")
    resp = await external.api.post(
        "/api/thanks", json={"thanks": {"body": "Thanks", "recipients": [bob.id]}}
    )
    assert resp.status == 403
    assert (await admin.api.get("/api/thanks")).json["thanks"] == []


async def test_list_thanks_filters_and_paging(world: World) -> None:
    admin = await world.community()
    alice = await world.user(admin, "Alice")
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    first = (await thank(alice, [bob], "one"))["thanks"]
    second = (await thank(bob, [carol], "two"))["thanks"]
    third = (await thank(carol, [bob, alice], "three"))["thanks"]
    async with world.pool.acquire() as conn:
        await conn.execute("UPDATE thanks SET created_at = to_timestamp(1000000000) "
                           "WHERE id = $1", first["id"])

    async def ids(path: str, **params: str) -> list[int]:
        resp = await alice.api.get(path, params=params)
        assert resp.status == 200, resp.text
        return [t["id"] for t in resp.json["thanks"]]

    assert await ids("/api/thanks") == [third["id"], second["id"], first["id"]]
    assert await ids("/api/thanks", user_id=str(bob.id)) == [third["id"], first["id"]]
    assert await ids("/api/thanks", user_id=str(alice.id)) == [third["id"]]
    assert await ids(f"/api/users/{bob.id}/thanks") == [third["id"], first["id"]]
    assert await ids(f"/api/users/{carol.id}/thanks") == [second["id"]]
    assert await ids("/api/thanks", since="1000000000") == [third["id"], second["id"]]
    assert await ids("/api/thanks", per_page="2") == [third["id"], second["id"]]
    assert await ids("/api/thanks", per_page="2", page="2") == [first["id"]]
    assert await ids("/api/thanks", per_page="2", page="3") == []

    for params in ({"since": "soon"}, {"since": "-5"}, {"user_id": "bob"}, {"page": "0"},
                   {"per_page": "x"}):
        assert (await alice.api.get("/api/thanks", params=params)).status == 400, params


async def test_visibility_and_tenancy(world: World) -> None:
    admin = await world.community()
    alice = await world.user(admin, "Alice")
    bob = await world.user(admin, "Bob")
    external = await world.user(admin, "Ed", role="external_contributor")
    to_bob = (await thank(alice, [bob]))["thanks"]
    to_external = (await thank(alice, [external]))["thanks"]
    other = await world.community("Other")
    olga = await world.user(other, "Olga")
    theirs = (await thank(other, [olga]))["thanks"]

    # external contributors see only the thanks they are part of
    listed = (await external.api.get("/api/thanks")).json["thanks"]
    assert [t["id"] for t in listed] == [to_external["id"]]
    assert listed[0]["announcement"] is not None
    assert (await external.api.get(f"/api/thanks/{to_bob['id']}")).status == 404
    assert (await external.api.get(f"/api/users/{bob.id}/thanks")).json["thanks"] == []

    # nothing crosses communities
    assert [t["id"] for t in (await bob.api.get("/api/thanks")).json["thanks"]] == [
        to_external["id"], to_bob["id"],
    ]
    assert (await bob.api.get(f"/api/thanks/{theirs['id']}")).status == 404
    assert (await bob.api.get(f"/api/users/{olga.id}/thanks")).status == 404
    assert (await bob.api.get("/api/thanks", params={"user_id": str(olga.id)})).json == {
        "thanks": []
    }
    assert (await bob.api.get("/api/users/999999/thanks")).status == 404
    assert (await bob.api.anonymous().get("/api/thanks")).status == 401


async def test_deleted_announcement(world: World) -> None:
    admin = await world.community()
    alice = await world.user(admin, "Alice")
    bob = await world.user(admin, "Bob")
    thanks = (await thank(alice, [bob]))["thanks"]
    deleted = await admin.api.delete(f"/api/messages/{thanks['announcement']['id']}")
    assert deleted.status == 204
    shown = (await bob.api.get(f"/api/thanks/{thanks['id']}")).json["thanks"]
    assert shown["announcement"] is None and shown["recipient"]["id"] == bob.id


async def test_list_thanks_runs_a_fixed_number_of_queries(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()
    people = [await world.user(admin, f"P{i}") for i in range(4)]
    badges = await badge_ids(admin)

    async def count() -> int:
        query_log.reset()
        resp = await admin.api.get("/api/thanks", params={"per_page": "500"})
        assert resp.status == 200
        return len(query_log)

    await thank(people[0], [people[1]], badge_id=badges[0])
    await count()
    few = await count()
    for i in range(12):
        await thank(people[i % 4], [people[(i + 1) % 4], people[(i + 2) % 4]], f"#t{i}",
                    badges[i % 3])
    assert await count() == few
    assert len((await admin.api.get("/api/thanks", params={"per_page": "1"})).json["thanks"]) == 1


async def test_badge_messages(world: World) -> None:
    admin = await world.community()
    alice = await world.user(admin, "Alice")
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    star, heart = (await badge_ids(admin))[2], (await badge_ids(admin))[0]
    first = (await thank(alice, [bob], "one", star))["thanks"]
    second = (await thank(bob, [carol], "two", star))["thanks"]
    await thank(carol, [bob], "three", heart)
    await thank(carol, [alice], "four")

    resp = await alice.api.get(f"/api/badges/{star}/messages")
    assert resp.status == 200 and list(resp.json) == ["messages", "messages_next_page"]
    messages = resp.json["messages"]
    assert [m["id"] for m in messages] == [
        second["announcement"]["id"], first["announcement"]["id"],
    ]
    assert resp.json["messages_next_page"] is None
    assert list(messages[0]["extensions"][0]) == EXTENSION_KEYS
    assert messages[0]["extensions"][0]["badge"]["id"] == star

    paged = await alice.api.get(f"/api/badges/{star}/messages.json", params={"per_page": "1"})
    assert [m["id"] for m in paged.json["messages"]] == [second["announcement"]["id"]]
    assert paged.json["messages_next_page"] == 2

    by_bob = await alice.api.get(f"/api/users/{bob.id}/badges/{star}/messages")
    assert [m["id"] for m in by_bob.json["messages"]] == [first["announcement"]["id"]]
    by_carol = await alice.api.get(f"/api/users/{carol.id}/badges/{heart}/messages")
    assert by_carol.json == {"messages": [], "messages_next_page": None}


async def test_badge_messages_tenancy_and_visibility(world: World) -> None:
    admin = await world.community()
    alice = await world.user(admin, "Alice")
    bob = await world.user(admin, "Bob")
    external = await world.user(admin, "Ed", role="external_contributor")
    star = (await badge_ids(admin))[2]
    await thank(alice, [bob], "for bob", star)
    mine = (await thank(alice, [external], "for ed", star))["thanks"]
    other = await world.community("Other")
    olga = await world.user(other, "Olga")
    their_star = (await badge_ids(other))[2]
    await thank(other, [olga], "elsewhere", their_star)

    assert (await alice.api.get(f"/api/badges/{their_star}/messages")).status == 404
    assert (await alice.api.get(f"/api/users/{olga.id}/badges/{star}/messages")).status == 404
    assert (await alice.api.get(f"/api/users/{bob.id}/badges/{their_star}/messages")
            ).status == 404
    assert (await alice.api.get("/api/badges/nope/messages")).status == 404
    # an external contributor reads only the announcements addressed to them
    ext = (await external.api.get(f"/api/badges/{star}/messages")).json["messages"]
    assert [m["id"] for m in ext] == [mine["announcement"]["id"]]
    assert (await alice.api.get(f"/api/badges/{star}/messages",
                                params={"comments_limit": "x"})).status == 400


async def test_badge_messages_run_a_fixed_number_of_queries(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()
    people = [await world.user(admin, f"P{i}") for i in range(3)]
    star = (await badge_ids(admin))[2]

    async def count() -> int:
        query_log.reset()
        resp = await admin.api.get(f"/api/badges/{star}/messages", params={"per_page": "500"})
        assert resp.status == 200
        return len(query_log)

    await thank(people[0], [people[1]], badge_id=star)
    await count()
    few = await count()
    for i in range(10):
        await thank(people[i % 3], [people[(i + 1) % 3]], f"#b{i}", star)
    assert await count() == few


async def test_thanks_notifies_the_recipients_and_not_the_sender(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    bob = await world.user(admin, "Bob")
    resp = await ann.api.post("/api/thanks", json={"thanks": {
        "body": "for the release notes", "recipients": [bob.id]}})
    assert resp.status == 201, resp.text
    thanks_id = resp.json["thanks"]["id"]
    bobs = (await bob.api.get("/api/notifications")).json["notifications"]
    assert [(n["filter"], n["notifiable_type"], n["notifiable_id"]) for n in bobs] == [
        ("thanks", "Thanks", thanks_id)]
    assert bobs[0]["sent_by_user"]["id"] == ann.id
    anns = (await ann.api.get("/api/notifications")).json
    assert anns["notifications"] == [] and anns["unread_notifications_count"] == 0
    # the live event is stored for bob's sockets
    names = await world.pool.fetch(
        "SELECT name FROM realtime_events WHERE channel = $1", f"user:{bob.id}")
    assert [r["name"] for r in names] == ["notification.created"]
