"""External systems (reach admin): CRUD, deactivation and reactivation, client credentials and
the credentials check, profile photos, and messages posted on behalf of a system."""

from __future__ import annotations

import asyncio
import hashlib
import io
import time
from typing import Any

import aiohttp
from PIL import Image
from yarl import URL

from storage import external_systems as system_storage
from tests.conftest import QueryLog
from tests.support import Member, World

SYSTEM_KEYS = ["id", "name", "username", "description", "url", "system_url", "state",
               "external_system_type", "sharepoint_version", "not_in_company_stream", "avatars",
               "type"]
CREATED_KEYS = [*SYSTEM_KEYS, "client_identifier", "client_secret"]


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (120, 90), (20, 120, 200)).save(out, format="PNG")
    return out.getvalue()


async def make_system(admin: Member, **params: Any) -> dict[str, Any]:
    payload = {"name": "Build Server", "url": "https://ci.example.com", **params}
    resp = await admin.api.post("/api/external_systems", json={"external_system": payload})
    assert resp.status == 201, resp.text
    system: dict[str, Any] = resp.json["external_system"]
    return system


def service_header(system: dict[str, Any], scheme: str = "ServiceApiClient") -> dict[str, str]:
    return {"Authorization": f"{scheme} {system['client_identifier']}:{system['client_secret']}"}


async def test_create_and_read_an_external_system(world: World) -> None:
    admin = await world.community()
    base = admin.community.base_url
    resp = await admin.api.post("/api/external_systems.json", json={"external_system": {
        "name": "Build Server", "description": "Our CI", "url": "https://ci.example.com/",
        "not_in_company_stream": True,
    }})
    assert resp.status == 201, resp.text
    assert list(resp.json) == ["external_system"]
    made = resp.json["external_system"]
    assert list(made) == CREATED_KEYS
    system_id = made["id"]
    assert isinstance(system_id, int)
    assert made["name"] == "Build Server"
    assert made["username"] is None
    assert made["description"] == "Our CI"
    assert made["url"] == f"{base}/external_systems/{system_id}-build-server"
    assert made["system_url"] == "https://ci.example.com/"
    assert made["state"] == "active"
    assert made["external_system_type"] == "html"
    assert made["sharepoint_version"] is None
    assert made["not_in_company_stream"] is True
    assert made["avatars"]["is_system_default"] is True
    assert made["avatars"]["square70"] == f"{base}/assets/avatars/default_system_square70.png"
    assert made["type"] == "ExternalSystem"
    assert isinstance(made["client_identifier"], str) and len(made["client_identifier"]) >= 20
    assert isinstance(made["client_secret"], str) and len(made["client_secret"]) >= 40

    expected = {k: made[k] for k in SYSTEM_KEYS}
    shown = await admin.api.get(f"/api/external_systems/{system_id}")
    assert shown.status == 200
    assert shown.json == {"external_system": expected}
    assert list(shown.json["external_system"]) == SYSTEM_KEYS
    listed = await admin.api.get("/api/external_systems")
    assert listed.json == {"external_systems": [expected]}


async def test_plain_and_form_parameters(world: World) -> None:
    admin = await world.community()
    plain = await admin.api.post("/api/external_systems",
                                 json={"name": "Plain", "url": "http://plain.example"})
    assert plain.status == 201, plain.text
    assert plain.json["external_system"]["name"] == "Plain"
    form = await admin.api.post("/api/external_systems", data={
        "external_system[name]": "SharePoint", "external_system[url]": "https://sp.example",
        "external_system[external_system_type]": "sharepoint",
        "external_system[sharepoint_version]": "2010",
        "external_system[not_in_company_stream]": "false",
    })
    assert form.status == 201, form.text
    made = form.json["external_system"]
    assert (made["external_system_type"], made["sharepoint_version"]) == ("sharepoint", "2010")
    assert made["not_in_company_stream"] is False
    numeric = await make_system(admin, external_system_type="sharepoint",
                                sharepoint_version=2007)
    assert numeric["sharepoint_version"] == "2007"


