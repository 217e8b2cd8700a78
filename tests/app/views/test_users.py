"""Users: the directory, profiles, search, admin management, shapes and tenancy."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from app.actions.users import CONTACT_VALUE_MAX, CUSTOM_VALUE_MAX
from app.passwords import Passwords
from storage import users as user_storage
from tests.conftest import TEST_ARGON2, QueryLog
from tests.shapes import USER_EXTRAS, assert_keys, captured_keys
from tests.support import PASSWORD, Member, World

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "socialcast"
SEARCH_FIXTURE = json.loads((FIXTURES / "users_search.json").read_text())
# the captured keys, then what interface.md lists that they lack (decisions.md)
CAPTURED_FULL_KEYS = list(SEARCH_FIXTURE["users"][0])
FULL_KEYS = [*CAPTURED_FULL_KEYS, *USER_EXTRAS]
EMBEDDED_KEYS = [*captured_keys("User — embedded"), *USER_EXTRAS]
AVATAR_KEYS = list(SEARCH_FIXTURE["users"][0]["avatars"])
SIZES = ["square16", "square30", "square45", "square70", "square140"]


def _assert_same_types(ours: Any, theirs: Any, where: str = "user") -> None:
    """Our value has the fixture's JSON type (null may stand for a string that is unset)."""
    if theirs is None or ours is None:
        return
    assert type(ours) is type(theirs), (where, ours, theirs)
    if isinstance(theirs, dict) and where.endswith("avatars"):
        assert list(ours) == list(theirs), where


def assert_full_user(user: dict[str, Any]) -> None:
    assert list(user) == FULL_KEYS
    for key in CAPTURED_FULL_KEYS:
        _assert_same_types(user[key], SEARCH_FIXTURE["users"][0][key], key)
    assert list(user["contact_info"])[-1] in ("email", "location")
    assert user["type"] == "User"
    assert list(user["avatars"]) == AVATAR_KEYS
    if user["manager"] is not None:
        assert list(user["manager"]) == EMBEDDED_KEYS


async def _set_state(world: World, member: Member, state: str) -> None:
    async with world.pool.acquire() as conn:
        await user_storage.set_state(conn, member.community.id, member.id, state)


async def _custom_field(admin: Member, name: str, order: int | None = None) -> int:
    body: dict[str, Any] = {"name": name}
    if order is not None:
        body["order"] = order
    resp = await admin.api.post("/api/custom_fields", json=body)
    assert resp.status == 201, resp.text
    return int(resp.json["custom_field"]["id"])


# --- shapes --------------------------------------------------------------------------------------


async def test_a_page_shows_each_users_own_manager(world: World) -> None:
    """Managers are rendered once per page: rows that share one show it, the others theirs."""
    admin = await world.community("Acme")
    grace = await world.user(admin, "Grace", "Hopper", title="Admiral")
    ada = await world.user(admin, "Ada", "Lovelace")
    amy = await world.user(admin, "Amy", "Cooper", manager_id=grace.id)
    bob = await world.user(admin, "Bob", "Baker", manager_id=grace.id)
    cat = await world.user(admin, "Cat", "Clark", manager_id=ada.id)
    resp = await admin.api.get("/api/users", params={"per_page": "50"})
    assert resp.status == 200
    managers = {u["id"]: u["manager"] for u in resp.json["users"]}
    assert managers[amy.id] == managers[bob.id]
    assert (managers[amy.id]["id"], managers[amy.id]["name"], managers[amy.id]["title"]) == (
        grace.id, "Grace Hopper", "Admiral")
    assert (managers[cat.id]["id"], managers[cat.id]["name"]) == (ada.id, "Ada Lovelace")
    assert managers[grace.id] is None and managers[ada.id] is None
    for user in resp.json["users"]:
        assert_full_user(user)


async def test_full_user_has_the_23_keys_of_the_real_search_response(world: World) -> None:
    admin = await world.community("Acme")
    boss = await world.user(admin, "Grace", "Hopper")
    amy = await world.user(admin, "Amy", "Cooper", manager_id=boss.id, title="Engineer")
    resp = await admin.api.get(f"/api/users/{amy.id}")
    assert resp.status == 200
    assert list(resp.json) == ["user"]
    user = resp.json["user"]
    assert_full_user(user)
    base = admin.community.base_url
    assert user["id"] == amy.id
    assert user["name"] == user["html_name"] == "Amy Cooper"
    assert user["url"] == f"{base}/users/{amy.id}-{amy.username.lower()}"
    assert user["contact_info"] == {"email": amy.email}
    assert user["manager"]["id"] == boss.id
    assert list(user["manager"]) == EMBEDDED_KEYS
    assert user["manager"]["name"] == "Grace Hopper"
    assert user["custom_fields"] == []
    assert user["followable"] is True
    assert user["contact_id"] is None
    assert (user["following_count"], user["followers_count"]) == (0, 0)
    assert user["status_message"] is None
    assert (user["active"], user["terminated"], user["inactive"]) == (True, False, False)
    assert user["role"] == "member"
    assert user["title"] == "Engineer"
    assert (user["out_of_office"], user["back_in_office_on"], user["company_login"]) == (
        False, None, None)
    # you cannot follow yourself
    me = await amy.api.get(f"/api/users/{amy.id}")
    assert me.json["user"]["followable"] is False


async def test_html_name_is_escaped(world: World) -> None:
    admin = await world.community()
    odd = await world.user(admin, "<b>Tom</b>", "& Jerry")
    user = (await admin.api.get(f"/api/users/{odd.id}")).json["user"]
    assert user["name"] == "<b>Tom</b> & Jerry"
    assert user["html_name"] == "&lt;b&gt;Tom&lt;/b&gt; &amp; Jerry"


