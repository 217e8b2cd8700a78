"""app.actions.users.listed_users: the full forms of the users list pages, kept under their
users' versions and follow counts (storage.users.KEYS), rendered from LISTED rows (contact_info
and custom values as JSON text) when not kept."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from app.actions import users as actions
from app.context import Viewer
from app.render.users import CONTACT_KEYS
from app.responses import dumps
from storage import users
from storage.rows import ListedKeyRow
from tests.support import Member, World


async def listed(world: World, viewer: Member) -> list[ListedKeyRow]:
    """GET /api/users' keys of every active user, as `viewer` reads them."""
    return await users.list_users(
        world.pool, viewer.community.id, viewer.id, states=("active",), emails=None,
        offset=0, limit=50,
    )


def viewer_of(member: Member) -> Viewer:
    return Viewer(id=member.id, community_id=member.community.id, role=member.row["role"])


async def page(world: World, viewer: Member) -> list[orjson.Fragment]:
    """listed_users of those rows: the JSON of GET /api/users' users."""
    return await actions.listed_users(world.pool, viewer_of(viewer), await listed(world, viewer),
                                      viewer.community.base_url)


def parsed(forms: list[orjson.Fragment]) -> list[dict[str, Any]]:
    return [orjson.loads(dumps(form)) for form in forms]


async def _profiled_team(world: World) -> tuple[Member, Member, Member]:
    """An admin, a manager, and a member with contact details, two custom values and the
    manager; the admin follows the member."""
    admin = await world.community()
    boss = await world.user(admin, "Grace", "Hopper", title="Admiral")
    amy = await world.user(admin, "Amy", "<Cooper>", manager_id=boss.id,
                           contact_info={"location": "Lisbon", "skype": "amy.c"})
    fields = []
    for name in ("Department", "Desk"):
        resp = await admin.api.post("/api/custom_fields", json={"name": name})
        assert resp.status == 201, resp.text
        fields.append(resp.json["custom_field"]["id"])
    resp = await admin.api.put(f"/api/users/{amy.id}", json={"user": {"custom_fields": {
        fields[0]: "R&D", fields[1]: "4.2"}}})
    assert resp.status == 200, resp.text
    assert (await admin.api.post(f"/api/users/{amy.id}/followers")).status == 201
    return admin, boss, amy


async def test_a_listed_row_renders_as_the_full_row_of_the_same_user(world: World) -> None:
    admin, boss, amy = await _profiled_team(world)
    base = admin.community.base_url
    for viewer in (admin, amy):
        rows = await listed(world, viewer)
        assert [r["id"] for r in rows] == [admin.id, boss.id, amy.id]
        full = [await actions.full_user_row(world.pool, viewer_of(viewer), r["id"]) for r in rows]
        expected = await actions.full_users(world.pool, viewer_of(viewer), full, base)
        for _ in range(2):  # rendered, then kept
            forms = await actions.listed_users(world.pool, viewer_of(viewer), rows, base)
            assert dumps(forms) == dumps(expected)
    shown = parsed(await page(world, admin))[2]
    assert shown["contact_info"] == {"skype": "amy.c", "email": amy.email, "location": "Lisbon"}
    assert [(f["label"], f["value"]) for f in shown["custom_fields"]] == [
        ("Department", "R&D"), ("Desk", "4.2")]
    assert shown["manager"]["name"] == "Grace Hopper"
    assert shown["html_name"] == "Amy &lt;Cooper&gt;"


async def test_a_form_is_shared_while_its_row_reads_the_same(world: World) -> None:
    admin, _, amy = await _profiled_team(world)
    first = await page(world, admin)
    again = await page(world, admin)
    assert all(a is b for a, b in zip(first, again, strict=True))  # rendered once
    # Amy shares the admin's form of the manager, whom neither follows; the admin is
    # followable to her, not to themselves; she is not followable to herself, nor to the
    # admin, who follows her: the same JSON from two rows, two forms
    seen_by_amy = await page(world, amy)
    assert seen_by_amy[1] is first[1]
    assert [u["followable"] for u in parsed([first[0], seen_by_amy[0]])] == [False, True]
    assert dumps(seen_by_amy[2]) == dumps(first[2]) and seen_by_amy[2] is not first[2]


@pytest.mark.parametrize("change", [
    {"first_name": "Amelia"},
    {"contact_info": {"location": "Porto"}},
    {"status_message": "away"},
    {"title": "Chief"},
])
async def test_any_change_of_a_row_renders_afresh(world: World, change: dict[str, Any]) -> None:
    admin, _, amy = await _profiled_team(world)
    before = (await page(world, admin))[2]
    resp = await admin.api.put(f"/api/users/{amy.id}", json={"user": change})
    assert resp.status == 200, resp.text
    after = (await page(world, admin))[2]
    assert dumps(after) != dumps(before)
    # exactly as GET /api/users/:id renders the changed user
    assert dumps(after) == dumps(resp.json["user"])


async def test_a_change_of_the_manager_or_a_follow_renders_afresh(world: World) -> None:
    admin, boss, amy = await _profiled_team(world)
    before = parsed(await page(world, admin))[2]
    resp = await admin.api.put(f"/api/users/{boss.id}", json={"user": {"last_name": "Cooper"}})
    assert resp.status == 200, resp.text
    renamed = parsed(await page(world, admin))[2]
    assert (before["manager"]["name"], renamed["manager"]["name"]) == (
        "Grace Hopper", "Grace Cooper")
    assert (await admin.api.delete(f"/api/users/{admin.id}/following/{amy.id}")).status == 204
    unfollowed = parsed(await page(world, admin))[2]
    assert (renamed["followable"], renamed["followers_count"]) == (False, 1)
    assert (unfollowed["followable"], unfollowed["followers_count"]) == (True, 0)


