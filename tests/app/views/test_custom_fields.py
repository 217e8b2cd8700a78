"""Custom profile fields: admin-only writes, plain or wrapped parameters, values on profiles."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import World


async def test_custom_field_crud(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    assert (await bob.api.get("/api/custom_fields")).json == {"custom_fields": []}
    plain = await admin.api.post("/api/custom_fields", json={"name": "Department", "order": 2})
    assert plain.status == 201, plain.text
    assert list(plain.json) == ["custom_field"]
    dept = plain.json["custom_field"]
    assert list(dept) == ["id", "name", "order"]
    assert isinstance(dept["id"], int)
    assert (dept["name"], dept["order"]) == ("Department", 2)
    wrapped = await admin.api.post("/api/custom_fields.json",
                                   data={"custom_field[name]": "Location",
                                         "custom_field[order]": "1"})
    assert wrapped.status == 201, wrapped.text
    loc = wrapped.json["custom_field"]
    assert (loc["name"], loc["order"]) == ("Location", 1)
    auto = await admin.api.post("/api/custom_fields", data={"name": " Floor "})
    floor = auto.json["custom_field"]
    assert (floor["name"], floor["order"]) == ("Floor", 3)  # after the last one

    listed = await bob.api.get("/api/custom_fields")
    assert listed.status == 200
    assert listed.json == {"custom_fields": [loc, dept, floor]}  # by order
    shown = await bob.api.get(f"/api/custom_fields/{dept['id']}")
    assert shown.status == 200 and shown.json == {"custom_field": dept}

    renamed = await admin.api.put(f"/api/custom_fields/{dept['id']}",
                                  json={"custom_field": {"name": "Division"}})
    assert renamed.status == 200
    assert renamed.json == {"custom_field": {**dept, "name": "Division"}}
    moved = await admin.api.put(f"/api/custom_fields/{dept['id']}.json", data={"order": "9"})
    assert moved.json["custom_field"] == {**dept, "name": "Division", "order": 9}
    assert (await bob.api.get(f"/api/custom_fields/{dept['id']}")).json["custom_field"] == {
        **dept, "name": "Division", "order": 9}

    deleted = await admin.api.delete(f"/api/custom_fields/{dept['id']}")
    assert deleted.status == 204 and deleted.text == ""
    assert (await bob.api.get(f"/api/custom_fields/{dept['id']}")).status == 404
    assert (await admin.api.delete(f"/api/custom_fields/{dept['id']}")).status == 404
    assert [f["id"] for f in (await bob.api.get("/api/custom_fields")).json["custom_fields"]] \
        == [loc["id"], floor["id"]]


async def test_members_cannot_write_custom_fields(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    field = (await admin.api.post("/api/custom_fields", json={"name": "Dept"})).json[
        "custom_field"]
    for method, path, body in (
        ("POST", "/api/custom_fields", {"name": "Mine"}),
        ("PUT", f"/api/custom_fields/{field['id']}", {"name": "Mine"}),
        ("DELETE", f"/api/custom_fields/{field['id']}", None),
    ):
        resp = await bob.api.request(method, path, json=body)
        assert resp.status == 403, (method, resp.text)
        assert resp.json["code"] == "forbidden"
    assert (await bob.api.get("/api/custom_fields")).json == {"custom_fields": [field]}


async def test_duplicate_names_conflict(world: World) -> None:
    admin = await world.community()
    await admin.api.post("/api/custom_fields", json={"name": "Dept"})
    other = (await admin.api.post("/api/custom_fields", json={"name": "Team"})).json[
        "custom_field"]
    dup = await admin.api.post("/api/custom_fields", json={"name": "DEPT"})
    assert dup.status == 409
    assert dup.json["code"] == "conflict"
    assert dup.json["fields"] == {"name": ["has already been taken"]}
    rename = await admin.api.put(f"/api/custom_fields/{other['id']}", json={"name": "dept"})
    assert rename.status == 409
    assert len((await admin.api.get("/api/custom_fields")).json["custom_fields"]) == 2
    # another community may use the same name
    second = await world.community("Second")
    assert (await second.api.post("/api/custom_fields", json={"name": "Dept"})).status == 201


@pytest.mark.parametrize(
    "body",
    [{}, {"name": ""}, {"name": "   "}, {"custom_field": {"order": 1}}, {"name": "x" * 101},
     {"name": "Ok", "order": "first"}, {"name": "Ok", "order": -1}],
)
async def test_invalid_custom_fields(world: World, body: dict[str, Any]) -> None:
    admin = await world.community()
    resp = await admin.api.post("/api/custom_fields", json=body)
    assert resp.status == 422, resp.text
    assert resp.json["code"] == "validation_failed"
    assert set(resp.json["fields"]) <= {"name", "order"}
    assert (await admin.api.get("/api/custom_fields")).json == {"custom_fields": []}


async def test_blank_name_on_update_is_invalid(world: World) -> None:
    admin = await world.community()
    field = (await admin.api.post("/api/custom_fields", json={"name": "Dept"})).json[
        "custom_field"]
    resp = await admin.api.put(f"/api/custom_fields/{field['id']}", json={"name": " "})
    assert resp.status == 422
    assert (await admin.api.get(f"/api/custom_fields/{field['id']}")).json["custom_field"] \
        == field


async def test_values_show_on_profiles_in_field_order(world: World) -> None:
    admin = await world.community()
    ids = {}
    for name, order in (("Location", 2), ("Department", 1), ("Floor", 3)):
        resp = await admin.api.post("/api/custom_fields", json={"name": name, "order": order})
        ids[name] = resp.json["custom_field"]["id"]
    bob = await world.user(admin, "Bob")
    resp = await admin.api.put(f"/api/users/{bob.id}", data={
        f"user[custom_fields][{ids['Location']}]": "Lisbon",
        f"user[custom_fields][{ids['Department']}]": "R&D",
    })
    assert resp.status == 200, resp.text
    expected = [
        {"id": str(ids["Department"]), "value": "R&D", "label": "Department"},
        {"id": str(ids["Location"]), "value": "Lisbon", "label": "Location"},
    ]
    assert resp.json["user"]["custom_fields"] == expected
    for item in expected:
        assert list(item) == ["id", "value", "label"]
    profile = await bob.api.get("/api/userinfo")
    assert profile.json["user"]["custom_fields"] == expected
    # renaming and reordering the field shows at once
    await admin.api.put(f"/api/custom_fields/{ids['Location']}",
                        json={"name": "Office", "order": 0})
    listed = await admin.api.get("/api/users", params={"email": bob.email})
    assert listed.json["users"][0]["custom_fields"] == [
        {"id": str(ids["Location"]), "value": "Lisbon", "label": "Office"},
        {"id": str(ids["Department"]), "value": "R&D", "label": "Department"},
    ]
    # deleting the field removes its values
    await admin.api.delete(f"/api/custom_fields/{ids['Location']}")
    again = await admin.api.get(f"/api/users/{bob.id}")
    assert again.json["user"]["custom_fields"] == [expected[0]]


async def test_custom_fields_of_another_community_are_404(world: World) -> None:
    a = await world.community("Alpha")
    b = await world.community("Beta")
    theirs = (await b.api.post("/api/custom_fields", json={"name": "Secret"})).json[
        "custom_field"]
    for method, body in (("GET", None), ("PUT", {"name": "Mine"}), ("DELETE", None)):
        resp = await a.api.request(method, f"/api/custom_fields/{theirs['id']}", json=body)
        assert resp.status == 404, (method, resp.text)
    assert (await a.api.get("/api/custom_fields")).json == {"custom_fields": []}
    # nor can their values be set through a user of A
    bob = await world.user(a, "Bob")
    resp = await a.api.put(f"/api/users/{bob.id}",
                           json={"user": {"custom_fields": {str(theirs["id"]): "x"}}})
    assert resp.status == 422
    assert (await b.api.get(f"/api/custom_fields/{theirs['id']}")).json["custom_field"] == theirs
    # and Beta's credentials do not work at Alpha's host
    cross = a.api.as_user(b.email)
    assert (await cross.get(f"/api/custom_fields/{theirs['id']}")).status == 401