async def test_default_avatars_are_served(world: World) -> None:
    admin = await world.community()
    user = (await admin.api.get("/api/userinfo")).json["user"]
    avatars = user["avatars"]
    assert list(avatars) == ["is_system_default", "id", *SIZES]
    assert avatars["is_system_default"] is True and avatars["id"] is None
    base = admin.community.base_url
    sizes = set()
    for size in SIZES:
        url = avatars[size]
        assert url == f"{base}/assets/avatars/default_user_{size}.png"
        # no credentials needed
        async with world.client.get(url[len(base):],
                                    headers={"Host": admin.community.domain}) as raw:
            assert raw.status == 200, url
            assert raw.headers["Content-Type"] == "image/png"
            data = await raw.read()
            assert data[:8] == b"\x89PNG\r\n\x1a\n"
            sizes.add(len(data))
    assert len(sizes) > 1  # five distinct images


# --- GET /api/users --------------------------------------------------------------------------


async def test_list_users_by_state(world: World) -> None:
    admin = await world.community()
    active = await world.user(admin, "Active")
    gone = await world.user(admin, "Gone")
    fired = await world.user(admin, "Fired")
    await _set_state(world, gone, "inactive")
    await _set_state(world, fired, "terminated")

    async def ids(**params: str) -> list[int]:
        resp = await admin.api.get("/api/users", params=params)
        assert resp.status == 200, resp.text
        assert list(resp.json) == ["users"]
        for user in resp.json["users"]:
            assert_full_user(user)
        return [u["id"] for u in resp.json["users"]]

    assert await ids() == [admin.id, active.id]
    assert await ids(state="active") == [admin.id, active.id]
    assert await ids(state="inactive") == [gone.id]
    assert await ids(state="terminated") == [fired.id]
    assert await ids(state="all") == [admin.id, active.id, gone.id, fired.id]
    terminated = (await admin.api.get("/api/users", params={"state": "terminated"})).json
    assert terminated["users"][0]["terminated"] is True
    assert terminated["users"][0]["inactive"] is True
    assert terminated["users"][0]["active"] is False
    bad = await admin.api.get("/api/users", params={"state": "sleeping"})
    assert bad.status == 422
    assert "state" in bad.json["fields"]


