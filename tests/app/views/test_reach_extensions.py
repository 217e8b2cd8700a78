"""Reach extensions (reach admin): the JSON shape and defaults, every validation rule, updates,
permissions and tenancy."""

from __future__ import annotations

from typing import Any

from storage import reach_extensions as extension_storage
from tests.conftest import QueryLog
from tests.support import Member, World

COLOR_KEYS = [
    "reach_border_color", "reach_poweredby_bg", "reach_entry_border_color", "reach_comment_bg",
    "reach_default_text", "reach_secondary_text", "reach_default_link", "reach_secondary_link",
    "reach_button_border", "reach_button_color", "reach_button_bgcolor",
    "reach_button_inner_border", "reach_button_border_hover", "reach_button_bgcolor_hover",
    "reach_button_textshadow", "reach_social_button_border", "reach_social_button_text",
    "reach_social_button_background", "reach_separator_color",
]
EXTENSION_KEYS = [
    "id", "name", "external_system_id", "group_id", "url", "permanent_url", "extension_type",
    "stream_type", "button_type", "install_type", "state", "button_verb", "profile_heading",
    "days_ago", "login_required", "token", "reach_border_style", *COLOR_KEYS,
    "container_id", "container_type", "reach_extension_tag_filters",
    "reach_extension_user_filters",
]


async def make_system(admin: Member, name: str = "Intranet") -> int:
    resp = await admin.api.post("/api/external_systems", json={"external_system": {
        "name": name, "url": "https://intranet.example"}})
    assert resp.status == 201, resp.text
    system_id: int = resp.json["external_system"]["id"]
    return system_id


async def create(admin: Member, status: int = 201, **params: Any) -> Any:
    resp = await admin.api.post("/api/reach_extensions", json={"reach_extension": params})
    assert resp.status == status, resp.text
    return resp.json


async def test_create_a_discussion_extension_with_defaults(world: World) -> None:
    admin = await world.community()
    base = admin.community.base_url
    system_id = await make_system(admin)
    body = await create(admin, name="Page discussion", external_system_id=system_id,
                        button_type="icon_and_verb")
    assert list(body) == ["reach_extension"]
    ext = body["reach_extension"]
    assert list(ext) == EXTENSION_KEYS
    assert isinstance(ext["id"], int)
    assert ext["name"] == "Page discussion"
    assert ext["external_system_id"] == system_id
    assert ext["group_id"] is None
    assert ext["url"] == f"{base}/api/reach_extensions/{ext['id']}"
    assert ext["permanent_url"] == f"{base}/reach_extensions/{ext['id']}"
    assert ext["extension_type"] == "discussion"
    assert ext["stream_type"] is None
    assert ext["button_type"] == "icon_and_verb"
    assert ext["install_type"] == "html"
    assert ext["state"] == "active"
    assert ext["button_verb"] == "recommend"
    assert ext["profile_heading"] is False
    assert ext["days_ago"] == 7
    assert ext["login_required"] is True
    assert isinstance(ext["token"], str) and len(ext["token"]) >= 20
    assert ext["reach_border_style"] == "solid"
    for key in COLOR_KEYS:
        assert isinstance(ext[key], str) and len(ext[key]) == 7 and ext[key][0] == "#", key
    assert ext["reach_button_color"] == "#ffffff"
    assert ext["container_id"] is None and ext["container_type"] is None
    assert ext["reach_extension_tag_filters"] == []
    assert ext["reach_extension_user_filters"] == []

    shown = await admin.api.get(f"/api/reach_extensions/{ext['id']}.json")
    assert shown.status == 200 and shown.json == {"reach_extension": ext}
    listed = await admin.api.get("/api/reach_extensions")
    assert listed.json == {"reach_extensions": [ext]}
    other = await create(admin, name="Second", external_system_id=system_id, button_type="verb")
    assert other["reach_extension"]["token"] != ext["token"]


