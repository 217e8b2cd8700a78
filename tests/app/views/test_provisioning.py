"""POST /api/users/provision as the original command-line client sends it: multipart `file` =
the gzipped directory export, optional skip_emails / test / add_only = "true", Accept JSON."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from app.actions import provisioning
from app.actions.users import CONTACT_VALUE_MAX
from tests.app.views.realtime_support import next_frame, open_socket, read_until_closed
from tests.support import Member, World

EXPORT = (Path(__file__).resolve().parents[2] / "fixtures" / "socialcast"
          / "provision_users.xml").read_bytes()
URL = "/api/users/provision"


def form(xml: bytes = EXPORT, *, gzipped: bool = True, **flags: str) -> aiohttp.FormData:
    data = aiohttp.FormData()
    data.add_field("file", gzip.compress(xml) if gzipped else xml, filename="users.xml.gz",
                   content_type="application/octet-stream")
    for name, value in flags.items():
        data.add_field(name, value)
    return data


async def provision(api: Any, xml: bytes = EXPORT, **flags: str) -> Any:
    return await api.post(URL, data=form(xml, **flags), headers={"Accept": "application/json"})


async def users_by_email(world: World, admin: Member) -> dict[str, Any]:
    rows = await world.pool.fetch(
        "SELECT * FROM users WHERE community_id = $1", admin.community.id)
    return {r["email"]: r for r in rows}


def report(resp: Any) -> dict[str, Any]:
    assert resp.status == 200, resp.text
    assert list(resp.json) == ["provision"]
    out: dict[str, Any] = resp.json["provision"]
    assert list(out) == ["created", "updated", "deactivated", "reactivated", "unchanged",
                         "errors"]
    return out


async def test_creates_the_users_of_the_export(world: World) -> None:
    admin = await world.community()
    got = report(await provision(admin.api, skip_emails="true"))
    assert got == {"created": 3, "updated": 0, "deactivated": 0, "reactivated": 0,
                   "unchanged": 0, "errors": []}
    users = await users_by_email(world, admin)
    carol, alice, dana = (users[e] for e in ("carol@acme.test", "alice@acme.test",
                                             "dana@acme.test"))
    assert (carol["first_name"], carol["last_name"], carol["title"]) == ("Carol", "Chen",
                                                                         "Engineer")
    assert carol["role"] == "member" and carol["state"] == "active"
    assert alice["title"] is None
    assert dana["unique_identifier"] == "dlee" and dana["employee_number"] == "10042"
    assert dana["role"] == "tenant_admin"  # roles win over account-type external
    assert dana["contact_info"] == {"location": "Lisbon", "cell_phone": "+351 900 000 000"}
    shown = await admin.api.get(f"/api/users/{dana['id']}")
    fields = {f["label"]: f["value"] for f in shown.json["user"]["custom_fields"]}
    assert fields.get("manager_email") == "carol@acme.test"
    assert carol["username"] and len({u["username"] for u in users.values()}) == len(users)


async def test_again_is_unchanged_and_changes_are_updates(world: World) -> None:
    admin = await world.community()
    report(await provision(admin.api))
    again = report(await provision(admin.api))
    assert again["unchanged"] == 3 and again["created"] == again["updated"] == 0
    # matched by unique identifier even when the e-mail address changed
    changed = EXPORT.replace(b"dana@acme.test", b"dana.lee@acme.test").replace(
        b"<last-name>Chen</last-name>", b"<last-name>Chen-Smith</last-name>")
    got = report(await provision(admin.api, changed))
    assert (got["created"], got["updated"], got["unchanged"]) == (0, 2, 1)
    users = await users_by_email(world, admin)
    assert "dana@acme.test" not in users and users["dana.lee@acme.test"]["first_name"] == "Dana"
    assert users["carol@acme.test"]["last_name"] == "Chen-Smith"


async def test_absent_users_are_deactivated_unless_add_only(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    kept = report(await provision(admin.api, add_only="true"))
    assert kept["deactivated"] == 0 and kept["created"] == 3
    got = report(await provision(admin.api))
    assert got["deactivated"] == 1 and got["unchanged"] == 3
    users = await users_by_email(world, admin)
    assert users[bob.email]["state"] == "inactive"
    assert users[admin.email]["state"] == "active"  # never the caller
    assert (await bob.api.get("/api/userinfo")).status == 401
    # back in the file: reactivated
    bob_xml = (b"<user><first-name>Bob</first-name><last-name>B</last-name><contact-info>"
               b"<email>" + bob.email.encode() + b"</email></contact-info></user>\n </users>")
    again = report(await provision(admin.api, EXPORT.replace(b" </users>", bob_xml)))
    assert again["reactivated"] == 1
    assert (await users_by_email(world, admin))[bob.email]["state"] == "active"


async def test_test_mode_reports_and_changes_nothing(world: World) -> None:
    admin = await world.community()
    await world.user(admin, "Bob")
    got = report(await provision(admin.api, test="true", skip_emails="true"))
    assert (got["created"], got["deactivated"]) == (3, 1)
    users = await users_by_email(world, admin)
    assert len(users) == 2 and all(u["state"] == "active" for u in users.values())


async def test_malformed_file_is_a_422_and_changes_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch,
) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    # one user a batch, so the users before the fault are written before it is found: the
    # 422 must undo batches already applied, not only refuse the one at fault
    monkeypatch.setattr(provisioning, "BATCH", 1)
    applied: list[str] = []
    apply = provisioning.Provisioning._apply

    async def counting(self: provisioning.Provisioning, batch: list[Any]) -> None:
        await apply(self, batch)
        applied.extend(entry.email for entry in batch)

    monkeypatch.setattr(provisioning.Provisioning, "_apply", counting)
    truncated = EXPORT[: EXPORT.index(b"<first-name>Dana")]
    resp = await provision(admin.api, truncated)
    assert resp.status == 422, resp.text
    assert "user 3" in resp.json["errors"][0]
    # Carol and Alice were written before the parser found the file cut short
    assert applied == ["carol@acme.test", "alice@acme.test"]
    no_email = EXPORT.replace(b"<email>alice@acme.test</email>", b"")
    resp = await provision(admin.api, no_email)
    assert resp.status == 422 and "User 2" in resp.json["errors"][0], resp.text
    dtd = b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]>' + EXPORT.split(b"?>", 1)[1]
    assert (await provision(admin.api, dtd)).status == 422
    plain = await admin.api.post(URL, data=form(b"not xml at all", gzipped=False))
    assert plain.status == 422
    users = await users_by_email(world, admin)
    assert set(users) == {admin.email, bob.email}
    assert all(u["state"] == "active" for u in users.values())


async def test_contact_details_are_bounded_and_only_known_keys_kept(world: World) -> None:
    """As PUT /api/users/:id stores them: contact tags no profile shows are dropped, and an
    over-long detail or custom value refuses the file (422, nothing written)."""
    admin = await world.community()
    odd = EXPORT.replace(b"<location>Lisbon</location>",
                         b"<location>Lisbon</location><fax-number>1234</fax-number>")
    assert odd != EXPORT
    report(await provision(admin.api, odd))
    dana = (await users_by_email(world, admin))["dana@acme.test"]
    assert dana["contact_info"] == {"location": "Lisbon", "cell_phone": "+351 900 000 000"}
    other = await world.community("Other", "other.example")
    long_place = b"L" * (CONTACT_VALUE_MAX + 1)
    resp = await provision(other.api, EXPORT.replace(b"Lisbon", long_place))
    assert resp.status == 422, resp.text
    assert resp.json["fields"] == {
        "file": [f"user 3: contact-info[location] is too long (at most {CONTACT_VALUE_MAX} "
                 "characters)"]}
    resp = await provision(other.api, EXPORT.replace(b"<value>Engineer</value>",
                                                     b"<value>" + b"E" * 1001 + b"</value>"))
    assert resp.status == 422 and "user 1: custom-field[title]" in resp.text, resp.text
    assert set(await users_by_email(world, other)) == {other.email}


async def test_plain_xml_is_accepted_too(world: World) -> None:
    admin = await world.community()
    resp = await admin.api.post(URL, data=form(gzipped=False))
    assert report(resp)["created"] == 3


async def test_external_system_credentials(world: World) -> None:
    admin = await world.community()
    created = await admin.api.post("/api/external_systems",
                                   json={"external_system": {"name": "LDAP sync", "url": "https://ldap.acme.test"}})
    assert created.status == 201, created.text
    system = created.json["external_system"]
    creds = f"{system['client_identifier']}:{system['client_secret']}"
    anon = admin.api.anonymous()
    resp = await anon.post(URL, data=form(), headers={
        "Authorization": f"SocialcastApiClient {creds}", "Accept": "application/json"})
    assert report(resp)["created"] == 3
    # a system is no user: the admin, absent from the file, is deactivated; Dana (an admin
    # in the file) keeps the community administered
    assert (await users_by_email(world, admin))[admin.email]["state"] == "inactive"
    wrong = await anon.post(URL, data=form(), headers={
        "Authorization": f"SocialcastApiClient {system['client_identifier']}:nope"})
    assert wrong.status == 401


async def test_non_admins_and_strangers_are_refused(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    assert (await provision(bob.api)).status == 403
    assert (await provision(admin.api.anonymous())).status == 401
    assert (await provision(admin.api.as_user(admin.email, "wrong password"))).status == 401
    assert len(await users_by_email(world, admin)) == 2
    assert (await admin.api.get(URL)).status == 405  # the route exists: only POST


async def test_never_leaves_the_community_without_an_admin(world: World) -> None:
    admin = await world.community()
    created = await admin.api.post("/api/external_systems",
                                   json={"external_system": {"name": "LDAP", "url": "https://ldap.acme.test"}})
    system = created.json["external_system"]
    no_admin = EXPORT.replace(b"<role>tenant_admin</role>", b"")
    resp = await admin.api.anonymous().post(URL, data=form(no_admin), headers={
        "Authorization":
            f"SocialcastApiClient {system['client_identifier']}:{system['client_secret']}"})
    assert resp.status == 422, resp.text
    assert (await users_by_email(world, admin))[admin.email]["state"] == "active"


async def test_deactivated_users_sockets_close_and_sessions_end(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    ws, _ = await open_socket(bob)
    tested = report(await provision(admin.api, test="true"))
    assert tested["deactivated"] == 1
    await ws.send_json({"type": "ping"})  # a test run closes nothing
    assert (await next_frame(ws))["type"] == "pong"
    got = report(await provision(admin.api))
    assert got["deactivated"] == 1
    _frames, closing = await read_until_closed(ws, within=5)
    assert closing.type is aiohttp.WSMsgType.CLOSE and closing.data == 4003
    assert (await bob.api.get("/api/userinfo")).status == 401