async def test_the_secret_is_shown_only_once_and_stored_hashed(world: World) -> None:
    admin = await world.community()
    made = await make_system(admin)
    secret = made["client_secret"]
    path = f"/api/external_systems/{made['id']}"
    for resp in (
        await admin.api.get(path),
        await admin.api.get("/api/external_systems"),
        await admin.api.put(path, json={"external_system": {"name": "X", "url": "http://x.io"}}),
        await admin.api.delete(path),
    ):
        assert resp.status == 200, resp.text
        assert "client_secret" not in resp.text and secret not in resp.text
        assert "client_identifier" not in resp.text
    row = await world.pool.fetchrow(
        "SELECT client_identifier, client_secret_hash FROM external_systems WHERE id = $1",
        made["id"])
    assert row["client_identifier"] == made["client_identifier"]
    assert row["client_secret_hash"] == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in row["client_secret_hash"]


async def test_create_validation(world: World) -> None:
    admin = await world.community()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"url": "https://a.example"}, "external_system[name]"),
        ({"name": "  ", "url": "https://a.example"}, "external_system[name]"),
        ({"name": "A"}, "external_system[url]"),
        ({"name": "A", "url": "ftp://a.example"}, "external_system[url]"),
        ({"name": "A", "url": "not a url"}, "external_system[url]"),
        ({"name": "A", "url": "https://a.example", "external_system_type": "wiki"},
         "external_system[external_system_type]"),
        ({"name": "A", "url": "https://a.example", "sharepoint_version": "2010"},
         "external_system[sharepoint_version]"),
        ({"name": "A", "url": "https://a.example", "external_system_type": "sharepoint",
          "sharepoint_version": "2013"}, "external_system[sharepoint_version]"),
        ({"name": "A", "url": "https://a.example", "profile_photo_url": "javascript:alert(1)"},
         "external_system[profile_photo_url]"),
        ({"name": "A" * 300, "url": "https://a.example"}, "external_system[name]"),
        ({"name": "A", "url": "https://a.example", "not_in_company_stream": "maybe"},
         "external_system[not_in_company_stream]"),
    ]
    for params, field in cases:
        resp = await admin.api.post("/api/external_systems", json={"external_system": params})
        assert resp.status == 422, (params, resp.text)
        assert resp.json["code"] == "validation_failed"
        assert field in resp.json["fields"], (params, resp.json)
    assert (await admin.api.get("/api/external_systems")).json == {"external_systems": []}


async def test_update(world: World) -> None:
    admin = await world.community()
    made = await make_system(admin, description="Old", external_system_type="sharepoint",
                             sharepoint_version="2007")
    path = f"/api/external_systems/{made['id']}"
    missing = await admin.api.put(path, json={"external_system": {"name": "New"}})
    assert missing.status == 422 and "external_system[url]" in missing.json["fields"]
    no_name = await admin.api.put(path, json={"external_system": {"url": "https://n.example"}})
    assert no_name.status == 422 and "external_system[name]" in no_name.json["fields"]

    renamed = await admin.api.put(path, json={"external_system": {
        "name": "New Name", "url": "https://new.example", "not_in_company_stream": True}})
    assert renamed.status == 200, renamed.text
    system = renamed.json["external_system"]
    assert list(system) == SYSTEM_KEYS
    assert system["name"] == "New Name"
    assert system["url"].endswith(f"/external_systems/{made['id']}-new-name")
    assert system["system_url"] == "https://new.example"
    assert system["description"] == "Old"  # not given: kept
    assert (system["external_system_type"], system["sharepoint_version"]) == ("sharepoint",
                                                                             "2007")
    assert system["not_in_company_stream"] is True

    to_html = await admin.api.put(path, data={
        "external_system[name]": "New Name", "external_system[url]": "https://new.example",
        "external_system[external_system_type]": "html", "external_system[description]": ""})
    assert to_html.status == 200, to_html.text
    assert to_html.json["external_system"]["sharepoint_version"] is None
    assert to_html.json["external_system"]["description"] is None
    assert (await admin.api.get(path)).json["external_system"] == to_html.json["external_system"]