async def test_every_setting(world: World) -> None:
    admin = await world.community()
    system_id = await make_system(admin)
    group = await world.group(admin, "Support")
    ext = (await create(
        admin, name="Help button", external_system_id=system_id, container_id=group["id"],
        container_type="Group", extension_type="discussion", button_verb="ask_for_help",
        button_type="icon", install_type="sharepoint", days_ago=30, login_required=False,
        reach_border_style="dashed", reach_border_color="#ABC",
        reach_button_bgcolor="#10A0FF", reach_separator_color="123456",
    ))["reach_extension"]
    assert (ext["group_id"], ext["container_id"], ext["container_type"]) == (
        group["id"], group["id"], "Group")
    assert (ext["button_verb"], ext["button_type"], ext["install_type"]) == (
        "ask_for_help", "icon", "sharepoint")
    assert (ext["days_ago"], ext["login_required"], ext["reach_border_style"]) == (
        30, False, "dashed")
    assert ext["reach_border_color"] == "#aabbcc"
    assert ext["reach_button_bgcolor"] == "#10a0ff"
    assert ext["reach_separator_color"] == "#123456"
    assert (await admin.api.get(f"/api/reach_extensions/{ext['id']}")).json[
        "reach_extension"] == ext


async def test_streams_and_their_filters(world: World) -> None:
    admin = await world.community()
    alice = await world.user(admin, "Alice")
    bob = await world.user(admin, "Bob")
    system_id = await make_system(admin)
    group = await world.group(admin, "Dev")

    gadget = (await create(admin, name="Gadget", external_system_id=system_id,
                           install_type="google_gadget", extension_type="stream",
                           stream_type="company"))["reach_extension"]
    assert (gadget["install_type"], gadget["extension_type"], gadget["stream_type"]) == (
        "google_gadget", "stream", "company")
    dynamic = (await create(admin, name="Dyn", external_system_id=system_id,
                            install_type="google_gadget", extension_type="dynamic"))
    assert dynamic["reach_extension"]["extension_type"] == "dynamic"

    profile = (await create(admin, name="Profile", external_system_id=system_id,
                            extension_type="stream", stream_type="profile",
                            profile_header=False))["reach_extension"]
    assert profile["profile_heading"] is False and profile["stream_type"] == "profile"

    legacy = (await create(admin, name="Group stream", external_system_id=system_id,
                           extension_type="stream", stream_type="group",
                           group_id=group["id"]))["reach_extension"]
    assert (legacy["group_id"], legacy["container_type"]) == (group["id"], "Group")

    # Rails-style nested attributes in a form
    tags = await admin.api.post("/api/reach_extensions", data={
        "reach_extension[name]": "Tagged", "reach_extension[external_system_id]": str(system_id),
        "reach_extension[extension_type]": "stream", "reach_extension[stream_type]": "custom",
        "reach_extension[reach_extension_tag_filters_attributes][0][tag_name]": "#News",
        "reach_extension[reach_extension_tag_filters_attributes][1][tag_name]": "launch",
        "reach_extension[profile_header]": "true",
    })
    assert tags.status == 201, tags.text
    tagged = tags.json["reach_extension"]
    assert tagged["reach_extension_tag_filters"] == [{"tag_name": "news"},
                                                      {"tag_name": "launch"}]
    assert tagged["reach_extension_user_filters"] == []
    assert tagged["profile_heading"] is True

    people = (await create(
        admin, name="People", external_system_id=system_id, extension_type="stream",
        stream_type="custom",
        reach_extension_user_filters_attributes=[{"user_id": alice.id}, {"user_id": bob.id}],
    ))["reach_extension"]
    assert people["reach_extension_user_filters"] == [{"user_id": alice.id},
                                                      {"user_id": bob.id}]
    assert people["reach_extension_tag_filters"] == []