async def test_a_change_of_custom_values_or_fields_or_a_follower_renders_afresh(
    world: World,
) -> None:
    """What a full form shows of other rows than the user's: their custom values (the values'
    version, migration 0022), the fields' names and order (the directory's), who follows
    them (the counts, read with the page's keys)."""
    admin, boss, amy = await _profiled_team(world)
    fields = [f["id"] for f in (await admin.api.get("/api/custom_fields")).json["custom_fields"]]

    async def shown() -> dict[str, Any]:
        return parsed(await page(world, admin))[2]

    assert (await shown())["custom_fields"][0]["value"] == "R&D"
    resp = await admin.api.put(f"/api/users/{amy.id}", json={"user": {"custom_fields": {
        fields[0]: "Sales"}}})
    assert resp.status == 200, resp.text
    after = await shown()
    assert after["custom_fields"][0]["value"] == "Sales"
    assert after == orjson.loads(dumps(resp.json["user"]))
    renamed = await admin.api.put(f"/api/custom_fields/{fields[0]}",
                                  json={"custom_field": {"name": "Team"}})
    assert renamed.status == 200, renamed.text
    assert [f["label"] for f in (await shown())["custom_fields"]] == ["Team", "Desk"]
    moved = await admin.api.put(f"/api/custom_fields/{fields[0]}",
                                json={"custom_field": {"order": 5}})
    assert moved.status == 200, moved.text
    assert [f["label"] for f in (await shown())["custom_fields"]] == ["Desk", "Team"]
    deleted = await admin.api.delete(f"/api/custom_fields/{fields[1]}")
    assert deleted.status in (200, 204), deleted.text
    assert [f["label"] for f in (await shown())["custom_fields"]] == ["Team"]
    assert (await shown())["followers_count"] == 1
    assert (await boss.api.post(f"/api/users/{amy.id}/followers")).status == 201
    assert (await shown())["followers_count"] == 2
    # the same again, now as every form is kept
    again = parsed(await page(world, admin))
    full = [await actions.full_user_row(world.pool, viewer_of(admin), u["id"]) for u in again]
    expected = await actions.full_users(world.pool, viewer_of(admin), full,
                                        admin.community.base_url)
    assert again == [orjson.loads(dumps(u)) for u in expected]


async def test_the_shared_forms_are_bounded(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin, boss, amy = await _profiled_team(world)
    monkeypatch.setattr(actions, "LISTED_FORMS_SIZE", 2)
    monkeypatch.setattr(actions, "_LISTED_FORMS", {})
    assert [u["id"] for u in parsed(await page(world, admin))] == [admin.id, boss.id, amy.id]
    assert len(actions._LISTED_FORMS) <= 2


async def test_a_row_with_long_json_is_rendered_but_not_kept(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Contact info and custom values are the user's to write, each value bounded but not their
    sum: a row whose JSON is long is no key to keep (2,048 of them would pin tens of megabytes),
    only rendered."""
    admin, _, amy = await _profiled_team(world)
    monkeypatch.setattr(actions, "_LISTED_FORMS", {})
    longest = actions.CONTACT_VALUE_MAX * "x"
    fields = [f["id"] for f in (await admin.api.get("/api/custom_fields")).json["custom_fields"]]
    resp = await amy.api.put(f"/api/users/{amy.id}", json={"user": {
        "contact_info": dict.fromkeys(CONTACT_KEYS, longest),
        "custom_fields": dict.fromkeys(fields, actions.CUSTOM_VALUE_MAX * "y")}})
    assert resp.status == 200, resp.text
    assert len(dumps(resp.json["user"]["contact_info"])) + 2 * actions.CUSTOM_VALUE_MAX \
        > actions.MAX_CACHED_JSON
    shown = parsed(await page(world, admin))
    assert [u["id"] for u in shown][2] == amy.id
    assert shown[2] == orjson.loads(dumps(resp.json["user"]))
    kept = {key[2] for key in actions._LISTED_FORMS}
    assert amy.id not in kept and admin.id in kept


async def test_a_kept_forms_key_covers_every_column_it_is_rendered_from(world: World) -> None:
    """A tripwire: LISTED_BY_IDS reads the user's own columns (the row's version covers them),
    the manager's embedded ones (the directory's), the custom values (their own), the counts and
    the viewer's follow (the key's own). A column from anywhere else needs a version of its own
    in storage.users.KEYS before it is added here."""
    admin, _, amy = await _profiled_team(world)
    rows = await users.listed_by_ids(world.pool, admin.community.id, admin.id, [amy.id])
    assert set(rows[0].keys()) == (
        set(users.BASIC_NAMES) | {f"mgr_{f}" for f in users.MANAGER_FIELDS}
        | {"following_count", "followers_count", "viewer_follows", "custom_values",
           "row_version", "values_version", "directory_version"})
    keys = await listed(world, admin)
    assert set(keys[0].keys()) == {"id", "row_version", "values_version", "directory_version",
                                   "following_count", "followers_count", "viewer_follows"}
