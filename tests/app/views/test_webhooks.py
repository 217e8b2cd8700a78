"""Group webhooks: setting them up (group admins), and the incoming call that posts a message in
the group with nothing but the identifier and secret in its path."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import time
from typing import Any

import aiohttp
from PIL import Image
from yarl import URL

from storage import webhooks as webhook_storage
from tests.conftest import QueryLog
from tests.support import Api, Member, World

CREATED_KEYS = ["id", "name", "group_id", "identifier", "secret", "url", "created_at"]
LISTED_KEYS = ["id", "name", "group_id", "identifier", "created_at"]


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), (0, 200, 0)).save(out, format="PNG")
    return out.getvalue()


async def make_webhook(admin: Member, group_id: int, name: str = "Deploy bot") -> dict[str, Any]:
    resp = await admin.api.post(f"/api/groups/{group_id}/webhooks",
                                json={"webhook": {"name": name}})
    assert resp.status == 201, resp.text
    hook: dict[str, Any] = resp.json["webhook"]
    return hook


def incoming_path(hook: dict[str, Any]) -> str:
    return URL(hook["url"]).path


async def group_messages(member: Member, group_id: int) -> list[dict[str, Any]]:
    resp = await member.api.get(f"/api/groups/{group_id}/messages")
    assert resp.status == 200, resp.text
    messages: list[dict[str, Any]] = resp.json["messages"]
    return messages


async def test_create_and_list_webhooks(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Olga")
    group = await world.group(owner, "Ops")
    resp = await owner.api.post(f"/api/groups/{group['id']}/webhooks.json",
                                data={"webhook[name]": " Deploy bot "})
    assert resp.status == 201, resp.text
    assert list(resp.json) == ["webhook"]
    hook = resp.json["webhook"]
    assert list(hook) == CREATED_KEYS
    assert isinstance(hook["id"], int)
    assert hook["name"] == "Deploy bot"
    assert hook["group_id"] == group["id"]
    assert isinstance(hook["identifier"], str) and len(hook["identifier"]) >= 16
    assert isinstance(hook["secret"], str) and len(hook["secret"]) >= 40
    assert hook["url"] == (f"{admin.community.base_url}/api/webhooks/"
                           f"{hook['identifier']}/{hook['secret']}")
    assert hook["created_at"].endswith("+00:00")

    listed = await owner.api.get(f"/api/groups/{group['id']}/webhooks")
    assert listed.status == 200
    assert listed.json == {"webhooks": [{k: hook[k] for k in LISTED_KEYS}]}
    assert list(listed.json["webhooks"][0]) == LISTED_KEYS
    assert hook["secret"] not in listed.text
    # community admins administer every group
    by_admin = await admin.api.get(f"/api/groups/{group['id']}/webhooks")
    assert by_admin.json == listed.json
    second = await make_webhook(admin, group["id"], "Alerts")
    assert second["identifier"] != hook["identifier"] and second["secret"] != hook["secret"]


async def test_the_secret_is_stored_hashed(world: World) -> None:
    admin = await world.community()
    group = await world.group(admin, "Ops")
    hook = await make_webhook(admin, group["id"])
    stored = await world.pool.fetchval(
        "SELECT secret_hash FROM group_webhooks WHERE id = $1", hook["id"])
    assert stored == hashlib.sha256(hook["secret"].encode()).hexdigest()
    text = await world.pool.fetchval(
        "SELECT row_to_json(w)::text FROM group_webhooks w WHERE id = $1", hook["id"])
    assert hook["secret"] not in text


async def test_create_validation_and_archived_groups(world: World) -> None:
    admin = await world.community()
    group = await world.group(admin, "Ops")
    too_long = {"webhook": {"name": "x" * 101}}
    # a body naming no field says so (decisions.md), one naming it says what is wrong
    for body, field in (({"webhook": {"name": "  "}}, "webhook[name]"),
                        ({"webhook": {}}, "webhook"), ({}, "webhook"),
                        (too_long, "webhook[name]")):
        resp = await admin.api.post(f"/api/groups/{group['id']}/webhooks", json=body)
        assert resp.status == 422, (body, resp.text)
        assert field in resp.json["fields"], resp.json
    assert (await admin.api.get(f"/api/groups/{group['id']}/webhooks")).json == {"webhooks": []}
    assert (await admin.api.delete(f"/api/groups/{group['id']}/archive")).status == 200
    archived = await admin.api.post(f"/api/groups/{group['id']}/webhooks",
                                    json={"webhook": {"name": "Late"}})
    assert archived.status == 403


async def test_only_group_admins_manage_webhooks(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Olga")
    member = await world.user(admin, "Mike")
    outsider = await world.user(admin, "Otto")
    group = await world.group(owner, "Ops", members=(member,))
    secret_group = await world.group(owner, "Hush", permission_mode="private", members=(member,))
    hook = await make_webhook(owner, group["id"])
    for who in (member, outsider):
        for method, path, body in (
            ("GET", f"/api/groups/{group['id']}/webhooks", None),
            ("POST", f"/api/groups/{group['id']}/webhooks", {"webhook": {"name": "Mine"}}),
            ("DELETE", f"/api/groups/{group['id']}/webhooks/{hook['id']}", None),
        ):
            resp = await who.api.request(method, path, json=body)
            assert resp.status == 403, (who.username, method, resp.text)
    hidden = await outsider.api.post(f"/api/groups/{secret_group['id']}/webhooks",
                                     json={"webhook": {"name": "Mine"}})
    assert hidden.status == 404
    assert (await outsider.api.get(f"/api/groups/{secret_group['id']}/webhooks")).status == 404
    listed = (await owner.api.get(f"/api/groups/{group['id']}/webhooks")).json["webhooks"]
    assert [h["id"] for h in listed] == [hook["id"]]


async def test_another_communitys_webhooks_are_not_found(world: World) -> None:
    acme = await world.community("Acme")
    globex = await world.community("Globex")
    group = await world.group(acme, "Ops")
    hook = await make_webhook(acme, group["id"])
    for method, path, body in (
        ("GET", f"/api/groups/{group['id']}/webhooks", None),
        ("POST", f"/api/groups/{group['id']}/webhooks", {"webhook": {"name": "Mine"}}),
        ("DELETE", f"/api/groups/{group['id']}/webhooks/{hook['id']}", None),
    ):
        resp = await globex.api.request(method, path, json=body)
        assert resp.status == 404, (method, resp.text)
    # the incoming call through another community's host name finds nothing
    elsewhere = await globex.api.anonymous().post(incoming_path(hook),
                                                  json={"message": {"body": "hi"}})
    assert elsewhere.status == 404
    assert await group_messages(acme, group["id"]) == []
    assert len((await acme.api.get(f"/api/groups/{group['id']}/webhooks")).json["webhooks"]) == 1


async def test_incoming_webhook_posts_in_the_group(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Olga")
    reader = await world.user(admin, "Rita")
    group = await world.group(owner, "Ops", members=(reader,))
    hook = await make_webhook(owner, group["id"])
    anon = admin.api.anonymous()
    resp = await anon.post(incoming_path(hook), json={"message": {
        "body": f"Deployed v2 #release, ping @{reader.username} https://ci.example/42"}})
    assert resp.status == 204, resp.text
    assert resp.text == ""
    (message,) = await group_messages(reader, group["id"])
    assert message["body"].startswith("Deployed v2 #release")
    assert message["user"]["id"] == owner.id
    assert message["group"]["id"] == group["id"]
    assert message["source"] == {"name": "Deploy bot", "url": f"{admin.community.base_url}/api",
                                 "formal_name": "Deploy bot", "id": "Deploy bot"}
    assert [t["name"] for t in message["tags"]] == ["release"]
    assert [(r["type"], r["id"]) for r in message["recipients"]] == [
        ("Group", group["id"]), ("User", reader.id)]
    assert message["external_resources"][0]["url"] == "https://ci.example/42"
    # the mentioned member is notified (after commit, like any message)
    notes = (await reader.api.get("/api/notifications")).json["notifications"]
    assert [(n["filter"], n["notifiable_type"], n["notifiable_id"]) for n in notes] == [
        ("at_mentions", "Message", message["id"]), ("groups", "Group", group["id"])]
    # also with the .json suffix and a form body
    form = await anon.post(incoming_path(hook) + ".json", data={"message[body]": "Second"})
    assert form.status == 204, form.text
    assert [m["body"] for m in await group_messages(reader, group["id"])] == ["Second",
                                                                             message["body"]]
    # a webhook named like one of the known sources does not pass for it
    api_named = await make_webhook(owner, group["id"], "api")
    assert (await anon.post(incoming_path(api_named), json={"message": {"body": "3"}})).status \
        == 204
    latest = (await group_messages(reader, group["id"]))[0]
    assert (latest["body"], latest["source"]["id"]) == ("3", "webhook")


async def test_wrong_identifier_or_secret_is_not_found(world: World) -> None:
    admin = await world.community()
    group = await world.group(admin, "Ops")
    hook = await make_webhook(admin, group["id"])
    other = await make_webhook(admin, group["id"], "Other")
    anon = admin.api.anonymous()
    body = {"message": {"body": "hi"}}
    for path in (
        f"/api/webhooks/{hook['identifier']}/{hook['secret'][:-1]}",
        f"/api/webhooks/{hook['identifier']}/{other['secret']}",
        f"/api/webhooks/{hook['identifier']}x/{hook['secret']}",
        f"/api/webhooks/unknown/{hook['secret']}",
        f"/api/webhooks/{hook['identifier']}",
    ):
        resp = await anon.post(path, json=body)
        assert resp.status == 404, (path, resp.text)
        assert resp.json["code"] == "not_found"
    # checked before the body is read: a wrong secret with a bad body is still a 404
    bad = await anon.post(f"/api/webhooks/{hook['identifier']}/nope", data=b"{not json",
                          headers={"Content-Type": "application/json"})
    assert bad.status == 404
    assert await group_messages(admin, group["id"]) == []


async def test_incoming_validation(world: World) -> None:
    admin = await world.community()
    group = await world.group(admin, "Ops")
    hook = await make_webhook(admin, group["id"])
    anon = admin.api.anonymous()
    for body in ({"message": {"body": "  "}}, {"message": {}}, {}):
        resp = await anon.post(incoming_path(hook), json=body)
        assert resp.status == 422, (body, resp.text)
        assert "message[body]" in resp.json["fields"]
    for attachment in ("not a data uri", "data:text/plain,plain", "data:image/png;base64,@@@"):
        resp = await anon.post(incoming_path(hook), json={"message": {
            "body": "with file", "attachment": attachment}})
        assert resp.status == 422, (attachment, resp.text)
        assert "message[attachment]" in resp.json["fields"]
    assert await group_messages(admin, group["id"]) == []
    assert await world.pool.fetchval("SELECT count(*) FROM attachments") == 0


async def test_incoming_attachments(world: World) -> None:
    admin = await world.community()
    group = await world.group(admin, "Ops")
    hook = await make_webhook(admin, group["id"])
    anon = admin.api.anonymous()
    form = aiohttp.FormData()
    form.add_field("message[body]", "Screenshot attached")
    form.add_field("message[attachment]", _png(), filename="shot.png", content_type="image/png")
    resp = await anon.post(incoming_path(hook), data=form)
    assert resp.status == 204, resp.text
    encoded = base64.b64encode(b"build log line 1\n").decode()
    resp = await anon.post(incoming_path(hook), json={"message": {
        "body": "Log attached", "attachment": f"data:text/plain;base64,{encoded}"}})
    assert resp.status == 204, resp.text

    log_message, shot_message = await group_messages(admin, group["id"])
    assert shot_message["body"] == "Screenshot attached"
    (shot,) = shot_message["attachments"]
    assert shot["filename"].endswith("shot.png") and shot["content_type"] == "image/png"
    assert len(shot_message["media_files"]) == 1
    (log,) = log_message["attachments"]
    assert log["content_type"] == "text/plain" and log["filename"].endswith(".txt")
    content = await admin.api.get(URL(log["public_filename"]).path)
    assert content.status == 200 and content.raw == b"build log line 1\n"


async def test_incoming_calls_are_rate_limited_per_webhook(world: World) -> None:
    admin = await world.community()
    group = await world.group(admin, "Ops")
    hook = await make_webhook(admin, group["id"])
    other = await make_webhook(admin, group["id"], "Other")
    anon = admin.api.anonymous()
    if time.time() % 60 > 50:  # keep every call inside one rate-limit window
        await asyncio.sleep(60.5 - time.time() % 60)
    for _ in range(60):  # blank bodies: verified and counted, nothing posted
        assert (await anon.post(incoming_path(hook), json={})).status == 422
    limited = await anon.post(incoming_path(hook), json={"message": {"body": "one too many"}})
    assert limited.status == 429
    assert limited.json["code"] == "rate_limited"
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    assert (await anon.post(incoming_path(other),
                            json={"message": {"body": "still fine"}})).status == 204
    assert [m["body"] for m in await group_messages(admin, group["id"])] == ["still fine"]


async def test_archived_group_and_inactive_creator(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Olga")
    group = await world.group(owner, "Ops")
    hook = await make_webhook(owner, group["id"])
    anon = admin.api.anonymous()
    assert (await admin.api.delete(f"/api/users/{owner.id}")).status == 200
    gone = await anon.post(incoming_path(hook), json={"message": {"body": "hi"}})
    assert gone.status == 403

    second_group = await world.group(admin, "Archive me")
    second = await make_webhook(admin, second_group["id"])
    assert (await admin.api.delete(f"/api/groups/{second_group['id']}/archive")).status == 200
    archived = await anon.post(incoming_path(second), json={"message": {"body": "hi"}})
    assert archived.status == 403
    assert await group_messages(admin, group["id"]) == []
    assert await group_messages(admin, second_group["id"]) == []


async def test_deleting_a_webhook_revokes_it(world: World) -> None:
    admin = await world.community()
    group = await world.group(admin, "Ops")
    hook = await make_webhook(admin, group["id"])
    anon: Api = admin.api.anonymous()
    path = f"/api/groups/{group['id']}/webhooks/{hook['id']}"
    assert (await admin.api.delete(path)).status == 204
    assert (await admin.api.delete(path)).status == 404
    assert (await admin.api.get(f"/api/groups/{group['id']}/webhooks")).json == {"webhooks": []}
    assert (await anon.post(incoming_path(hook), json={"message": {"body": "x"}})).status == 404


async def test_list_runs_a_fixed_number_of_queries(world: World, query_log: QueryLog) -> None:
    admin = await world.community()
    group = await world.group(admin, "Ops")
    await make_webhook(admin, group["id"])
    path = f"/api/groups/{group['id']}/webhooks"

    async def count(per_page: str) -> int:
        query_log.reset()
        resp = await admin.api.get(path, params={"per_page": per_page})
        assert resp.status == 200
        return len(query_log)

    await count("500")
    few = await count("500")
    for i in range(30):
        await webhook_storage.insert(world.pool, admin.community.id, group["id"], name=f"H{i}",
                                     identifier=f"ident-{group['id']}-{i}", secret_hash="x",
                                     created_by=admin.id)
    assert await count("500") == few
    assert await count("1") == few
    assert len((await admin.api.get(path, params={"per_page": "500"})).json["webhooks"]) == 31
    page = await admin.api.get(path, params={"per_page": "30", "page": "2"})
    assert len(page.json["webhooks"]) == 1