async def test_validation_rules(world: World) -> None:
    admin = await world.community()
    other = await world.community("Other")
    bob = await world.user(admin, "Bob")
    system_id = await make_system(admin)
    foreign_system = await make_system(other)
    inactive = await make_system(admin, "Old")
    await admin.api.delete(f"/api/external_systems/{inactive}")
    foreign_group = await world.group(other, "Elsewhere")
    ok = {"name": "X", "external_system_id": system_id, "button_type": "icon"}
    stream = {**ok, "extension_type": "stream"}
    cases: list[tuple[dict[str, Any], str]] = [
        ({**ok, "name": ""}, "name"),
        ({"external_system_id": system_id, "button_type": "icon"}, "name"),
        ({"name": "X", "button_type": "icon"}, "external_system_id"),
        ({**ok, "external_system_id": "abc"}, "external_system_id"),
        ({**ok, "external_system_id": foreign_system}, "external_system_id"),
        ({**ok, "external_system_id": 999999}, "external_system_id"),
        ({**ok, "external_system_id": inactive}, "external_system_id"),
        ({**ok, "container_id": foreign_group["id"], "container_type": "Group"}, "container_id"),
        ({**ok, "container_id": 999999}, "container_id"),
        ({**ok, "group_id": foreign_group["id"]}, "group_id"),
        ({**ok, "container_id": 1, "container_type": "TownHall"}, "container_id"),
        ({**ok, "container_id": 1, "container_type": "Project"}, "container_type"),
        ({**ok, "container_type": "Group"}, "container_id"),
        ({**ok, "install_type": "flash"}, "install_type"),
        ({**ok, "install_type": "google_gadget"}, "extension_type"),
        ({**ok, "install_type": "google_gadget", "extension_type": "trends"}, "extension_type"),
        ({**ok, "extension_type": "poster"}, "extension_type"),
        (stream, "stream_type"),
        ({**stream, "stream_type": "weekly"}, "stream_type"),
        ({**ok, "stream_type": "company"}, "stream_type"),
        ({"name": "X", "external_system_id": system_id}, "button_type"),
        ({**ok, "button_type": "huge"}, "button_type"),
        ({**ok, "button_verb": "ask_for_help", "button_type": "verb"}, "button_type"),
        ({**stream, "stream_type": "company", "button_verb": "request_assistance",
          "button_type": "verb"}, "button_type"),
        ({**ok, "button_verb": "shout"}, "button_verb"),
        ({**stream, "stream_type": "profile"}, "profile_header"),
        ({**stream, "stream_type": "group"}, "container_id"),
        ({**stream, "stream_type": "town_hall"}, "container_id"),
        ({**stream, "stream_type": "custom"}, "reach_extension_tag_filters_attributes"),
        ({**stream, "stream_type": "custom",
          "reach_extension_tag_filters_attributes": [{"tag_name": "a"}],
          "reach_extension_user_filters_attributes": [{"user_id": bob.id}]},
         "reach_extension_tag_filters_attributes"),
        ({**stream, "stream_type": "company",
          "reach_extension_tag_filters_attributes": [{"tag_name": "a"}]},
         "reach_extension_tag_filters_attributes"),
        ({**stream, "stream_type": "custom",
          "reach_extension_user_filters_attributes": [{"user_id": 999999}]},
         "reach_extension_user_filters_attributes"),
        ({**stream, "stream_type": "custom",
          "reach_extension_user_filters_attributes": [{"user_id": other.id}]},
         "reach_extension_user_filters_attributes"),
        ({**stream, "stream_type": "custom",
          "reach_extension_user_filters_attributes": [{"user_id": "me"}]},
         "reach_extension_user_filters_attributes"),
        ({**ok, "days_ago": 0}, "days_ago"),
        ({**ok, "days_ago": "soon"}, "days_ago"),
        ({**ok, "login_required": "perhaps"}, "login_required"),
        ({**ok, "reach_border_style": "wavy"}, "reach_border_style"),
        ({**ok, "reach_border_color": "red"}, "reach_border_color"),
        ({**ok, "reach_separator_color": "#12345"}, "reach_separator_color"),
    ]
    for params, field in cases:
        resp = await admin.api.post("/api/reach_extensions", json={"reach_extension": params})
        assert resp.status == 422, (params, resp.text)
        assert resp.json["code"] == "validation_failed"
        assert f"reach_extension[{field}]" in resp.json["fields"], (params, resp.json)
    assert (await admin.api.get("/api/reach_extensions")).json == {"reach_extensions": []}


