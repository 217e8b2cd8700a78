"""The audit of interface.md against the code (issue 9): parameter values that used to answer
a 500 or the wrong status."""

from __future__ import annotations

from typing import Any

import pytest

from tests.app.views.feed_support import post, stream_id
from tests.support import Member, World

SINCE_LISTS = [
    "/api/messages",
    "/api/streams/{stream}/messages",
    "/api/groups/{group}/messages",
    "/api/users/{user}/messages",
    "/api/external_systems/{system}/messages",
    "/api/topics/plans",
    "/api/thanks",
    "/api/users/{user}/thanks",
    "/api/groups/{group}/chat_messages",
]


async def _paths(world: World, admin: Member) -> dict[str, int]:
    group = await world.group(admin, chat=True)
    await post(admin, "Our #plans", group_id=group["id"])
    system = await admin.api.post("/api/external_systems", json={"external_system": {
        "name": "Build Server", "url": "https://ci.example.com"}})
    assert system.status == 201, system.text
    return {"stream": await stream_id(admin, "Home"), "group": group["id"], "user": admin.id,
            "system": system.json["external_system"]["id"]}


@pytest.mark.parametrize("since", ["99999999999999", "253402300800", "-1", "abc", "1e3"])
async def test_implausible_since_is_400_on_every_list(world: World, since: str) -> None:
    admin = await world.community()
    ids = await _paths(world, admin)
    for path in SINCE_LISTS:
        resp = await admin.api.get(path.format(**ids), params={"since": since})
        assert resp.status == 400, (path, resp.status, resp.text)
        assert resp.json["code"] == "bad_request"
        assert "since" in resp.json["errors"][0].lower()


async def test_plausible_since_filters_and_year_9999_is_allowed(world: World) -> None:
    admin = await world.community()
    ids = await _paths(world, admin)
    for path in SINCE_LISTS:
        for since in ("0", "253402300799", ""):
            resp = await admin.api.get(path.format(**ids), params={"since": since})
            assert resp.status == 200, (path, since, resp.text)
    everything = await admin.api.get("/api/messages", params={"since": "0"})
    assert len(everything.json["messages"]) == 1
    nothing = await admin.api.get("/api/messages", params={"since": "253402300799"})
    assert nothing.json["messages"] == []


async def test_chat_before_that_is_no_id_is_400(world: World) -> None:
    admin = await world.community()
    group = await world.group(admin, chat=True)
    path = f"/api/groups/{group['id']}/chat_messages"
    bad = await admin.api.get(path, params={"before": "abc"})
    assert bad.status == 400 and bad.json["code"] == "bad_request"
    assert bad.json["fields"] == {"before": ["must be an integer"]}
    for blank in ("", " "):
        assert (await admin.api.get(path, params={"before": blank})).status == 200
    assert (await admin.api.get(path, params={"before": "12"})).status == 200


