"""Group memberships: the viewer's memberships, member lists, and what group admins change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import QueryLog
from tests.shapes import USER_EXTRAS
from tests.support import Member, World

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "socialcast"
CAPTURED_ADDED = json.loads((FIXTURES / "group_add_members.json").read_text())
FULL_USER_KEYS = [
    "contact_info", "manager", "custom_fields", "followable", "contact_id", "following_count",
    "followers_count", "status_message", "id", "name", "html_name", "url", "avatars",
    "username", "active", "terminated", "inactive", "role", "type", "title", "out_of_office",
    "back_in_office_on", "company_login", *USER_EXTRAS,
]


def user_ids(resp: Any) -> list[int]:
    assert resp.status == 200, resp.text
    return [u["id"] for u in resp.json["users"]]


async def members_of(api: Any, group_id: int) -> dict[int, str]:
    resp = await api.get(f"/api/groups/{group_id}/memberships", params={"per_page": 500})
    assert resp.status == 200, resp.text
    return {m["user_id"]: m["role_key"] for m in resp.json["group_memberships"]}


# --- GET /api/group_memberships ----------------------------------------------------------------


async def test_group_memberships_of_the_viewer(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    bob = await world.user(admin, "Bob")
    external = await world.user(admin, "Ext", role="external_contributor")
    led = await world.group(bob, "Bobs Own")
    joined = await world.group(owner, "Another", members=(bob,))
    partners = await world.group(owner, "Partners", members=(bob, external),
                                 permission_mode="external_contributor")
    await world.group(owner, "Not Bobs")
    resp = await bob.api.get("/api/group_memberships.json")
    assert resp.status == 200 and list(resp.json) == ["group_memberships"]
    entries = resp.json["group_memberships"]
    assert [list(e) for e in entries] == [["group", "role", "role_key"]] * 3
    assert [(e["group"]["id"], e["role"], e["role_key"]) for e in entries] == [
        (joined["id"], "Member", "member"), (led["id"], "Admin", "admin"),
        (partners["id"], "Member", "member"),
    ]
    assert entries[1]["group"]["role_key"] == "admin"
    ext = (await external.api.get("/api/group_memberships")).json["group_memberships"]
    assert [(e["group"]["id"], e["role"], e["role_key"]) for e in ext] == [
        (partners["id"], "External Contributor", "member")]
    paged = await bob.api.get("/api/group_memberships", params={"per_page": 1, "page": 3})
    assert [e["group"]["id"] for e in paged.json["group_memberships"]] == [partners["id"]]
    assert (await bob.api.get("/api/group_memberships", params={"page": "x"})).status == 400
    assert (await owner.api.get("/api/group_memberships")).status == 200


# --- GET /api/groups/:group_id/members -----------------------------------------------------------


async def test_members_list_roles_and_order(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Zed", "Owner")
    amy = await world.user(admin, "Amy", "Member")
    carl = await world.user(admin, "Carl", "Member")
    deputy = await world.user(admin, "Bea", "Deputy")
    group = await world.group(owner, "Team", members=(carl, amy), admins=(deputy,))
    url = f"/api/groups/{group['id']}/members"
    everyone = await amy.api.get(url)
    assert user_ids(everyone) == [amy.id, deputy.id, carl.id, owner.id]
    assert list(everyone.json["users"][0]) == FULL_USER_KEYS
    assert user_ids(await amy.api.get(url, params={"role": "member"})) == user_ids(everyone)
    assert user_ids(await amy.api.get(url, params={"role": "admin"})) == [deputy.id, owner.id]
    assert user_ids(await amy.api.get(url, params={"separate_roles": "true"})) == [
        deputy.id, owner.id, amy.id, carl.id]
    assert user_ids(await amy.api.get(url + ".json", params={
        "separate_roles": "true", "per_page": 2, "page": 2, "send_user_presence": "true",
    })) == [amy.id, carl.id]
    assert user_ids(await amy.api.get(url, params={"page": 5})) == []
    bad = await amy.api.get(url, params={"role": "boss"})
    assert bad.status == 422 and "role" in bad.json["fields"]
    assert (await amy.api.get(url, params={"per_page": "-1"})).status == 400


async def test_members_list_visibility_and_tenancy(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    stranger = await world.user(admin, "Stranger")
    secret = await world.group(owner, "Secret", permission_mode="private")
    club = await world.group(owner, "Club", permission_mode="private", allow_access_request=True)
    assert (await stranger.api.get(f"/api/groups/{secret['id']}/members")).status == 404
    forbidden = await stranger.api.get(f"/api/groups/{club['id']}/members")
    assert forbidden.status == 403 and forbidden.json["code"] == "forbidden"
    assert user_ids(await stranger.api.get(f"/api/groups/{club['id']}/members",
                                           params={"role": "admin"})) == [owner.id]
    # a community admin may list any group's members
    assert user_ids(await admin.api.get(f"/api/groups/{secret['id']}/members")) == [owner.id]
    other = await world.community("Other")
    assert (await other.api.get(f"/api/groups/{club['id']}/members",
                                params={"role": "admin"})).status == 404


# --- GET /api/groups/:group_id/memberships ------------------------------------------------------


async def test_memberships_list_by_id_or_groupname(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    bob = await world.user(admin, "Bob")
    group = await world.group(owner, "Monkey Puzzle", members=(bob,))
    by_id = await bob.api.get(f"/api/groups/{group['id']}/memberships")
    assert by_id.status == 200 and list(by_id.json) == ["group_memberships"]
    entries = by_id.json["group_memberships"]
    assert [list(e) for e in entries] == [["id", "user_id", "role", "role_key", "user"]] * 2
    assert [(e["user_id"], e["role"], e["role_key"], e["user"]["id"]) for e in entries] == [
        (bob.id, "Member", "member", bob.id), (owner.id, "Admin", "admin", owner.id)]
    assert list(entries[0]["user"]) == FULL_USER_KEYS
    for ref in ("MonkeyPuzzle", "monkeypuzzle", f"{group['id']}-monkeypuzzle"):
        resp = await bob.api.get(f"/api/groups/{ref}/memberships.json")
        assert resp.status == 200 and resp.json == by_id.json, ref
    separate = await bob.api.get("/api/groups/MonkeyPuzzle/memberships",
                                 params={"separate_roles": "1", "per_page": 1})
    assert [e["user_id"] for e in separate.json["group_memberships"]] == [owner.id]
    assert (await bob.api.get("/api/groups/NoSuchGroup/memberships")).status == 404
    other = await world.community("Other")
    assert (await other.api.get("/api/groups/MonkeyPuzzle/memberships")).status == 404
    assert (await other.api.get(f"/api/groups/{group['id']}/memberships")).status == 404


async def test_memberships_list_of_a_private_group(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    stranger = await world.user(admin, "Stranger")
    await world.group(owner, "Secret", permission_mode="private")
    await world.group(owner, "Club", permission_mode="private", allow_access_request=True)
    assert (await stranger.api.get("/api/groups/Secret/memberships")).status == 404
    assert (await stranger.api.get("/api/groups/Club/memberships")).status == 403
    assert (await owner.api.get("/api/groups/Club/memberships")).status == 200


# --- POST /api/groups/:group_id/memberships -------------------------------------------------


async def test_add_one_member(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    group = await world.group(owner, "Team")
    url = f"/api/groups/{group['id']}/memberships"
    resp = await owner.api.post(url, data={"group_membership[user_id]": str(bob.id)})
    assert resp.status == 201, resp.text
    added = resp.json["group_membership"]
    assert list(added) == ["id", "user_id", "role", "role_key", "user"]
    assert (added["user_id"], added["role"], added["role_key"]) == (bob.id, "Member", "member")
    assert added["user"]["id"] == bob.id
    promoted = await owner.api.post(url, json={
        "group_membership": {"user_id": carol.id, "role": "Admin"}})
    assert promoted.status == 201 and promoted.json["group_membership"]["role_key"] == "admin"
    assert await members_of(owner.api, group["id"]) == {
        owner.id: "admin", bob.id: "member", carol.id: "admin"}
    again = await owner.api.post(url, json={"group_membership": {"user_id": bob.id}})
    assert again.status == 409
    assert again.json["fields"] == {"group_membership[user_id]": ["is already a member"]}


async def test_add_one_member_refusals(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    member = await world.user(admin, "Member")
    bob = await world.user(admin, "Bob")
    external = await world.user(admin, "Ext", role="external_contributor")
    group = await world.group(owner, "Team", members=(member,))
    other = await world.community("Other")
    foreign_user = await world.user(other, "Foreigner")
    url = f"/api/groups/{group['id']}/memberships"

    def body(**fields: Any) -> dict[str, Any]:
        return {"json": {"group_membership": fields}}

    denied = await member.api.post(url, **body(user_id=bob.id))
    assert denied.status == 403 and denied.json["code"] == "forbidden"
    assert (await other.api.post(url, **body(user_id=foreign_user.id))).status == 404
    for fields, field in (
        ({}, "group_membership[user_id]"),
        ({"user_id": "abc"}, "group_membership[user_id]"),
        ({"user_id": bob.id, "role": "owner"}, "group_membership[role]"),
        ({"user_id": foreign_user.id}, "group_membership[user_id]"),
        ({"user_id": external.id}, "group_membership[user_id]"),
    ):
        resp = await owner.api.post(url, **body(**fields))
        assert resp.status == 422, (fields, resp.text)
        assert field in resp.json["fields"], resp.json
    missing = await owner.api.post(url, json={})
    assert missing.status == 422 and "group_membership" in missing.json["fields"]
    # a community admin counts as a group admin
    assert (await admin.api.post(url, **body(user_id=bob.id))).status == 201
    assert (await owner.api.delete(f"/api/groups/{group['id']}/archive")).status == 200
    archived = await owner.api.post(url, **body(user_id=admin.id))
    assert archived.status == 403
    archived_bulk = await owner.api.post(f"{url}/add_members", json={"group_memberships": [
        {"user_id": admin.id}, {"email": "new@example.com", "invite": "true"}]})
    assert archived_bulk.status == 403
    assert await members_of(owner.api, group["id"]) == {
        owner.id: "admin", member.id: "member", bob.id: "member"}


# --- POST /api/groups/:group_id/memberships/add_members --------------------------------------


async def test_add_members_answers_the_captured_shape(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol", email="carol@example.com")
    group = await world.group(owner, "Team")
    resp = await owner.api.post(
        f"/api/groups/{group['id']}/memberships/add_members.json",
        json={"group_memberships": [
            {"user_id": bob.id, "role": "member"},
            {"email": "def@vmware.com", "invite": "true", "role": "member"},
            {"email": "CAROL@example.com", "invite": "true", "role": "admin"},
            {"email": "jkl@vmware.com", "invite": True, "role": "admin"},
            {"user_id": str(owner.id), "role": "member"},
        ]},
    )
    assert resp.status == 201, resp.text
    assert list(resp.json) == list(CAPTURED_ADDED)
    got = resp.json["group_memberships"]
    captured = CAPTURED_ADDED["group_memberships"]
    assert [list(e) for e in got[:2]] == [list(e) for e in captured[:2]]
    assert list(got[2]) == list(captured[0])
    members = await members_of(owner.api, group["id"])
    assert got[0] == {"id": got[0]["id"], "user_id": bob.id, "role": "Member",
                      "role_key": "member"}
    assert got[1] == {"id": None, "user_id": None, "role": "Member", "role_key": "member",
                      "invite": "def@vmware.com"}
    # an e-mail address of a user adds that user
    assert (got[2]["user_id"], got[2]["role"], got[2]["role_key"]) == (carol.id, "Admin",
                                                                       "admin")
    assert got[3] == {"id": None, "user_id": None, "role": "Admin", "role_key": "admin",
                      "invite": "jkl@vmware.com"}
    # a member who already belongs keeps their role
    assert (got[4]["user_id"], got[4]["role_key"]) == (owner.id, "admin")
    assert members == {owner.id: "admin", bob.id: "member", carol.id: "admin"}
    listed = (await owner.api.get(f"/api/groups/{group['id']}/memberships")).json
    assert {m["user_id"]: m["id"] for m in listed["group_memberships"]} == {
        got[i]["user_id"]: got[i]["id"] for i in (0, 2, 4)}
    invitations = await world.pool.fetch(
        "SELECT email, role FROM group_invitations WHERE group_id = $1 ORDER BY email",
        group["id"],
    )
    assert [tuple(r) for r in invitations] == [("def@vmware.com", "member"),
                                                ("jkl@vmware.com", "admin")]


async def test_add_members_from_a_form_and_invite_again(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    bob = await world.user(admin, "Bob")
    group = await world.group(owner, "Team")
    url = f"/api/groups/{group['id']}/memberships/add_members"
    resp = await owner.api.post(url, data={
        "group_memberships[0][user_id]": str(bob.id), "group_memberships[0][role]": "admin",
        "group_memberships[1][email]": "new@example.com", "group_memberships[1][invite]": "true",
    })
    assert resp.status == 201, resp.text
    assert [(e["user_id"], e["role_key"]) for e in resp.json["group_memberships"]] == [
        (bob.id, "admin"), (None, "member")]
    again = await owner.api.post(url, json={"group_memberships": [
        {"email": "NEW@example.com", "invite": "true", "role": "admin"}]})
    assert again.status == 201
    assert again.json["group_memberships"][0]["invite"] == "NEW@example.com"
    rows = await world.pool.fetch(
        "SELECT email, role FROM group_invitations WHERE group_id = $1", group["id"]
    )
    assert [(r["email"], r["role"]) for r in rows] == [("new@example.com", "admin")]


@pytest.mark.parametrize(
    ("entries", "field"),
    [
        ([], "group_memberships"),
        ("nonsense", "group_memberships[0]"),
        ([{"role": "member"}], "group_memberships[0][user_id]"),
        ([{"user_id": 999999}], "group_memberships[0][user_id]"),
        ([{"user_id": "me"}], "group_memberships[0][user_id]"),
        ([{"email": "nobody@example.com"}], "group_memberships[0][email]"),
        ([{"email": "not an address", "invite": "true"}], "group_memberships[0][email]"),
        ([{"email": "x@example.com", "invite": "true", "role": "king"}],
         "group_memberships[0][role]"),
        ([{"email": "x@example.com", "invite": "true"}, {"user_id": 999999}],
         "group_memberships[1][user_id]"),
    ],
)
async def test_add_members_bad_input_adds_nobody(
    world: World, entries: Any, field: str
) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    group = await world.group(owner, "Team")
    resp = await owner.api.post(f"/api/groups/{group['id']}/memberships/add_members",
                                json={"group_memberships": entries})
    assert resp.status == 422, resp.text
    assert resp.json["code"] == "validation_failed" and resp.json["errors"]
    assert field in resp.json["fields"], resp.json
    assert await members_of(owner.api, group["id"]) == {owner.id: "admin"}
    invitations = await world.pool.fetchval(
        "SELECT count(*) FROM group_invitations WHERE group_id = $1", group["id"]
    )
    assert invitations == 0


async def test_add_members_permission_and_tenancy(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    member = await world.user(admin, "Member")
    bob = await world.user(admin, "Bob")
    external = await world.user(admin, "Ext", role="external_contributor")
    group = await world.group(owner, "Team", members=(member,))
    url = f"/api/groups/{group['id']}/memberships/add_members"
    body = {"json": {"group_memberships": [{"user_id": bob.id}]}}
    assert (await member.api.post(url, **body)).status == 403
    other = await world.community("Other")
    foreign = await world.user(other, "Foreigner")
    assert (await other.api.post(url, json={"group_memberships": [
        {"user_id": foreign.id}]})).status == 404
    outsider = await owner.api.post(url, json={"group_memberships": [{"user_id": foreign.id}]})
    assert outsider.status == 422
    ext = await owner.api.post(url, json={"group_memberships": [{"user_id": external.id}]})
    assert ext.status == 422 and "group_memberships[0][user_id]" in ext.json["fields"]
    assert await members_of(owner.api, group["id"]) == {owner.id: "admin", member.id: "member"}
    partners = await world.group(owner, "Partners", permission_mode="external_contributor")
    welcome = await owner.api.post(
        f"/api/groups/{partners['id']}/memberships/add_members",
        json={"group_memberships": [{"user_id": external.id}]},
    )
    assert welcome.status == 201
    assert welcome.json["group_memberships"][0]["role"] == "External Contributor"
    assert welcome.json["group_memberships"][0]["role_key"] == "member"


# --- PUT /api/groups/:group_id/memberships/:membership_id ---------------------------------------


async def test_change_a_members_role(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    bob = await world.user(admin, "Bob")
    group = await world.group(owner, "Team", members=(bob,))
    memberships = (await owner.api.get(f"/api/groups/{group['id']}/memberships")).json
    by_user = {m["user_id"]: m["id"] for m in memberships["group_memberships"]}
    url = f"/api/groups/{group['id']}/memberships"
    promoted = await owner.api.put(f"{url}/{by_user[bob.id]}",
                                   json={"group_membership": {"role": "admin"}})
    assert promoted.status == 200, promoted.text
    membership = promoted.json["group_membership"]
    assert (membership["id"], membership["user_id"], membership["role"],
            membership["role_key"]) == (by_user[bob.id], bob.id, "Admin", "admin")
    assert membership["user"]["id"] == bob.id
    shown = (await bob.api.get(f"/api/groups/{group['id']}")).json["group"]
    assert sorted(shown["admin_ids"]) == sorted([owner.id, bob.id])
    assert shown["can_administer"] is True
    demoted = await bob.api.put(f"{url}/{by_user[owner.id]}.json",
                                data={"group_membership[role]": "member"})
    assert demoted.status == 200 and demoted.json["group_membership"]["role_key"] == "member"
    # the last admin cannot be demoted
    last = await bob.api.put(f"{url}/{by_user[bob.id]}",
                             json={"group_membership": {"role": "member"}})
    assert last.status == 422 and "group_membership[role]" in last.json["fields"]
    assert await members_of(bob.api, group["id"]) == {owner.id: "member", bob.id: "admin"}


async def test_change_role_refusals(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    bob = await world.user(admin, "Bob")
    group = await world.group(owner, "Team", members=(bob,))
    elsewhere = await world.group(owner, "Elsewhere", members=(bob,))
    listed = (await owner.api.get(f"/api/groups/{group['id']}/memberships")).json
    bobs = next(m["id"] for m in listed["group_memberships"] if m["user_id"] == bob.id)
    url = f"/api/groups/{group['id']}/memberships/{bobs}"
    admin_role = {"json": {"group_membership": {"role": "admin"}}}
    assert (await bob.api.put(url, **admin_role)).status == 403
    other = await world.community("Other")
    assert (await other.api.put(url, **admin_role)).status == 404
    # a membership of another group is not found through this one
    wrong = await owner.api.put(f"/api/groups/{elsewhere['id']}/memberships/{bobs}",
                                **admin_role)
    assert wrong.status == 404
    assert (await owner.api.put(f"/api/groups/{group['id']}/memberships/x",
                                **admin_role)).status == 404
    for body in ({"group_membership": {"role": "chief"}}, {"group_membership": {}}, {}):
        resp = await owner.api.put(url, json=body)
        assert resp.status == 422, body
    assert await members_of(owner.api, group["id"]) == {owner.id: "admin", bob.id: "member"}


# --- DELETE /api/groups/:group_id/memberships -----------------------------------------------


async def test_remove_a_member(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    group = await world.group(owner, "Team", members=(bob, carol))
    url = f"/api/groups/{group['id']}/memberships"
    assert (await bob.api.delete(url, params={"user_id": carol.id})).status == 403
    other = await world.community("Other")
    assert (await other.api.delete(url, params={"user_id": carol.id})).status == 404
    gone = await owner.api.delete(url, params={"user_id": carol.id})
    assert gone.status == 204 and gone.text == ""
    assert await members_of(owner.api, group["id"]) == {owner.id: "admin", bob.id: "member"}
    assert (await owner.api.delete(url, params={"user_id": carol.id})).status == 404
    missing = await owner.api.delete(url)
    assert missing.status == 422 and "user_id" in missing.json["fields"]
    assert (await owner.api.delete(url, params={"user_id": "abc"})).status == 422
    last = await owner.api.delete(url, params={"user_id": owner.id})
    assert last.status == 422 and last.json["errors"] == ["A group must keep at least one admin"]
    # a community admin removes members too (JSON body works as well as the query)
    assert (await admin.api.delete(url + ".json", json={"user_id": bob.id})).status == 204
    assert await members_of(owner.api, group["id"]) == {owner.id: "admin"}


# --- fixed query counts -----------------------------------------------------------------------


async def test_member_lists_run_a_fixed_number_of_queries(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Aaron", "Owner", manager_id=admin.id)
    crowd = await world.many_users(admin, 40, manager_id=admin.id)
    group = await world.group(owner, "Crowd", members=tuple(crowd[:30]), admins=tuple(crowd[30:]))
    viewer: Member = crowd[0]
    for path, params, key in (
        (f"/api/groups/{group['id']}/members", {}, "users"),
        (f"/api/groups/{group['id']}/members", {"role": "admin"}, "users"),
        (f"/api/groups/{group['id']}/members", {"separate_roles": "true"}, "users"),
        ("/api/groups/Crowd/memberships", {}, "group_memberships"),
    ):
        counts = {}
        for per_page in (1, 500):
            query_log.reset()
            resp = await viewer.api.get(path, params={**params, "per_page": per_page})
            assert resp.status == 200, resp.text
            counts[per_page] = (len(query_log), len(resp.json[key]))
        assert counts[1][1] == 1 and counts[500][1] >= 10, (path, counts)
        assert counts[1][0] == counts[500][0], (path, counts)