async def test_list_users_by_email(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    ben = await world.user(admin, "Ben")
    await world.user(admin, "Cat")
    one = await admin.api.get("/api/users", params={"email": ann.email.upper()})
    assert [u["id"] for u in one.json["users"]] == [ann.id]
    both = await admin.api.get(f"/api/users?email[]={ann.email}&email[]={ben.email}")
    assert [u["id"] for u in both.json["users"]] == [ann.id, ben.id]
    json_list = await admin.api.get("/api/users", params=[("email[]", ben.email)])
    assert [u["id"] for u in json_list.json["users"]] == [ben.id]
    nobody = await admin.api.get("/api/users", params={"email": "nobody@nowhere.example"})
    assert nobody.json == {"users": []}
    blank = await admin.api.get("/api/users", params={"email": ""})  # blank means absent
    assert len(blank.json["users"]) == 4


async def test_list_users_runs_a_fixed_number_of_queries(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()
    field_a = await _custom_field(admin, "Department")
    field_b = await _custom_field(admin, "Location")
    boss = await world.user(admin, "Boss")
    people = await world.many_users(admin, 600, manager_id=boss.id)
    async with world.pool.acquire() as conn:
        # every user, the admin included, has a manager and custom values
        await conn.execute("UPDATE users SET manager_id = $1 WHERE id = $2", boss.id, admin.id)
        await conn.executemany(
            "INSERT INTO custom_field_values (user_id, custom_field_id, value) "
            "VALUES ($1, $2, $3)",
            [(p.id, f, "x") for p in people[:300] for f in (field_a, field_b)]
            + [(admin.id, field_a, "HQ")],
        )
        for p in people[::7]:
            await conn.execute(
                "INSERT INTO follows (community_id, follower_id, followed_id) "
                "VALUES ($1, $2, $3)", admin.community.id, p.id, boss.id)
    await admin.api.get("/api/userinfo")  # community resolved and cached
    counts = {}
    for per_page in (1, 500):
        query_log.reset()
        resp = await admin.api.get("/api/users", params={"per_page": str(per_page)})
        assert resp.status == 200
        assert len(resp.json["users"]) == per_page
        counts[per_page] = len(query_log)
    assert counts[1] == counts[500], counts
    statements = [q for q in query_log if "pg_advisory_unlock_all" not in q]  # pool resets
    # login, the page's keys, the rows of the users whose forms are not kept (each user's
    # manager and custom field values come with them): one statement for any number
    assert len(statements) == 3, statements
    page = (await admin.api.get("/api/users", params={"per_page": "500"})).json["users"]
    assert page[0]["custom_fields"] == [{"id": str(field_a), "value": "HQ",
                                         "label": "Department"}]
    assert all(u["manager"]["id"] == boss.id for u in page if u["id"] != boss.id)
    assert next(u for u in page if u["id"] == boss.id)["followers_count"] == len(people[::7])


async def test_list_users_shows_each_change_at_once(world: World) -> None:
    """Pages share the forms of the users they show (app.actions.users.listed_users), by the
    very values shown: a change is on the next page, and each viewer sees their own."""
    admin = await world.community()
    bob = await world.user(admin, "Bob")

    async def shown(member: Member, user_id: int) -> dict[str, Any]:
        resp = await member.api.get("/api/users")
        assert resp.status == 200, resp.text
        return next(u for u in resp.json["users"] if u["id"] == user_id)

    assert (await shown(admin, bob.id))["status_message"] is None
    resp = await bob.api.put(f"/api/users/{bob.id}", json={"user": {"status_message": "out"}})
    assert resp.status == 200, resp.text
    assert (await shown(admin, bob.id))["status_message"] == "out"
    assert (await shown(admin, bob.id))["followable"] is True
    assert (await shown(bob, bob.id))["followable"] is False
    assert (await admin.api.post(f"/api/users/{bob.id}/followers")).status == 201
    assert (await shown(admin, bob.id))["followable"] is False
    assert (await shown(bob, bob.id))["followers_count"] == 1


# --- GET /api/users/:id ------------------------------------------------------------------------


async def test_show_user_and_missing_ids(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    resp = await bob.api.get(f"/api/users/{admin.id}")
    assert resp.status == 200 and resp.json["user"]["role"] == "tenant_admin"
    for path in ("/api/users/999999", "/api/users/abc", "/api/users/0"):
        missing = await bob.api.get(path)
        assert missing.status == 404
        assert missing.json["code"] == "not_found"
    # a deactivated user still has a profile
    await admin.api.delete(f"/api/users/{bob.id}")
    gone = await admin.api.get(f"/api/users/{bob.id}")
    assert gone.status == 200 and gone.json["user"]["inactive"] is True


# --- POST /api/users ---------------------------------------------------------------------------


async def test_admin_creates_a_user_who_can_then_log_in(world: World) -> None:
    admin = await world.community()
    boss = await world.user(admin, "Boss")
    dept = await _custom_field(admin, "Department")
    resp = await admin.api.post("/api/users.json", json={"user": {
        "first_name": "Dana", "last_name": "Scully", "email": "Dana@X.example",
        "password": "trust no one", "title": "Agent", "manager_id": str(boss.id),
        "company_login": "dscully", "custom_fields": {str(dept): "X-Files"},
    }})
    assert resp.status == 201, resp.text
    assert list(resp.json) == ["user"]
    user = resp.json["user"]
    assert_full_user(user)
    assert user["name"] == "Dana Scully"
    assert user["username"] == "DanaScully"
    assert user["title"] == "Agent"
    assert user["company_login"] == "dscully"
    assert user["manager"]["id"] == boss.id
    assert user["role"] == "member"
    assert user["custom_fields"] == [{"id": str(dept), "value": "X-Files",
                                      "label": "Department"}]
    assert user["contact_info"] == {"email": "Dana@X.example"}
    dana = admin.api.as_user("dana@x.example", "trust no one")
    me = await dana.get("/api/userinfo")
    assert me.status == 200
    # userinfo also carries the community, as its last key (decisions.md "Shapes")
    assert me.json["user"] == {**user, "followable": False,
                               "community": me.json["user"]["community"]}
    by_username = await admin.api.as_user("danascully", "trust no one").get("/api/userinfo")
    assert by_username.status == 200
    # read back through the API
    listed = await admin.api.get("/api/users", params={"email": "dana@x.example"})
    assert listed.json["users"] == [user]
    employees = await admin.api.get(f"/api/users/{boss.id}/employees")
    assert [u["id"] for u in employees.json["users"]] == [user["id"]]


async def test_create_user_with_a_form_body(world: World) -> None:
    admin = await world.community()
    dept = await _custom_field(admin, "Department")
    resp = await admin.api.post("/api/users", data={
        "user[first_name]": "Fox", "user[last_name]": "Mulder", "user[email]": "fox@x.example",
        "user[username]": "spooky", "user[password]": "i want to believe",
        "user[role]": "admin", f"user[custom_fields][{dept}]": "Basement",
    })
    assert resp.status == 201, resp.text
    user = resp.json["user"]
    assert user["username"] == "spooky"
    assert user["role"] == "tenant_admin"
    assert user["custom_fields"][0]["value"] == "Basement"
    fox = admin.api.as_user("spooky", "i want to believe")
    assert (await fox.post("/api/custom_fields", json={"name": "Rank"})).status == 201


async def test_usernames_are_made_unique(world: World) -> None:
    admin = await world.community()
    first = await admin.api.post("/api/users", json={"user": {
        "first_name": "Sam", "last_name": "Lee", "email": "sam1@x.example"}})
    second = await admin.api.post("/api/users", json={"user": {
        "first_name": "Sam", "last_name": "Lee", "email": "sam2@x.example"}})
    assert first.json["user"]["username"] == "SamLee"
    assert second.json["user"]["username"] == "SamLee2"
    long = await admin.api.post("/api/users", json={"user": {
        "first_name": "A" * 100, "last_name": "B" * 100, "email": "long@x.example"}})
    assert long.status == 201
    username = long.json["user"]["username"]
    assert 0 < len(username) <= 60
    same = await admin.api.put(f"/api/users/{long.json['user']['id']}",
                               json={"user": {"username": username}})
    assert same.status == 200, same.text
    # a user created without a password cannot log in
    nopass = admin.api.as_user("sam1@x.example", "")
    assert (await nopass.get("/api/userinfo")).status == 401


async def test_only_admins_create_users(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    resp = await bob.api.post("/api/users", json={"user": {"email": "new@x.example",
                                                           "password": PASSWORD}})
    assert resp.status == 403
    assert resp.json["code"] == "forbidden"
    listed = await admin.api.get("/api/users", params={"email": "new@x.example"})
    assert listed.json["users"] == []


async def test_create_user_conflicts(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob", username="bobby")
    taken_email = await admin.api.post("/api/users", json={"user": {
        "email": bob.email.upper(), "password": PASSWORD}})
    assert taken_email.status == 409
    assert taken_email.json["code"] == "conflict"
    assert taken_email.json["fields"] == {"user[email]": ["has already been taken"]}
    assert taken_email.json["errors"] == ["Email has already been taken"]
    taken_username = await admin.api.post("/api/users", json={"user": {
        "email": "other@x.example", "username": "BOBBY", "password": PASSWORD}})
    assert taken_username.status == 409
    assert taken_username.json["fields"] == {"user[username]": ["has already been taken"]}
    # the same e-mail in another community is fine
    other = await world.community("Other")
    again = await other.api.post("/api/users", json={"user": {"email": bob.email,
                                                              "username": "bobby"}})
    assert again.status == 201


@pytest.mark.parametrize(
    ("user", "field"),
    [
        ({"email": "not-an-email"}, "user[email]"),
        ({"email": "a b@x.example"}, "user[email]"),
        ({}, "user"),  # names no field
        ({"email": "ok@x.example", "password": "short"}, "user[password]"),
        ({"email": "ok@x.example", "role": "overlord"}, "user[role]"),
        ({"email": "ok@x.example", "username": "no spaces"}, "user[username]"),
        ({"email": "ok@x.example", "manager_id": "999999"}, "user[manager_id]"),
        ({"email": "ok@x.example", "manager_id": "boss"}, "user[manager_id]"),
        ({"email": "ok@x.example", "custom_fields": {"999999": "x"}},
         "user[custom_fields][999999]"),
    ],
)
async def test_create_user_invalid(world: World, user: dict[str, Any], field: str) -> None:
    admin = await world.community()
    resp = await admin.api.post("/api/users", json={"user": user})
    assert resp.status == 422, resp.text
    assert resp.json["code"] == "validation_failed"
    assert field in resp.json["fields"]
    assert (await admin.api.get("/api/users", params={"email": "ok@x.example"})).json == {
        "users": []}


async def test_manager_of_another_community_is_invalid(world: World) -> None:
    admin = await world.community()
    other = await world.community("Other")
    resp = await admin.api.post("/api/users", json={"user": {
        "email": "ok@x.example", "manager_id": other.id}})
    assert resp.status == 422
    assert "user[manager_id]" in resp.json["fields"]


# --- PUT /api/users/:id ------------------------------------------------------------------------


async def test_update_self(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob", "Old")
    dept = await _custom_field(admin, "Department")
    resp = await bob.api.put(f"/api/users/{bob.id}", json={"user": {
        "last_name": "New", "title": "Lead", "status_message": "Out fishing",
        "contact_info": {"cell_phone": "555-1234", "location": "Lisbon"},
        "custom_fields": {str(dept): "R&D"},
    }})
    assert resp.status == 200, resp.text
    user = resp.json["user"]
    assert_full_user(user)
    assert user["name"] == "Bob New"
    assert user["title"] == "Lead"
    assert user["status_message"] == "Out fishing"
    assert user["contact_info"] == {"cell_phone": "555-1234", "email": bob.email,
                                    "location": "Lisbon"}
    assert user["custom_fields"] == [{"id": str(dept), "value": "R&D", "label": "Department"}]
    again = await admin.api.get(f"/api/users/{bob.id}")
    assert again.json["user"] == {**user, "followable": True}
    # an empty value removes a custom field value; "" clears the title
    cleared = await bob.api.put(f"/api/users/{bob.id}", data={
        f"user[custom_fields][{dept}]": "", "user[title]": ""})
    assert cleared.json["user"]["custom_fields"] == []
    assert cleared.json["user"]["title"] is None
    assert cleared.json["user"]["name"] == "Bob New"


async def test_profile_details_are_bounded_and_only_known_contact_keys_kept(
    world: World,
) -> None:
    """Contact details and custom values are the user's own to write: each is bounded (a 422
    naming it, nothing of the request written), and contact keys no profile shows are dropped
    rather than stored."""
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    dept = await _custom_field(admin, "Department")
    kept = await bob.api.put(f"/api/users/{bob.id}", json={"user": {"contact_info": {
        "location": "L" * CONTACT_VALUE_MAX, "payload": "never shown", "email": "x@evil.example",
        "skype": ""}}})
    assert kept.status == 200, kept.text
    assert kept.json["user"]["contact_info"] == {"email": bob.email,
                                                 "location": "L" * CONTACT_VALUE_MAX}
    stored = await world.pool.fetchval("SELECT contact_info FROM users WHERE id = $1", bob.id)
    assert stored == {"location": "L" * CONTACT_VALUE_MAX}

    too_long = await bob.api.put(f"/api/users/{bob.id}", json={"user": {
        "title": "Lead", "contact_info": {"location": "L" * (CONTACT_VALUE_MAX + 1)}}})
    assert too_long.status == 422, too_long.text
    assert list(too_long.json["fields"]) == ["user[contact_info][location]"]
    value = await bob.api.put(f"/api/users/{bob.id}", json={"user": {
        "title": "Lead", "custom_fields": {str(dept): "D" * (CUSTOM_VALUE_MAX + 1)}}})
    assert value.status == 422, value.text
    assert list(value.json["fields"]) == [f"user[custom_fields][{dept}]"]
    created = await admin.api.post("/api/users", json={"user": {
        "email": "carol@x.example", "first_name": "Carol",
        "contact_info": {"cell_phone": "5" * (CONTACT_VALUE_MAX + 1)}}})
    assert created.status == 422, created.text
    assert list(created.json["fields"]) == ["user[contact_info][cell_phone]"]
    user = (await admin.api.get(f"/api/users/{bob.id}")).json["user"]
    assert user["title"] is None and user["custom_fields"] == []
    assert user["contact_info"] == {"email": bob.email, "location": "L" * CONTACT_VALUE_MAX}
    assert (await admin.api.get("/api/users?email=carol@x.example")).json["users"] == []


async def test_admin_updates_others_members_do_not(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    eve = await world.user(admin, "Eve")
    by_admin = await admin.api.put(f"/api/users/{bob.id}", json={"user": {"title": "CTO"}})
    assert by_admin.status == 200 and by_admin.json["user"]["title"] == "CTO"
    by_eve = await eve.api.put(f"/api/users/{bob.id}", json={"user": {"title": "Intern"}})
    assert by_eve.status == 403
    assert by_eve.json["code"] == "forbidden"
    assert (await admin.api.get(f"/api/users/{bob.id}")).json["user"]["title"] == "CTO"


async def test_only_admins_change_roles(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    selfish = await bob.api.put(f"/api/users/{bob.id}", json={"user": {"role": "tenant_admin"}})
    assert selfish.status == 403
    assert (await bob.api.get("/api/userinfo")).json["user"]["role"] == "member"
    promoted = await admin.api.put(f"/api/users/{bob.id}", json={"user": {"role": "admin"}})
    assert promoted.status == 200 and promoted.json["user"]["role"] == "tenant_admin"
    assert (await bob.api.get("/api/userinfo")).json["user"]["role"] == "tenant_admin"
    bad = await admin.api.put(f"/api/users/{bob.id}", json={"user": {"role": "king"}})
    assert bad.status == 422
    # the last admin cannot step down
    await admin.api.put(f"/api/users/{bob.id}", json={"user": {"role": "member"}})
    last = await admin.api.put(f"/api/users/{admin.id}", json={"user": {"role": "member"}})
    assert last.status == 422
    assert (await admin.api.get("/api/userinfo")).json["user"]["role"] == "tenant_admin"


async def test_update_conflicts_and_invalid(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob", username="bob")
    eve = await world.user(admin, "Eve", username="eve")
    taken = await eve.api.put(f"/api/users/{eve.id}", json={"user": {"username": "BOB"}})
    assert taken.status == 409
    assert taken.json["fields"] == {"user[username]": ["has already been taken"]}
    email = await eve.api.put(f"/api/users/{eve.id}", json={"user": {
        "email": bob.email, "current_password": PASSWORD}})
    assert email.status == 409
    bad = await eve.api.put(f"/api/users/{eve.id}", json={"user": {"email": "nope"}})
    assert bad.status == 422
    assert (await eve.api.get("/api/userinfo")).json["user"]["username"] == "eve"


async def test_manager_changes_and_cycles(world: World) -> None:
    admin = await world.community()
    a = await world.user(admin, "A")
    b = await world.user(admin, "B", manager_id=a.id)
    c = await world.user(admin, "C", manager_id=b.id)
    cycle = await admin.api.put(f"/api/users/{a.id}", json={"user": {"manager_id": c.id}})
    assert cycle.status == 422
    assert "user[manager_id]" in cycle.json["fields"]
    own = await admin.api.put(f"/api/users/{a.id}", json={"user": {"manager_id": a.id}})
    assert own.status == 422
    assert (await admin.api.get(f"/api/users/{a.id}")).json["user"]["manager"] is None
    moved = await admin.api.put(f"/api/users/{c.id}", json={"user": {"manager_id": a.id}})
    assert moved.json["user"]["manager"]["id"] == a.id
    cleared = await admin.api.put(f"/api/users/{c.id}", data={"user[manager_id]": ""})
    assert cleared.status == 200 and cleared.json["user"]["manager"] is None
    assert (await admin.api.get(f"/api/users/{b.id}/employees")).json == {"users": []}


async def test_password_change_retires_the_old_password(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    assert (await bob.api.get("/api/userinfo")).status == 200  # now in the credentials cache
    short = await bob.api.put(f"/api/users/{bob.id}", json={"user": {"password": "tiny"}})
    assert short.status == 422
    resp = await bob.api.put(f"/api/users/{bob.id}", json={"user": {
        "password": "a new secret", "current_password": PASSWORD}})
    assert resp.status == 200
    assert (await bob.api.get("/api/userinfo")).status == 401
    new = bob.api.as_user(bob.email, "a new secret")
    assert (await new.get("/api/userinfo")).status == 200
    # an admin resets it
    reset = await admin.api.put(f"/api/users/{bob.id}", json={"user": {"password": "reset pw!"}})
    assert reset.status == 200
    assert (await new.get("/api/userinfo")).status == 401
    assert (await bob.api.as_user(bob.email, "reset pw!").get("/api/userinfo")).status == 200


async def test_credentials_cache_never_outlives_the_stored_hash() -> None:
    """Another process's cache is not cleared by forget_all: the stored hash is in the key."""
    passwords = Passwords(TEST_ARGON2)
    old_hash = await passwords.hash("old password")
    new_hash = await passwords.hash("new password")
    assert await passwords.verify(7, old_hash, "old password", epoch=0)
    assert await passwords.verify(7, old_hash, "old password", epoch=0)  # cached
    assert not await passwords.verify(7, new_hash, "old password", epoch=0)
    assert not await passwords.verify(8, old_hash, "wrong", epoch=0)
    assert await passwords.verify(7, new_hash, "new password", epoch=0)
    assert not await passwords.verify(7, None, "new password", epoch=0)
    assert not await passwords.verify(7, new_hash, "", epoch=0)


# --- DELETE /api/users/:id -----------------------------------------------------------------


async def test_deactivate_user(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    eve = await world.user(admin, "Eve")
    assert (await bob.api.get("/api/userinfo")).status == 200
    by_member = await eve.api.delete(f"/api/users/{bob.id}")
    assert by_member.status == 403
    resp = await admin.api.delete(f"/api/users/{bob.id}")
    assert resp.status == 200
    user = resp.json["user"]
    assert_full_user(user)
    assert (user["active"], user["inactive"], user["terminated"]) == (False, True, False)
    assert user["followable"] is False
    denied = await bob.api.get("/api/userinfo")
    assert denied.status == 401
    assert (await bob.api.as_user(bob.username).get("/api/users")).status == 401
    listed = await admin.api.get("/api/users")
    assert bob.id not in [u["id"] for u in listed.json["users"]]
    inactive = await admin.api.get("/api/users", params={"state": "inactive"})
    assert [u["id"] for u in inactive.json["users"]] == [bob.id]


async def test_last_admin_cannot_be_deactivated(world: World) -> None:
    admin = await world.community()
    resp = await admin.api.delete(f"/api/users/{admin.id}")
    assert resp.status == 422
    assert resp.json["code"] == "validation_failed"
    assert (await admin.api.get("/api/userinfo")).status == 200
    second = await world.user(admin, "Second", role="tenant_admin")
    assert (await second.api.delete(f"/api/users/{admin.id}")).status == 200
    assert (await admin.api.get("/api/userinfo")).status == 401
    assert (await second.api.delete(f"/api/users/{second.id}")).status == 422


# --- search, suggest, company login, employees -------------------------------------------------


async def test_search_by_word_prefix(world: World) -> None:
    admin = await world.community()
    amy = await world.user(admin, "Amy", "Cooper")
    amos = await world.user(admin, "Amos", "Burton")
    await world.user(admin, "Georgia", "Ingersoll")

    async def found(q: str) -> list[int]:
        resp = await admin.api.get("/api/users/search", params={"q": q})
        assert resp.status == 200, resp.text
        for user in resp.json["users"]:
            assert_full_user(user)
        return [u["id"] for u in resp.json["users"]]

    assert await found("am") == [amos.id, amy.id]  # ordered by name
    assert await found("Coo") == [amy.id]
    assert await found("amy coop") == [amy.id]
    assert await found("amy burton") == []
    assert await found("ooper") == []  # prefixes, not substrings
    assert await found(amy.email.split("@")[0][:3]) == [amy.id]
    assert await found("") == []
    assert await found("'\\&|!():*") == []
    assert await found("zzz") == []


async def test_search_by_emails_joined_with_or_includes_inactive_users(world: World) -> None:
    """The form real clients send: `q=<email> or <email>` (users_search.json)."""
    admin = await world.community()
    amy = await world.user(admin, "Amy", "Cooper", email="abc@vmware.example")
    georgia = await world.user(admin, "Georgia", "Ingersoll", email="ghi+x@vmware.example")
    await world.user(admin, "Other", "Person", email="xyz@vmware.example")
    await admin.api.delete(f"/api/users/{georgia.id}")
    resp = await admin.api.get("/api/users/search.json",
                               params={"q": "abc@vmware.example or GHI+x@vmware.example"})
    assert resp.status == 200
    users = resp.json["users"]
    assert [u["id"] for u in users] == [amy.id, georgia.id]
    for ours, theirs in zip(users, SEARCH_FIXTURE["users"], strict=True):
        assert list(ours) == [*theirs, *USER_EXTRAS]
        for key in ("manager", "custom_fields", "followable", "contact_id", "following_count",
                    "followers_count", "status_message", "active", "terminated", "inactive",
                    "role", "type", "title", "out_of_office", "back_in_office_on",
                    "company_login"):
            assert ours[key] == theirs[key], key
        assert ours["avatars"]["is_system_default"] is True
        assert ours["avatars"]["id"] is None
    # suggest leaves the deactivated user out
    suggested = await admin.api.get("/api/users/suggest",
                                    params={"q": "abc@vmware.example or ghi+x@vmware.example"})
    assert [u["id"] for u in suggested.json["users"]] == [amy.id]


async def test_suggest_matches_prefixes_of_active_users(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Annabel", "Lee")
    anna = await world.user(admin, "Anna", "Karenina")
    await admin.api.delete(f"/api/users/{anna.id}")
    resp = await admin.api.get("/api/users/suggest.json", params={"q": "ann"})
    assert resp.status == 200
    assert [u["id"] for u in resp.json["users"]] == [ann.id]
    paged = await admin.api.get("/api/users/search", params={"q": "ann", "per_page": "1",
                                                             "page": "2"})
    assert [u["id"] for u in paged.json["users"]] == [ann.id]


async def test_show_by_company_login(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob", company_login="BStone")
    resp = await admin.api.get("/api/users/company_login/bstone")
    assert resp.status == 200
    assert_full_user(resp.json["user"])
    assert resp.json["user"]["id"] == bob.id
    assert resp.json["user"]["company_login"] == "BStone"
    json_form = await admin.api.get("/api/users/company_login/BStone.json")
    assert json_form.json == resp.json
    assert (await admin.api.get("/api/users/company_login/nobody")).status == 404


async def test_employees(world: World) -> None:
    admin = await world.community()
    boss = await world.user(admin, "Boss")
    a = await world.user(admin, "A", manager_id=boss.id)
    b = await world.user(admin, "B", manager_id=boss.id)
    await world.user(admin, "C", manager_id=a.id)  # not a direct report
    gone = await world.user(admin, "Gone", manager_id=boss.id)
    await admin.api.delete(f"/api/users/{gone.id}")
    resp = await a.api.get(f"/api/users/{boss.id}/employees")
    assert resp.status == 200
    assert [u["id"] for u in resp.json["users"]] == [a.id, b.id]
    for user in resp.json["users"]:
        assert_full_user(user)
        assert user["manager"]["id"] == boss.id
    assert (await a.api.get("/api/users/999999/employees")).status == 404


async def test_employees_and_search_run_a_fixed_number_of_queries(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()
    boss = await world.user(admin, "Boss")
    await world.many_users(admin, 120, manager_id=boss.id)
    await admin.api.get("/api/userinfo")
    for path in (f"/api/users/{boss.id}/employees", "/api/users/search?q=user",
                 "/api/users/suggest?q=number"):
        counts = []
        for per_page in (1, 500):
            query_log.reset()
            sep = "&" if "?" in path else "?"
            resp = await admin.api.get(f"{path}{sep}per_page={per_page}")
            assert len(resp.json["users"]) == min(per_page, 120), path
            counts.append(len(query_log))
        assert counts[0] == counts[1], (path, counts)


# --- tenancy -----------------------------------------------------------------------------------

ID_ROUTES = [
    ("GET", "/api/users/{id}"),
    ("PUT", "/api/users/{id}"),
    ("DELETE", "/api/users/{id}"),
    ("GET", "/api/users/{id}/employees"),
    ("GET", "/api/users/{id}/followers"),
    ("POST", "/api/users/{id}/followers"),
    ("GET", "/api/users/{id}/following"),
    ("DELETE", "/api/users/{id}/followers/{me}"),
    ("DELETE", "/api/users/{me}/following/{id}"),
]


@pytest.mark.parametrize(("method", "template"), ID_ROUTES)
async def test_users_of_another_community_are_404(
    world: World, method: str, template: str
) -> None:
    a_admin = await world.community("Alpha")
    a_member = await world.user(a_admin, "Ann")
    b_admin = await world.community("Beta")
    b_user = await world.user(b_admin, "Bea", company_login="bea")
    await b_user.api.post(f"/api/users/{b_admin.id}/followers")
    for viewer in (a_admin, a_member):
        path = template.format(id=b_user.id, me=viewer.id)
        resp = await viewer.api.request(method, path, json={"user": {"title": "Hacked"}})
        assert resp.status == 404, (viewer.username, method, path, resp.text)
        assert resp.json["code"] == "not_found"
    company = await a_admin.api.get("/api/users/company_login/bea")
    assert company.status == 404
    search = await a_admin.api.get("/api/users/search", params={"q": "bea"})
    assert search.json == {"users": []}
    listed = await a_admin.api.get("/api/users", params={"email": b_user.email, "state": "all"})
    assert listed.json == {"users": []}
    # nothing changed in Beta
    seen = await b_admin.api.get(f"/api/users/{b_user.id}")
    assert seen.json["user"]["title"] is None
    assert seen.json["user"]["active"] is True
    assert seen.json["user"]["following_count"] == 1


@pytest.mark.parametrize(("method", "template"), ID_ROUTES)
async def test_credentials_of_one_community_are_401_at_another_host(
    world: World, method: str, template: str
) -> None:
    a_admin = await world.community("Alpha")
    b_admin = await world.community("Beta")
    b_user = await world.user(b_admin, "Bea")
    cross = b_admin.api.as_user(a_admin.email)  # Beta's host, Alpha's credentials
    path = template.format(id=b_user.id, me=a_admin.id)
    resp = await cross.request(method, path, json={"user": {"title": "Hacked"}})
    assert resp.status == 401, resp.text
    assert resp.headers["WWW-Authenticate"] == 'Basic realm="Beta"'
    assert (await b_admin.api.get(f"/api/users/{b_user.id}")).json["user"]["title"] is None


async def test_unknown_host_is_404_once_there_are_two_communities(world: World) -> None:
    admin = await world.community("Solo")
    roaming = admin.api.anonymous()
    roaming.host = "anything.example"
    roaming.login, roaming.password = admin.email, PASSWORD
    assert (await roaming.get("/api/userinfo")).status == 200  # the sole community
    await world.community("Second")
    resp = await roaming.get("/api/userinfo")
    assert resp.status == 404
    assert resp.json["code"] == "not_found"


async def test_two_admins_deactivating_each_other_at_once_leave_one(world: World) -> None:
    for _ in range(5):
        admin = await world.community()
        other = await world.user(admin, "Other", role="tenant_admin")
        first, second = await asyncio.gather(
            admin.api.delete(f"/api/users/{other.id}"),
            other.api.delete(f"/api/users/{admin.id}"),
        )
        assert sorted([first.status, second.status]) in ([200, 401], [200, 422]), (
            first.text, second.text)
        active = await world.pool.fetchval(
            "SELECT count(*) FROM users WHERE community_id = $1 AND role = 'tenant_admin' "
            "AND state = 'active'", admin.community.id)
        assert active == 1


async def test_a_session_cookie_works_only_at_its_own_community(world: World) -> None:
    alpha = await world.community("Alpha")
    beta = await world.community("Beta")
    bob = await world.user(alpha, "Bob")
    login = await bob.api.anonymous().post("/api/authentication",
                                           json={"email": bob.email, "password": PASSWORD})
    assert login.status == 200
    # the test client keeps the cookie and sends it to every host name
    assert (await alpha.api.anonymous().get("/api/userinfo")).json["user"]["id"] == bob.id
    elsewhere = await beta.api.anonymous().get("/api/userinfo")
    assert elsewhere.status == 401
    assert elsewhere.headers["WWW-Authenticate"] == 'Basic realm="Beta"'
    # a deactivated user's session ends too
    assert (await alpha.api.delete(f"/api/users/{bob.id}")).status == 200
    assert (await alpha.api.anonymous().get("/api/userinfo")).status == 401


async def test_the_other_user_forms(world: World) -> None:
    """Like, recipient and conversation-member forms, rendered from the same row."""
    from app.render.users import conversation_member, embedded_user, like_user, recipient_user

    admin = await world.community()
    bob = await world.user(admin, "Bob", "Stone", title="Eng")
    base = admin.community.base_url
    row = await user_storage.by_id(world.pool, admin.community.id, bob.id)
    assert row is not None
    embedded = embedded_user(row, base)
    assert list(embedded) == EMBEDDED_KEYS
    full = (await admin.api.get(f"/api/users/{bob.id}")).json["user"]
    assert embedded == {k: full[k] for k in EMBEDDED_KEYS}
    assert like_user(row, base) == {"id": bob.id, "name": "Bob Stone", "url": full["url"]}
    recipient = recipient_user(row, base)
    assert_keys(recipient, "User — as a message recipient", USER_EXTRAS)
    assert (recipient["first_name"], recipient["last_name"]) == ("Bob", "Stone")
    assert recipient["out_of_office_on"] is None
    assert recipient["mention_name"] == bob.username
    member = conversation_member(row, base)
    assert list(member) == ["id", "name", "email", "cell_phone", "office_phone", "first_name",
                            "last_name", "profile_photo", "inactive", "terminated"]
    assert member["profile_photo"] == {
        "height": 70, "width": 70, "url": f"{base}/assets/avatars/default_user_square70.png",
        "is_system_default": True}


# --- changing one's own e-mail or password (issue 8, defects 1 and 2) -----------------------


async def test_own_email_or_password_change_needs_the_current_password(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    path = f"/api/users/{bob.id}"
    for change in ({"email": "bob.elsewhere@example.com"}, {"password": "a new secret"}):
        missing = await bob.api.put(path, json={"user": change})
        assert missing.status == 422
        assert missing.json["fields"] == {"user[current_password]": ["can't be blank"]}
        wrong = await bob.api.put(path, json={"user": {**change, "current_password": "guess!"}})
        assert wrong.status == 403
        assert wrong.json["code"] == "forbidden"
    assert (await bob.api.get("/api/userinfo")).status == 200  # same e-mail and password
    # the same address again, or other fields, need nothing
    same = await bob.api.put(path, json={"user": {"email": bob.email.upper(), "title": "Cook"}})
    assert same.status == 200
    ok = await bob.api.put(path, data={"user[email]": "bob2@example.com",
                                       "user[current_password]": PASSWORD})
    assert ok.status == 200
    assert (await bob.api.as_user("bob2@example.com").get("/api/userinfo")).status == 200
    # an admin changing someone else's needs none; changing their own does
    assert (await admin.api.put(path, json={"user": {"password": "set by admin"}})).status == 200
    own = await admin.api.put(f"/api/users/{admin.id}", json={"user": {"password": "xxxxxxxxx"}})
    assert own.status == 422


async def test_current_password_guesses_are_throttled_with_failed_logins(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    await _start_of_a_fresh_minute()
    for _ in range(10):
        wrong = await bob.api.put(f"/api/users/{bob.id}", json={"user": {
            "password": "a new secret", "current_password": "guess"}})
        assert wrong.status == 403
    limited = await bob.api.put(f"/api/users/{bob.id}", json={"user": {
        "password": "a new secret", "current_password": PASSWORD}})
    assert limited.status == 429


async def _start_of_a_fresh_minute() -> None:
    left = 60 - __import__("time").time() % 60
    if left < 8:
        await asyncio.sleep(left + 0.1)


async def _session(world: World, member: Member, password: str = PASSWORD) -> Any:
    """A second client of its own (its own cookie jar) logged in by POST /api/authentication."""
    from aiohttp import ClientSession, CookieJar

    server = world.client.server
    jar = CookieJar(unsafe=True, treat_as_secure_origin=[server.make_url("/")])
    session = ClientSession(base_url=server.make_url(""), cookie_jar=jar,
                            headers={"Host": member.community.domain})
    resp = await session.post("/api/authentication",
                              json={"email": member.email, "password": password})
    assert resp.status == 200
    return session


async def test_password_change_ends_every_other_session(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    laptop = await _session(world, bob)
    phone = await _session(world, bob)
    try:
        assert (await laptop.get("/api/userinfo")).status == 200
        assert (await phone.get("/api/userinfo")).status == 200
        changed = await laptop.put(f"/api/users/{bob.id}", json={"user": {
            "password": "a new secret", "current_password": PASSWORD}})
        assert changed.status == 200
        # the session that changed it goes on; the other one (and its cookie) is refused
        assert (await laptop.get("/api/userinfo")).status == 200
        assert (await phone.get("/api/userinfo")).status == 401
        assert (await bob.api.get("/api/userinfo")).status == 401  # old Basic password
        # an admin's reset ends the changer's session too
        reset = await admin.api.put(f"/api/users/{bob.id}", json={"user": {
            "password": "reset by admin"}})
        assert reset.status == 200
        assert (await laptop.get("/api/userinfo")).status == 401
    finally:
        await laptop.close()
        await phone.close()


async def test_an_old_session_cookie_replayed_after_a_password_change_is_refused(
    world: World,
) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    browser = await _session(world, bob)
    try:
        cookie = browser.cookie_jar.filter_cookies(world.client.server.make_url("/"))
        stolen = {k: v.value for k, v in cookie.items()}
        assert "commons_session" in stolen
        changed = await bob.api.put(f"/api/users/{bob.id}", json={"user": {
            "password": "a new secret", "current_password": PASSWORD}})
        assert changed.status == 200
        replay = await bob.api.anonymous().get(
            "/api/userinfo",
            headers={"Cookie": f"commons_session={stolen['commons_session']}"})
        assert replay.status == 401
    finally:
        await browser.close()


async def test_password_change_evicts_the_users_cached_credentials() -> None:
    passwords = Passwords(TEST_ARGON2)
    stored = await passwords.hash("the password")
    other = await passwords.hash("other password")
    assert await passwords.verify(7, stored, "the password", epoch=0)
    assert await passwords.verify(8, other, "other password", epoch=0)
    assert len(passwords._cache) == 2
    passwords.forget_user(7)
    assert len(passwords._cache) == 1
    assert await passwords.verify(8, other, "other password", epoch=0)