async def test_blank_group_flags_mean_absent(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    open_group = await world.group(admin, "Open")
    for flag in ("can_join_only", "can_request_membership_only",
                 "include_private_requestable_groups"):
        resp = await bob.api.get("/api/groups", params={flag: ""})
        assert resp.status == 200, (flag, resp.text)
        assert [g["id"] for g in resp.json["groups"]] == [open_group["id"]]
    joinable = await bob.api.get("/api/groups", params={"can_join_only": "true"})
    assert [g["id"] for g in joinable.json["groups"]] == [open_group["id"]]
    members = await admin.api.get(f"/api/groups/{open_group['id']}/members",
                                  params={"separate_roles": "", "send_user_presence": ""})
    assert members.status == 200, members.text


def _ids(resp: Any) -> list[int]:
    assert resp.status == 200, resp.text
    return [m["id"] for m in resp.json["messages"]]


async def test_tag_overrides_stream_id(world: World) -> None:
    """interface.md: tag overrides stream_id (it used to narrow the chosen stream only)."""
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    tagged_by_bob = await post(bob, "Mine #launch")  # not in admin's Home: admin follows no one
    group = await world.group(admin, "Ops")
    tagged_in_group = await post(admin, "Ours #launch", group_id=group["id"])
    await post(admin, "untagged", group_id=group["id"])
    group_stream = await stream_id(admin, "Ops")
    both = sorted([tagged_by_bob["id"], tagged_in_group["id"]])
    by_param = await admin.api.get("/api/messages",
                                   params={"stream_id": group_stream, "tag": "launch"})
    assert sorted(_ids(by_param)) == both
    in_path = await admin.api.get(f"/api/streams/{group_stream}/messages",
                                  params={"tag": "#Launch"})
    assert sorted(_ids(in_path)) == both
    by_user = await admin.api.get(f"/api/users/{bob.id}/messages",
                                  params={"stream_id": group_stream, "tag": "launch"})
    assert _ids(by_user) == [tagged_by_bob["id"]]
    # still only a stream the viewer has
    other = await admin.api.get("/api/streams/999999/messages", params={"tag": "launch"})
    assert other.status == 404


async def test_user_id_and_external_system_id_narrow_every_list_that_takes_them(
    world: World,
) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    made = await admin.api.post("/api/external_systems", json={"external_system": {
        "name": "Build Server", "url": "https://ci.example.com"}})
    system = made.json["external_system"]["id"]
    by_system = (await admin.api.post(f"/api/external_systems/{system}/messages",
                                      json={"message": {"body": "Build passed"}})).json["message"]
    by_admin = await post(admin, "By hand")
    by_bob = await post(bob, "Hi all")
    company = await stream_id(admin, "Company")
    stream_path = f"/api/streams/{company}/messages"
    assert sorted(_ids(await admin.api.get(stream_path))) == sorted(
        [by_system["id"], by_admin["id"], by_bob["id"]])
    assert _ids(await admin.api.get(stream_path, params={"user_id": bob.id})) == [by_bob["id"]]
    assert _ids(await admin.api.get(stream_path, params={"external_system_id": system})) == [
        by_system["id"]]
    user_path = f"/api/users/{admin.id}/messages"
    assert _ids(await admin.api.get(user_path, params={"external_system_id": system})) == [
        by_system["id"]]
    system_path = f"/api/external_systems/{system}/messages"
    assert _ids(await admin.api.get(system_path, params={"user_id": bob.id})) == []
    assert _ids(await admin.api.get(system_path, params={"user_id": admin.id})) == [
        by_system["id"]]
    assert _ids(await admin.api.get("/api/messages", params={"user_id": bob.id})) == [
        by_bob["id"]]


async def test_activity_location_is_an_object_when_given(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    started = await admin.api.post("/api/conversations", json={
        "conversation": {"members_emails": bob.email},
        "remark": {"text": "here", "location": {"longitude": "2.35", "latitude": 48.85}}})
    assert started.status == 201, started.text
    cid = started.json["conversation"]["id"]
    latest = started.json["conversation"]["latest_activity"]
    assert latest["location"] == {"longitude": 2.35, "latitude": 48.85}
    path = f"/api/conversations/{cid}/remarks"
    by_form = await bob.api.post(path, data={"remark[text]": "there",
                                             "remark[location][longitude]": "-0.1",
                                             "remark[location][latitude]": "51.5"})
    assert by_form.status == 201, by_form.text
    assert by_form.json["activity"]["location"] == {"longitude": -0.1, "latitude": 51.5}
    for blank in ({"remark[text]": "none", "remark[location][longitude]": "",
                   "remark[location][latitude]": ""},
                  {"remark[text]": "none", "remark[location]": ""}):
        resp = await bob.api.post(path, data=blank)
        assert resp.status == 201, resp.text
        assert resp.json["activity"]["location"] is None
    listed = (await admin.api.get(f"/api/conversations/{cid}/activities")).json["activities"]
    assert [a["location"] for a in listed][-2:] == [
        {"longitude": -0.1, "latitude": 51.5}, {"longitude": 2.35, "latitude": 48.85}]


async def test_send_user_presence_adds_online_from_live_sockets(world: World) -> None:
    """send_user_presence=true: each member's `online` (last key) tells whether they have a
    live realtime connection (decided: docs/decisions.md); without it the shape is unchanged."""
    from tests.app.views.realtime_support import open_socket

    admin = await world.community()
    bob = await world.user(admin, "Bob")
    group = await world.group(admin, "Team", members=(bob,))
    path = f"/api/groups/{group['id']}/members"
    plain = await admin.api.get(path)
    assert all("online" not in u for u in plain.json["users"])
    before = await admin.api.get(path, params={"send_user_presence": "true"})
    assert {u["id"]: u["online"] for u in before.json["users"]} == {admin.id: False,
                                                                    bob.id: False}
    ws, _ = await open_socket(bob)
    try:
        after = await admin.api.get(path, params={"send_user_presence": "true"})
        users = after.json["users"]
        assert all(list(u)[-1] == "online" for u in users)
        assert {u["id"]: u["online"] for u in users} == {admin.id: False, bob.id: True}
    finally:
        await ws.close()