async def test_delete_deactivates_and_activate_reactivates(world: World) -> None:
    admin = await world.community()
    made = await make_system(admin)
    path = f"/api/external_systems/{made['id']}"
    deleted = await admin.api.delete(path)
    assert deleted.status == 200
    assert list(deleted.json) == ["external_system"]
    assert deleted.json["external_system"]["state"] == "inactive"
    assert (await admin.api.get(path)).json["external_system"]["state"] == "inactive"
    assert [s["state"] for s in (await admin.api.get("/api/external_systems")).json[
        "external_systems"]] == ["inactive"]

    params = {"name": "Build Server", "url": "https://ci.example.com"}
    kept = await admin.api.put(path, json={"external_system": params})
    assert kept.json["external_system"]["state"] == "inactive"  # activate defaults to false
    kept = await admin.api.put(path, json={"external_system": {**params, "activate": False}})
    assert kept.json["external_system"]["state"] == "inactive"
    active = await admin.api.put(path, json={"external_system": {**params, "activate": "true"}})
    assert active.status == 200
    assert active.json["external_system"]["state"] == "active"
    again = await admin.api.put(path, json={"external_system": {**params, "activate": True}})
    assert again.json["external_system"]["state"] == "active"  # ignored when already active
    assert (await admin.api.get(path)).json["external_system"]["state"] == "active"


async def test_credentials_check(world: World) -> None:
    admin = await world.community("Acme")
    made = await make_system(admin)
    anon = admin.api.anonymous()
    ok = await anon.post("/api/external_systems/authentication", headers=service_header(made))
    assert ok.status == 200, ok.text
    assert list(ok.json) == ["external_system"]
    assert ok.json["external_system"] == {k: made[k] for k in SYSTEM_KEYS}
    legacy = await anon.post("/api/external_systems/authentication.json",
                             headers=service_header(made, "SocialcastApiClient"))
    assert legacy.status == 200

    wrong_secret = {"Authorization": f"ServiceApiClient {made['client_identifier']}:nope"}
    unknown = {"Authorization": f"ServiceApiClient unknown:{made['client_secret']}"}
    other_scheme = {"Authorization": f"Bearer {made['client_identifier']}:x"}
    no_colon = {"Authorization": f"ServiceApiClient {made['client_identifier']}"}
    for headers in (wrong_secret, unknown, other_scheme, no_colon, {}):
        resp = await anon.post("/api/external_systems/authentication", headers=headers)
        assert resp.status == 401, (headers, resp.text)
        assert resp.json["code"] == "unauthorized"
        assert resp.headers["WWW-Authenticate"].startswith("ServiceApiClient realm=")
    # a user's Basic credentials are not an external system's
    as_user = await admin.api.post("/api/external_systems/authentication")
    assert as_user.status == 401

    await admin.api.delete(f"/api/external_systems/{made['id']}")
    inactive = await anon.post("/api/external_systems/authentication",
                               headers=service_header(made))
    assert inactive.status == 401


async def test_credentials_belong_to_one_community(world: World) -> None:
    acme = await world.community("Acme")
    globex = await world.community("Globex")
    made = await make_system(acme)
    resp = await globex.api.anonymous().post("/api/external_systems/authentication",
                                             headers=service_header(made))
    assert resp.status == 401


async def test_failed_credentials_are_throttled(world: World) -> None:
    admin = await world.community()
    made = await make_system(admin)
    anon = admin.api.anonymous()
    if time.time() % 60 > 55:  # keep every attempt inside one rate-limit window
        await asyncio.sleep(60.5 - time.time() % 60)
    wrong = {"Authorization": f"ServiceApiClient {made['client_identifier']}:wrong"}
    for _ in range(10):
        assert (await anon.post("/api/external_systems/authentication",
                                headers=wrong)).status == 401
    blocked = await anon.post("/api/external_systems/authentication", headers=service_header(made))
    assert blocked.status == 429
    assert int(blocked.headers["Retry-After"]) >= 1


