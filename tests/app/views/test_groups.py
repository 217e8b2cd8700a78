"""Groups: create, show, lists and their filters, update, archive, destroy, join, leave, pins."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import QueryLog
from tests.shapes import GROUP_EXTRAS
from tests.support import Member, World

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "socialcast"
CAPTURED_GROUP = json.loads((FIXTURES / "group_create.json").read_text())["group"]
CHAT_KEYS = [
    "chats_last_viewed_at", "unread_chats_count", "push_notifications_enabled",
    "push_notification_on_group_chat_message", "push_notification_on_chat_mention",
]


def ids(resp: Any) -> list[int]:
    assert resp.status == 200, resp.text
    return [g["id"] for g in resp.json["groups"]]


async def stream_rows(world: World, group_id: int) -> dict[str, str]:
    rows = await world.pool.fetch(
        "SELECT kind, name FROM streams WHERE group_id = $1", group_id
    )
    return {r["kind"]: r["name"] for r in rows}


# --- create and the Group JSON ---------------------------------------------------------------


async def test_create_group_answers_the_captured_shape(world: World) -> None:
    admin = await world.community("Acme")
    bob = await world.user(admin, "Bob")
    resp = await bob.api.post(
        "/api/groups.json", json={"group": {"name": "MonkeyPuzzle", "description": "Test group"}}
    )
    assert resp.status == 201, resp.text
    assert list(resp.json) == ["group"]
    group = resp.json["group"]
    # the same 27 keys, in the same order, then the interface's extras (decisions.md)
    assert list(group) == [*CAPTURED_GROUP, *GROUP_EXTRAS]
    assert group["html_description"] == '<div class="markdown-body"><p>Test group</p></div>'
    assert group["rule_managed"] is False
    assert list(group["avatars"]) == list(CAPTURED_GROUP["avatars"])  # default: no "id"
    for key, captured in CAPTURED_GROUP.items():
        assert type(group[key]) is type(captured), key
    base = f"https://{admin.community.domain}"
    assert group["url"] == f"{base}/groups/{group['id']}-monkeypuzzle"
    assert group["activity_url"] == group["url"] + "/messages_activity"
    assert group["username"] == group["groupname"] == "MonkeyPuzzle"
    assert (group["name"], group["description"], group["type"]) == (
        "MonkeyPuzzle", "Test group", "Group"
    )
    assert (group["state"], group["permission"], group["group_type"]) == (
        "active", "public", "standard"
    )
    assert group["private"] is False and group["external_contributor"] is False
    # the creator is its only admin: they can administer it but not leave it
    assert group["admin_ids"] == [bob.id]
    assert group["role_key"] == "admin" and group["can_administer"] is True
    assert group["can_leave"] is False and group["can_join"] is False
    assert group["member_count"] == 1
    assert group["chat_stream_id"] is None
    post_stream = await world.pool.fetchval(
        "SELECT id FROM streams WHERE group_id = $1 AND kind = 'group' AND name = $2",
        group["id"], "MonkeyPuzzle",
    )
    assert group["post_stream_id"] == post_stream
    assert await stream_rows(world, group["id"]) == {"group": "MonkeyPuzzle"}
    shown = await bob.api.get(f"/api/groups/{group['id']}")
    assert shown.status == 200 and shown.json == resp.json


async def test_create_group_from_a_form_with_every_parameter(world: World) -> None:
    admin = await world.community()
    resp = await admin.api.post("/api/groups", data={
        "group[name]": "Secret Club", "group[description]": "Shh",
        "group[permission_mode]": "private", "group[allow_access_request]": "true",
        "group[chat]": "1",
    })
    assert resp.status == 201, resp.text
    group = resp.json["group"]
    assert group["permission"] == "private" and group["private"] is True
    assert group["chat_enabled"] is True
    assert list(group) == [*CAPTURED_GROUP, *CHAT_KEYS, *GROUP_EXTRAS]
    assert [group[k] for k in CHAT_KEYS] == [0, 0, True, True, True]
    streams = await stream_rows(world, group["id"])
    assert streams == {"group": "Secret Club", "group_chat": "Secret Club"}
    chat_stream = await world.pool.fetchval(
        "SELECT id FROM streams WHERE group_id = $1 AND kind = 'group_chat'", group["id"]
    )
    assert group["chat_stream_id"] == chat_stream != group["post_stream_id"]
    external = await admin.api.post("/api/groups", json={
        "group": {"name": "Partners", "permission_mode": "external_contributor"}})
    assert external.json["group"]["external_contributor"] is True
    assert external.json["group"]["private"] is True


async def test_chat_read_state_comes_from_group_chat_reads(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    group = await world.group(admin, "Chatty", members=(bob,), chat=True)
    # unread counts are counted when read: the others' chat messages after the member's read
    # marker (or their joining)
    for i in range(4):
        await admin.api.post(f"/api/groups/{group['id']}/chat_messages",
                             json={"chat_message": {"body": f"hi {i}"}})
    await world.pool.execute(
        "INSERT INTO group_chat_reads (community_id, group_id, user_id, last_viewed_at, "
        "push_notification_on_chat_mention) "
        "VALUES ($1, $2, $3, to_timestamp(1484175622), false)",
        admin.community.id, group["id"], bob.id,
    )
    mine = (await bob.api.get(f"/api/groups/{group['id']}")).json["group"]
    assert [mine[k] for k in CHAT_KEYS] == [1484175622, 4, True, True, False]
    theirs = (await admin.api.get(f"/api/groups/{group['id']}")).json["group"]
    assert theirs[CHAT_KEYS[1]] == 0 and theirs[CHAT_KEYS[0]] > 0
    assert [theirs[k] for k in CHAT_KEYS[2:]] == [True, True, True]


async def test_groupnames_are_derived_from_names_and_unique(world: World) -> None:
    admin = await world.community()
    first = await world.group(admin, "Monkey Puzzle")
    second = await world.group(admin, "Monkey Puzzle!")
    accented = await world.group(admin, "Café crew")
    symbols = await world.group(admin, "!!!")
    assert first["groupname"] == "MonkeyPuzzle"
    assert second["groupname"] == "MonkeyPuzzle2"
    assert accented["groupname"] == "Cafecrew"
    assert symbols["groupname"] == "group"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"group": {"description": "no name"}}, "group[name]"),
        ({"group": {"name": "   "}}, "group[name]"),
        ({"group": {"name": "x", "permission_mode": "secret"}}, "group[permission_mode]"),
        ({"group": {"name": "x", "chat": "maybe"}}, "group[chat]"),
        ({"group": {"name": "x" * 256}}, "group[name]"),
        ({}, "group"),
    ],
)
async def test_create_group_bad_input_is_422(world: World, body: Any, field: str) -> None:
    admin = await world.community()
    resp = await admin.api.post("/api/groups", json=body)
    assert resp.status == 422, resp.text
    assert resp.json["code"] == "validation_failed" and resp.json["errors"]
    assert field in resp.json["fields"]
    assert (await admin.api.get("/api/groups")).json["groups"] == []


async def test_create_group_conflicts_and_refusals(world: World) -> None:
    admin = await world.community()
    await world.group(admin, "Cats")
    taken = await admin.api.post("/api/groups", json={"group": {"name": "CATS"}})
    assert taken.status == 409
    assert taken.json["fields"] == {"group[name]": ["has already been taken"]}
    garbled = await admin.api.post(
        "/api/groups", data=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert garbled.status == 400 and garbled.json["code"] == "bad_request"
    outsider = await world.user(admin, "Ext", role="external_contributor")
    refused = await outsider.api.post("/api/groups", json={"group": {"name": "Mine"}})
    assert refused.status == 403 and refused.json["code"] == "forbidden"
    assert len((await admin.api.get("/api/groups")).json["groups"]) == 1


# --- per-viewer flags ------------------------------------------------------------------------


def flags(group: dict[str, Any]) -> dict[str, Any]:
    keys = ("role_key", "can_request_membership", "can_cancel_membership_request", "can_join",
            "can_leave", "can_administer")
    return {k: group[k] for k in keys}


async def test_flags_of_a_public_group_for_each_kind_of_viewer(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    member = await world.user(admin, "Member")
    stranger = await world.user(admin, "Stranger")
    external = await world.user(admin, "Ext", role="external_contributor")
    group = await world.group(owner, "Public", members=(member,))
    url = f"/api/groups/{group['id']}"
    seen = {m.id: (await m.api.get(url)).json["group"] for m in (owner, member, stranger, admin)}
    assert flags(seen[owner.id]) == {
        "role_key": "admin", "can_request_membership": False,
        "can_cancel_membership_request": False, "can_join": False, "can_leave": False,
        "can_administer": True,
    }
    assert flags(seen[member.id]) == {
        "role_key": "member", "can_request_membership": False,
        "can_cancel_membership_request": False, "can_join": False, "can_leave": True,
        "can_administer": False,
    }
    assert flags(seen[stranger.id]) == {
        "role_key": None, "can_request_membership": False,
        "can_cancel_membership_request": False, "can_join": True, "can_leave": False,
        "can_administer": False,
    }
    # a community admin counts as a group admin without being a member
    assert flags(seen[admin.id]) == {
        "role_key": None, "can_request_membership": False,
        "can_cancel_membership_request": False, "can_join": True, "can_leave": False,
        "can_administer": True,
    }
    assert {g["member_count"] for g in seen.values()} == {2}
    # an external contributor does not see public groups at all
    assert (await external.api.get(url)).status == 404


async def test_flags_of_a_private_group_that_accepts_requests(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    stranger = await world.user(admin, "Stranger")
    group = await world.group(owner, "Club", permission_mode="private",
                              allow_access_request=True)
    url = f"/api/groups/{group['id']}"
    before = (await stranger.api.get(url)).json["group"]
    assert flags(before) == {
        "role_key": None, "can_request_membership": True,
        "can_cancel_membership_request": False, "can_join": False, "can_leave": False,
        "can_administer": False,
    }
    assert (await stranger.api.post(f"{url}/membership_requests")).status == 201
    after = (await stranger.api.get(url)).json["group"]
    assert after["can_request_membership"] is False
    assert after["can_cancel_membership_request"] is True


async def test_flags_of_an_external_contributor_member(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    external = await world.user(admin, "Ext", role="external_contributor")
    partners = await world.group(owner, "Partners", members=(external,),
                                 permission_mode="external_contributor")
    await world.group(owner, "Internal")
    await world.group(owner, "Hidden Club", permission_mode="private", allow_access_request=True)
    listed = await external.api.get("/api/groups", params={
        "include_private_requestable_groups": "true"})
    assert ids(listed) == [partners["id"]]
    group = listed.json["groups"][0]
    assert flags(group) == {
        "role_key": "member", "can_request_membership": False,
        "can_cancel_membership_request": False, "can_join": False, "can_leave": True,
        "can_administer": False,
    }


async def test_a_second_admin_may_leave(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    deputy = await world.user(admin, "Deputy")
    group = await world.group(owner, "Pair", admins=(deputy,))
    assert sorted(group["admin_ids"]) == sorted([owner.id, deputy.id])
    assert group["can_leave"] is True


# --- visibility ------------------------------------------------------------------------------


async def test_private_group_is_invisible_to_non_members(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    member = await world.user(admin, "Member")
    stranger = await world.user(admin, "Stranger")
    group = await world.group(owner, "Secret", members=(member,), permission_mode="private")
    url = f"/api/groups/{group['id']}"
    missing = await stranger.api.get(url)
    assert missing.status == 404 and missing.json["code"] == "not_found"
    for path in (f"{url}/members", f"{url}/join", f"{url}/membership_requests"):
        method = stranger.api.get if path.endswith("members") else stranger.api.post
        assert (await method(path)).status == 404, path
    everything = {"include_private_requestable_groups": "true"}
    assert group["id"] not in ids(await stranger.api.get("/api/groups", params=everything))
    assert ids(await stranger.api.get("/api/groups/search", params={"q": "secret"})) == []
    assert ids(await stranger.api.get(f"/api/users/{member.id}/groups")) == []
    assert ids(await member.api.get("/api/groups")) == [group["id"]]
    assert ids(await member.api.get(f"/api/users/{owner.id}/groups")) == [group["id"]]
    # a community admin may reach it by id (to administer it), but it is not listed to them
    assert (await admin.api.get(url)).json["group"]["can_administer"] is True
    assert group["id"] not in ids(await admin.api.get("/api/groups", params=everything))


async def test_private_requestable_groups_are_listed_on_request(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    stranger = await world.user(admin, "Stranger")
    public = await world.group(owner, "Alpha")
    club = await world.group(owner, "Beta Club", permission_mode="private",
                             allow_access_request=True)
    assert ids(await stranger.api.get("/api/groups")) == [public["id"]]
    assert ids(await stranger.api.get("/api/groups", params={
        "include_private_requestable_groups": "true"})) == [public["id"], club["id"]]
    # its admins may be listed, not its other members, and its content not read
    admins = await stranger.api.get(f"/api/groups/{club['id']}/members", params={"role": "admin"})
    assert admins.status == 200 and [u["id"] for u in admins.json["users"]] == [owner.id]
    everyone = await stranger.api.get(f"/api/groups/{club['id']}/members")
    assert everyone.status == 403 and everyone.json["code"] == "forbidden"


# --- lists and filters ------------------------------------------------------------------------


async def test_list_filters(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    viewer = await world.user(admin, "Viewer")
    mine = await world.group(owner, "Apple Growers", members=(viewer,))
    open_group = await world.group(owner, "Banana Split")
    archived = await world.group(owner, "Cherry Pickers")
    club = await world.group(owner, "Date Club", permission_mode="private",
                             allow_access_request=True)
    closed = await world.group(owner, "Elder Club", permission_mode="private")
    assert (await owner.api.delete(f"/api/groups/{archived['id']}/archive")).status == 200

    api = viewer.api
    assert ids(await api.get("/api/groups")) == [mine["id"], open_group["id"], archived["id"]]
    assert ids(await api.get("/api/groups", params={"can_join_only": "true"})) == [
        open_group["id"]]
    assert ids(await api.get("/api/groups", params={"can_request_membership_only": "1"})) == [
        club["id"]]
    assert ids(await api.get("/api/groups", params={"include_private_requestable_groups": "t"})
               ) == [mine["id"], open_group["id"], archived["id"], club["id"]]
    # q matches word prefixes of the name, every word
    assert ids(await api.get("/api/groups", params={"q": "ban"})) == [open_group["id"]]
    assert ids(await api.get("/api/groups", params={"q": "SPL ban"})) == [open_group["id"]]
    assert ids(await api.get("/api/groups", params={"q": "anana"})) == []
    assert ids(await api.get("/api/groups", params={"q": "pick"})) == [archived["id"]]
    assert ids(await api.get("/api/groups", params={"q": "!!"})) == []
    assert ids(await api.get("/api/groups", params={"q": "club"})) == []
    assert ids(await api.get("/api/groups", params={
        "q": "club", "include_private_requestable_groups": "true"})) == [club["id"]]
    # user_id: groups that user belongs to
    assert ids(await api.get("/api/groups", params={"user_id": viewer.id})) == [mine["id"]]
    assert ids(await owner.api.get("/api/groups", params={"user_id": str(owner.id)})) == [
        mine["id"], open_group["id"], archived["id"], club["id"], closed["id"]]
    assert ids(await api.get("/api/groups", params={"user_id": owner.id})) == [
        mine["id"], open_group["id"], archived["id"]]
    assert ids(await api.get("/api/groups", params={"user_id": ""})) == ids(
        await api.get("/api/groups"))
    # paging
    assert ids(await api.get("/api/groups", params={"per_page": 2})) == [
        mine["id"], open_group["id"]]
    assert ids(await api.get("/api/groups", params={"per_page": 2, "page": 2})) == [
        archived["id"]]
    assert ids(await api.get("/api/groups", params={"per_page": 2, "page": 9})) == []
    assert closed["id"] not in ids(await api.get("/api/groups", params={"per_page": 500}))


async def test_list_bad_parameters(world: World) -> None:
    admin = await world.community()
    other = await world.community("Other")
    for params, status in (
        ({"per_page": "abc"}, 400), ({"page": "0"}, 400), ({"user_id": "abc"}, 422),
        ({"can_join_only": "perhaps"}, 422), ({"q": "x" * 501}, 422),
    ):
        resp = await admin.api.get("/api/groups", params=params)
        assert resp.status == status, (params, resp.text)
        assert resp.json["errors"]
    foreign = await admin.api.get("/api/groups", params={"user_id": other.id})
    assert foreign.status == 404


async def test_user_groups(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    member = await world.user(admin, "Member")
    stranger = await world.user(admin, "Stranger")
    shared = await world.group(owner, "Shared", members=(member,))
    await world.group(owner, "Owners Only")
    secret = await world.group(owner, "Secret", members=(member,), permission_mode="private")
    assert ids(await stranger.api.get(f"/api/users/{member.id}/groups")) == [shared["id"]]
    assert ids(await member.api.get(f"/api/users/{member.id}/groups.json")) == [
        secret["id"], shared["id"]]
    assert ids(await member.api.get(f"/api/users/{member.id}/groups", params={
        "per_page": 1, "page": 2})) == [shared["id"]]
    assert ids(await stranger.api.get(f"/api/users/{stranger.id}/groups")) == []
    other = await world.community("Other")
    assert (await other.api.get(f"/api/users/{member.id}/groups")).status == 404
    assert (await member.api.get("/api/users/999999/groups")).status == 404


async def test_search_groups(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    viewer = await world.user(admin, "Viewer")
    cats = await world.group(owner, "Cat Lovers")
    club = await world.group(owner, "Catnip Club", permission_mode="private",
                             allow_access_request=True)
    await world.group(owner, "Cattle Secret", permission_mode="private")
    await world.group(owner, "Dogs")
    found = await viewer.api.get("/api/groups/search", params={"q": "cat"})
    assert ids(found) == [cats["id"], club["id"]]
    assert ids(await viewer.api.get("/api/groups/search.json", params={"q": "lov ca"})) == [
        cats["id"]]
    assert ids(await viewer.api.get("/api/groups/search", params={"q": "cat", "per_page": 1,
                                                                 "page": 2})) == [club["id"]]
    assert ids(await viewer.api.get("/api/groups/search", params={"q": "  "})) == []
    assert ids(await viewer.api.get("/api/groups/search")) == []
    assert (await viewer.api.get("/api/groups/search", params={"per_page": "x"})).status == 400


async def test_mutual_groups(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    ann = await world.user(admin, "Ann")
    ben = await world.user(admin, "Ben")
    both = await world.group(owner, "Both", members=(ann, ben))
    await world.group(owner, "Ann Only", members=(ann,))
    secret = await world.group(owner, "Secret Both", members=(ann, ben),
                               permission_mode="private")
    # default other user: the viewer
    assert ids(await ann.api.get("/api/groups/mutual", params={"user_id": ben.id})) == [
        both["id"], secret["id"]]
    # two other users: only groups the viewer can read
    assert ids(await owner.api.get("/api/groups/mutual", params={
        "user_id": ann.id, "other_user_id": ben.id})) == [both["id"], secret["id"]]
    assert ids(await admin.api.get("/api/groups/mutual", params={
        "user_id": ann.id, "other_user_id": ben.id})) == [both["id"]]
    assert ids(await ann.api.get("/api/groups/mutual", params={
        "user_id": ben.id, "per_page": 1, "page": 2})) == [secret["id"]]
    missing = await ann.api.get("/api/groups/mutual")
    assert missing.status == 422 and "user_id" in missing.json["fields"]
    other = await world.community("Other")
    assert (await ann.api.get("/api/groups/mutual", params={"user_id": other.id})).status == 404
    assert (await ann.api.get("/api/groups/mutual", params={
        "user_id": ben.id, "other_user_id": other.id})).status == 404


async def test_pin_and_unpin(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    viewer = await world.user(admin, "Viewer")
    first = await world.group(owner, "Zulu")
    second = await world.group(owner, "Alpha")
    club = await world.group(owner, "Club", members=(viewer,), permission_mode="private")
    secret = await world.group(owner, "Secret", permission_mode="private")
    for group in (first, second, club):
        pinned = await viewer.api.post(f"/api/groups/{group['id']}/pin")
        assert pinned.status == 200 and pinned.json["group"]["id"] == group["id"]
    again = await viewer.api.post(f"/api/groups/{first['id']}/pin")
    assert again.status == 200
    # in the order pinned
    assert ids(await viewer.api.get("/api/groups/pinned")) == [first["id"], second["id"],
                                                              club["id"]]
    assert ids(await viewer.api.get("/api/groups/pinned", params={"per_page": 1, "page": 2})
               ) == [second["id"]]
    assert ids(await owner.api.get("/api/groups/pinned")) == []
    unpinned = await viewer.api.delete(f"/api/groups/{first['id']}/pin")
    assert unpinned.status == 200 and unpinned.json["group"]["id"] == first["id"]
    assert (await viewer.api.delete(f"/api/groups/{first['id']}/pin")).status == 200
    assert ids(await viewer.api.get("/api/groups/pinned")) == [second["id"], club["id"]]
    # a pinned group the viewer may no longer see drops out of the list
    assert (await viewer.api.post(f"/api/groups/{club['id']}/leave")).status == 200
    assert ids(await viewer.api.get("/api/groups/pinned")) == [second["id"]]
    assert (await viewer.api.post(f"/api/groups/{secret['id']}/pin")).status == 404
    other = await world.community("Other")
    foreign = await world.group(other, "Foreign")
    assert (await viewer.api.post(f"/api/groups/{foreign['id']}/pin")).status == 404
    assert (await viewer.api.delete(f"/api/groups/{foreign['id']}/pin")).status == 404


# --- show, update, destroy, archive ------------------------------------------------------------


async def test_show_group_tenancy_and_bad_ids(world: World) -> None:
    admin = await world.community()
    group = await world.group(admin, "Mine")
    other = await world.community("Other")
    assert (await other.api.get(f"/api/groups/{group['id']}")).status == 404
    slugged = await admin.api.get(f"/api/groups/{group['id']}-mine.json")
    assert slugged.status == 200 and slugged.json["group"]["id"] == group["id"]
    assert (await admin.api.get("/api/groups/nonsense")).status == 404
    assert (await admin.api.get("/api/groups/999999")).status == 404


async def test_update_group(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    member = await world.user(admin, "Member")
    group = await world.group(owner, "Old Name", members=(member,))
    url = f"/api/groups/{group['id']}"
    resp = await owner.api.put(url, json={"group": {
        "name": "New Name", "description": "About", "permission_mode": "private",
        "allow_access_request": True}})
    assert resp.status == 200, resp.text
    updated = resp.json["group"]
    assert (updated["name"], updated["description"], updated["permission"]) == (
        "New Name", "About", "private")
    assert updated["groupname"] == "OldName"  # mentions and URLs keep working
    assert (await owner.api.get(url)).json["group"] == updated
    assert await stream_rows(world, group["id"]) == {"group": "New Name"}
    # enabling chat makes the chat stream; disabling hides it
    chat_on = (await owner.api.put(url, data={"group[chat]": "true"})).json["group"]
    assert chat_on["chat_enabled"] is True and isinstance(chat_on["chat_stream_id"], int)
    assert list(chat_on)[-7:] == [*CHAT_KEYS, *GROUP_EXTRAS]
    assert await stream_rows(world, group["id"]) == {"group": "New Name",
                                                     "group_chat": "New Name"}
    chat_off = (await owner.api.put(url, json={"group": {"chat": False}})).json["group"]
    assert chat_off["chat_stream_id"] is None and list(chat_off) == [*CAPTURED_GROUP, *GROUP_EXTRAS]
    # an update that names nothing is a 422 and changes nothing (decisions.md)
    empty = await owner.api.put(url)
    assert empty.status == 422 and empty.json["fields"] == {"group": ["names no known field"]}
    assert (await owner.api.get(url)).json["group"] == chat_off


async def test_update_group_refusals(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    member = await world.user(admin, "Member")
    external = await world.user(admin, "Ext", role="external_contributor")
    group = await world.group(owner, "Mine", members=(member,))
    await world.group(owner, "Taken")
    url = f"/api/groups/{group['id']}"
    denied = await member.api.put(url, json={"group": {"name": "Hijack"}})
    assert denied.status == 403 and denied.json["code"] == "forbidden"
    as_admin = await admin.api.put(url, json={"group": {"description": "by the admin"}})
    assert as_admin.status == 200 and as_admin.json["group"]["description"] == "by the admin"
    taken = await owner.api.put(url, json={"group": {"name": "taken"}})
    assert taken.status == 409 and "group[name]" in taken.json["fields"]
    blank = await owner.api.put(url, json={"group": {"name": " "}})
    assert blank.status == 422 and "group[name]" in blank.json["fields"]
    bad = await owner.api.put(url, json={"group": {"permission_mode": "nobody"}})
    assert bad.status == 422 and "group[permission_mode]" in bad.json["fields"]
    assert (await owner.api.get(url)).json["group"]["name"] == "Mine"
    other = await world.community("Other")
    assert (await other.api.put(url, json={"group": {"name": "x"}})).status == 404
    # a group with external contributors must keep admitting them
    partners = await world.group(owner, "Partners", members=(external,),
                                 permission_mode="external_contributor")
    stuck = await owner.api.put(f"/api/groups/{partners['id']}",
                                json={"group": {"permission_mode": "private"}})
    assert stuck.status == 422 and "group[permission_mode]" in stuck.json["fields"]


async def test_delete_group(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    member = await world.user(admin, "Member")
    first = await world.group(owner, "First", members=(member,), chat=True)
    second = await world.group(owner, "Second")
    other = await world.community("Other")
    assert (await other.api.delete(f"/api/groups/{first['id']}")).status == 404
    denied = await member.api.delete(f"/api/groups/{first['id']}")
    assert denied.status == 403
    gone = await owner.api.delete(f"/api/groups/{first['id']}")
    assert gone.status == 204 and gone.text == ""
    assert (await owner.api.get(f"/api/groups/{first['id']}")).status == 404
    assert await stream_rows(world, first["id"]) == {}
    assert ids(await member.api.get(f"/api/users/{member.id}/groups")) == []
    # a community admin who is not a member may destroy any group
    assert (await admin.api.delete(f"/api/groups/{second['id']}")).status == 204
    assert ids(await owner.api.get("/api/groups")) == []


async def test_archive_group(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    member = await world.user(admin, "Member")
    stranger = await world.user(admin, "Stranger")
    group = await world.group(owner, "Old Times", members=(member,))
    url = f"/api/groups/{group['id']}"
    assert (await member.api.delete(f"{url}/archive")).status == 403
    other = await world.community("Other")
    assert (await other.api.delete(f"{url}/archive")).status == 404
    resp = await owner.api.delete(f"{url}/archive")
    assert resp.status == 200
    archived = resp.json["group"]
    assert archived["state"] == "archived" and archived["post_enabled"] is False
    assert (await owner.api.delete(f"{url}/archive")).status == 200
    # still readable, by members and everyone else
    shown = await stranger.api.get(url)
    assert shown.status == 200 and shown.json["group"]["state"] == "archived"
    assert shown.json["group"]["can_join"] is False
    assert (await stranger.api.get(f"{url}/members")).status == 200
    joined = await stranger.api.post(f"{url}/join")
    assert joined.status == 403 and joined.json["code"] == "forbidden"
    assert (await owner.api.get(url)).json["group"]["member_count"] == 2


# --- join and leave ---------------------------------------------------------------------------


async def test_join_and_leave(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    bob = await world.user(admin, "Bob")
    group = await world.group(owner, "Open")
    url = f"/api/groups/{group['id']}"
    joined = await bob.api.post(f"{url}/join")
    assert joined.status == 200
    assert joined.json["group"]["role_key"] == "member"
    assert joined.json["group"]["member_count"] == 2
    assert joined.json["group"]["can_leave"] is True
    again = await bob.api.post(f"{url}/join.json")
    assert again.status == 200 and again.json["group"]["member_count"] == 2
    assert ids(await bob.api.get(f"/api/users/{bob.id}/groups")) == [group["id"]]
    left = await bob.api.post(f"{url}/leave")
    assert left.status == 200
    assert left.json["group"]["role_key"] is None and left.json["group"]["member_count"] == 1
    assert left.json["group"]["can_join"] is True
    not_member = await bob.api.post(f"{url}/leave")
    assert not_member.status == 422 and not_member.json["code"] == "validation_failed"
    assert ids(await bob.api.get(f"/api/users/{bob.id}/groups")) == []


async def test_the_last_admin_cannot_leave(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    deputy = await world.user(admin, "Deputy")
    group = await world.group(owner, "Mine")
    url = f"/api/groups/{group['id']}"
    refused = await owner.api.post(f"{url}/leave")
    assert refused.status == 422 and refused.json["errors"] == [
        "A group must keep at least one admin"]
    assert (await owner.api.get(url)).json["group"]["role_key"] == "admin"
    added = await owner.api.post(f"{url}/memberships", json={
        "group_membership": {"user_id": deputy.id, "role": "admin"}})
    assert added.status == 201
    left = await owner.api.post(f"{url}/leave")
    assert left.status == 200 and left.json["group"]["admin_ids"] == [deputy.id]
    assert (await deputy.api.post(f"{url}/leave")).status == 422


async def test_join_refusals(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    bob = await world.user(admin, "Bob")
    club = await world.group(owner, "Club", permission_mode="private", allow_access_request=True)
    refused = await bob.api.post(f"/api/groups/{club['id']}/join")
    assert refused.status == 403
    assert (await bob.api.get(f"/api/groups/{club['id']}")).json["group"]["role_key"] is None
    other = await world.community("Other")
    foreign = await world.group(other, "Foreign")
    assert (await bob.api.post(f"/api/groups/{foreign['id']}/join")).status == 404
    assert (await bob.api.post(f"/api/groups/{foreign['id']}/leave")).status == 404
    assert (await other.api.get(f"/api/groups/{foreign['id']}")).json["group"][
        "member_count"] == 1


# --- fixed query counts -----------------------------------------------------------------------


async def _make_groups(world: World, owner: Member, others: list[Member], count: int) -> None:
    """`count` groups of every kind, each with several members and admins."""
    kinds: list[dict[str, Any]] = [
        {}, {"chat": True}, {"permission_mode": "private"},
        {"permission_mode": "private", "allow_access_request": True},
    ]
    for n in range(count):
        group = await world.group(owner, f"Bulk {n:03d}", members=tuple(others[:3]),
                                  admins=(others[3],), **kinds[n % len(kinds)])
        if n % 2:
            assert (await others[0].api.post(f"/api/groups/{group['id']}/pin")).status == 200


async def test_group_lists_run_a_fixed_number_of_queries(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    others = await world.many_users(admin, 4)
    await _make_groups(world, owner, others, 24)
    viewer = others[0]
    paths = [
        ("/api/groups", {}),
        ("/api/groups", {"include_private_requestable_groups": "true", "q": "bulk"}),
        ("/api/groups/search", {"q": "bulk"}),
        (f"/api/users/{owner.id}/groups", {}),
        ("/api/groups/mutual", {"user_id": owner.id}),
        ("/api/groups/pinned", {}),
        ("/api/group_memberships", {}),
    ]
    for path, params in paths:
        counts = {}
        for per_page in (1, 500):
            query_log.reset()
            resp = await viewer.api.get(path, params={**params, "per_page": per_page})
            assert resp.status == 200, resp.text
            key = "group_memberships" if "memberships" in path else "groups"
            counts[per_page] = (len(query_log), len(resp.json[key]))
        assert counts[1][1] == 1 and counts[500][1] >= 12, (path, counts)
        assert counts[1][0] == counts[500][0], (path, counts)