async def test_update(world: World) -> None:
    admin = await world.community()
    alice = await world.user(admin, "Alice")
    system_id = await make_system(admin)
    second_system = await make_system(admin, "Wiki")
    ext = (await create(admin, name="Stream", external_system_id=system_id,
                        extension_type="stream", stream_type="custom",
                        reach_extension_tag_filters_attributes=[{"tag_name": "ops"}]))[
        "reach_extension"]
    path = f"/api/reach_extensions/{ext['id']}"

    renamed = await admin.api.put(path, json={"reach_extension": {
        "name": "Ops stream", "reach_default_text": "#000", "external_system_id": second_system}})
    assert renamed.status == 200, renamed.text
    changed = renamed.json["reach_extension"]
    assert list(changed) == EXTENSION_KEYS
    assert changed == {**ext, "name": "Ops stream", "reach_default_text": "#000000",
                       "external_system_id": second_system}

    # filters given replace the whole set (tags -> users)
    users = await admin.api.put(path, data={
        "reach_extension[reach_extension_user_filters_attributes][0][user_id]": str(alice.id)})
    assert users.status == 200, users.text
    assert users.json["reach_extension"]["reach_extension_tag_filters"] == []
    assert users.json["reach_extension"]["reach_extension_user_filters"] == [
        {"user_id": alice.id}]

    # a stream that is not custom keeps no filters
    company = await admin.api.put(path, json={"reach_extension": {"stream_type": "company"}})
    assert company.status == 200, company.text
    assert company.json["reach_extension"]["reach_extension_user_filters"] == []

    # leaving streams clears the stream type; a discussion then needs a button type
    refused = await admin.api.put(path, json={"reach_extension": {"extension_type": "discussion"}})
    assert refused.status == 422
    assert "reach_extension[button_type]" in refused.json["fields"]
    discussion = await admin.api.put(path, json={"reach_extension": {
        "extension_type": "discussion", "button_type": "verb", "button_verb": "share"}})
    assert discussion.status == 200, discussion.text
    assert (discussion.json["reach_extension"]["stream_type"],
            discussion.json["reach_extension"]["button_verb"]) == (None, "share")

    # a rule broken by an update changes nothing
    broken = await admin.api.put(path, json={"reach_extension": {
        "name": "Broken", "button_verb": "ask_for_help"}})
    assert broken.status == 422 and "reach_extension[button_type]" in broken.json["fields"]
    shown = (await admin.api.get(path)).json["reach_extension"]
    assert shown == discussion.json["reach_extension"]

    blank_name = await admin.api.put(path, json={"reach_extension": {"name": " "}})
    assert blank_name.status == 422

    group = await world.group(admin, "Team")
    grouped = await admin.api.put(path, json={"reach_extension": {"container_id": group["id"]}})
    assert grouped.json["reach_extension"]["container_type"] == "Group"
    ungrouped = await admin.api.put(path, json={"reach_extension": {"container_id": None}})
    assert ungrouped.status == 200
    assert ungrouped.json["reach_extension"]["group_id"] is None
    missing = await admin.api.put("/api/reach_extensions/999999",
                                  json={"reach_extension": {"name": "x"}})
    assert missing.status == 404


async def test_members_are_forbidden(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    system_id = await make_system(admin)
    ext = (await create(admin, name="Ext", external_system_id=system_id,
                        button_type="icon"))["reach_extension"]
    path = f"/api/reach_extensions/{ext['id']}"
    params = {"reach_extension": {"name": "Mine", "external_system_id": system_id,
                                  "button_type": "icon"}}
    for method, url, body in (
        ("GET", "/api/reach_extensions", None),
        ("GET", path, None),
        ("POST", "/api/reach_extensions", params),
        ("PUT", path, params),
    ):
        resp = await bob.api.request(method, url, json=body)
        assert resp.status == 403, (method, url, resp.text)
    assert (await admin.api.get("/api/reach_extensions")).json == {"reach_extensions": [ext]}


async def test_another_communitys_extension_is_not_found(world: World) -> None:
    acme = await world.community("Acme")
    globex = await world.community("Globex")
    system_id = await make_system(acme)
    ext = (await create(acme, name="Ext", external_system_id=system_id,
                        button_type="icon"))["reach_extension"]
    path = f"/api/reach_extensions/{ext['id']}"
    assert (await globex.api.get(path)).status == 404
    changed = await globex.api.put(path, json={"reach_extension": {"name": "Taken"}})
    assert changed.status == 404
    assert (await globex.api.get("/api/reach_extensions")).json == {"reach_extensions": []}
    assert (await acme.api.get(path)).json["reach_extension"]["name"] == "Ext"


async def test_list_runs_a_fixed_number_of_queries(world: World, query_log: QueryLog) -> None:
    admin = await world.community()
    system_id = await make_system(admin)
    await create(admin, name="First", external_system_id=system_id, button_type="icon")

    async def count(per_page: str) -> int:
        query_log.reset()
        resp = await admin.api.get("/api/reach_extensions", params={"per_page": per_page})
        assert resp.status == 200
        return len(query_log)

    await count("500")
    few = await count("500")
    for i in range(30):
        await extension_storage.insert(
            world.pool, admin.community.id, f"token-{admin.community.id}-{i}", admin.id,
            {"external_system_id": system_id, "name": f"E{i}", "button_type": "verb",
             "tag_filters": ["a", "b"] if i % 2 else []},
        )
    assert await count("500") == few
    assert await count("1") == few
    listed = await admin.api.get("/api/reach_extensions", params={"per_page": "500"})
    assert len(listed.json["reach_extensions"]) == 31
    paged = await admin.api.get("/api/reach_extensions", params={"per_page": "10", "page": "4"})
    assert len(paged.json["reach_extensions"]) == 1