async def test_members_are_forbidden(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    made = await make_system(admin)
    path = f"/api/external_systems/{made['id']}"
    params = {"external_system": {"name": "Mine", "url": "https://mine.example"}}
    for method, url, body in (
        ("GET", "/api/external_systems", None),
        ("GET", path, None),
        ("POST", "/api/external_systems", params),
        ("PUT", path, params),
        ("DELETE", path, None),
        ("POST", f"{path}/messages", {"message": {"body": "hi"}}),
    ):
        resp = await bob.api.request(method, url, json=body)
        assert resp.status == 403, (method, url, resp.text)
        assert resp.json["code"] == "forbidden"
    shown = (await admin.api.get(path)).json["external_system"]
    assert (shown["name"], shown["state"]) == ("Build Server", "active")
    assert len((await admin.api.get("/api/external_systems")).json["external_systems"]) == 1
    assert (await admin.api.get(f"{path}/messages")).json["messages"] == []


async def test_another_communitys_system_is_not_found(world: World) -> None:
    acme = await world.community("Acme")
    globex = await world.community("Globex")
    made = await make_system(acme)
    path = f"/api/external_systems/{made['id']}"
    params = {"external_system": {"name": "Taken", "url": "https://taken.example"}}
    for method, body in (("GET", None), ("PUT", params), ("DELETE", None)):
        resp = await globex.api.request(method, path, json=body)
        assert resp.status == 404, (method, resp.text)
    posted = await globex.api.post(f"{path}/messages", json={"message": {"body": "hi"}})
    assert posted.status == 404
    assert (await globex.api.get("/api/external_systems")).json == {"external_systems": []}
    shown = (await acme.api.get(path)).json["external_system"]
    assert (shown["name"], shown["state"]) == ("Build Server", "active")


async def test_post_a_message_as_a_system(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    made = await make_system(admin)
    path = f"/api/external_systems/{made['id']}/messages"
    resp = await admin.api.post(path, json={"message": {"body": "Build #42 passed #ci"}})
    assert resp.status == 201, resp.text
    message = resp.json["message"]
    assert message["body"] == "Build #42 passed #ci"
    assert message["user"]["id"] == admin.id  # the admin who posts on the system's behalf
    assert message["source"]["id"] == "external_system"
    assert message["tags"] == [{"name": "ci", "url": f"{admin.community.base_url}/topics/ci"}]

    listed = await bob.api.get(path.replace("/messages", "") + "/messages")
    assert [m["id"] for m in listed.json["messages"]] == [message["id"]]
    by_param = await bob.api.get("/api/messages", params={"external_system_id": made["id"]})
    assert [m["id"] for m in by_param.json["messages"]] == [message["id"]]
    other = await make_system(admin, name="Other")
    assert (await bob.api.get(f"/api/external_systems/{other['id']}/messages")).json[
        "messages"] == []

    group = await world.group(admin, "Ops")
    in_group = await admin.api.post(path, data={"message[body]": "Deployed",
                                                "message[group_id]": str(group["id"])})
    assert in_group.status == 201, in_group.text
    assert in_group.json["message"]["group"]["id"] == group["id"]

    blank = await admin.api.post(path, json={"message": {"body": " "}})
    assert blank.status == 422 and "message[body]" in blank.json["fields"]
    await admin.api.delete(f"/api/external_systems/{made['id']}")
    inactive = await admin.api.post(path, json={"message": {"body": "Again"}})
    assert inactive.status == 403
    assert len((await bob.api.get(path)).json["messages"]) == 2
    missing = await admin.api.post("/api/external_systems/999999/messages",
                                   json={"message": {"body": "x"}})
    assert missing.status == 404


async def test_profile_photo_upload(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    form = aiohttp.FormData()
    form.add_field("external_system[name]", "Photo System")
    form.add_field("external_system[url]", "https://photo.example")
    form.add_field("external_system[profile_photo][data]", _png(), filename="logo.png",
                   content_type="image/png")
    resp = await admin.api.post("/api/external_systems", data=form)
    assert resp.status == 201, resp.text
    made = resp.json["external_system"]
    avatars = made["avatars"]
    assert avatars["is_system_default"] is False
    assert list(avatars) == ["is_system_default", "square16", "square30", "square45",
                             "square70", "square140"]
    first = URL(avatars["square45"]).path
    image = await bob.api.get(first)
    assert image.status == 200
    assert Image.open(io.BytesIO(image.raw)).size == (45, 45)

    replace = aiohttp.FormData()
    replace.add_field("external_system[name]", "Photo System")
    replace.add_field("external_system[url]", "https://photo.example")
    replace.add_field("external_system[profile_photo][data]", _png(), filename="new.png",
                      content_type="image/png")
    updated = await admin.api.put(f"/api/external_systems/{made['id']}", data=replace)
    assert updated.status == 200, updated.text
    second = URL(updated.json["external_system"]["avatars"]["square45"]).path
    assert second != first
    assert (await bob.api.get(second)).status == 200
    assert (await bob.api.get(first)).status == 404  # the previous photo is gone

    by_url = await admin.api.put(f"/api/external_systems/{made['id']}", json={
        "external_system": {"name": "Photo System", "url": "https://photo.example",
                            "profile_photo_url": "https://cdn.example/logo.png"}})
    assert by_url.status == 200
    assert by_url.json["external_system"]["avatars"]["square45"] \
        == "https://cdn.example/logo.png"
    assert (await bob.api.get(second)).status == 404


async def test_profile_photo_url_is_stored_not_fetched(world: World) -> None:
    admin = await world.community()
    made = await make_system(admin, profile_photo_url="https://cdn.example/unreachable.png")
    assert made["avatars"] == {
        "is_system_default": False,
        **{size: "https://cdn.example/unreachable.png"
           for size in ("square16", "square30", "square45", "square70", "square140")},
    }
    shown = await admin.api.get(f"/api/external_systems/{made['id']}")
    assert shown.json["external_system"]["avatars"] == made["avatars"]


async def test_a_photo_that_is_not_an_image_is_refused(world: World) -> None:
    admin = await world.community()
    form = aiohttp.FormData()
    form.add_field("external_system[name]", "Bad Photo")
    form.add_field("external_system[url]", "https://bad.example")
    form.add_field("external_system[profile_photo][data]", b"not an image", filename="x.png",
                   content_type="image/png")
    resp = await admin.api.post("/api/external_systems", data=form)
    assert resp.status == 422
    assert "external_system[profile_photo][data]" in resp.json["fields"]
    assert (await admin.api.get("/api/external_systems")).json == {"external_systems": []}
    assert await world.pool.fetchval("SELECT count(*) FROM attachments") == 0


async def test_paging(world: World) -> None:
    admin = await world.community()
    ids = [(await make_system(admin, name=f"System {i}"))["id"] for i in range(3)]
    page = await admin.api.get("/api/external_systems", params={"per_page": "2", "page": "2"})
    assert [s["id"] for s in page.json["external_systems"]] == ids[2:]
    past = await admin.api.get("/api/external_systems", params={"page": "5"})
    assert past.status == 200 and past.json == {"external_systems": []}
    bad = await admin.api.get("/api/external_systems", params={"per_page": "abc"})
    assert bad.status == 400


async def test_list_runs_a_fixed_number_of_queries(world: World, query_log: QueryLog) -> None:
    admin = await world.community()
    await make_system(admin)

    async def count(per_page: str) -> int:
        query_log.reset()
        resp = await admin.api.get("/api/external_systems", params={"per_page": per_page})
        assert resp.status == 200
        return len(query_log)

    await count("500")
    few = await count("500")
    for i in range(30):
        await system_storage.insert(
            world.pool, admin.community.id, name=f"S{i}", description=None,
            system_url="https://s.example", external_system_type="html",
            sharepoint_version=None, not_in_company_stream=False, profile_photo_url=None,
            client_identifier=f"id-{admin.community.id}-{i}", client_secret_hash="x",
            created_by=admin.id,
        )
    assert await count("500") == few
    assert await count("1") == few
    listed = await admin.api.get("/api/external_systems", params={"per_page": "500"})
    assert len(listed.json["external_systems"]) == 31
