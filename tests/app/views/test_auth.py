"""Authentication: Basic with e-mail or username, the authentication endpoint, sessions,
throttling."""

from __future__ import annotations

import asyncio
import time

from tests.support import PASSWORD, World


async def test_userinfo_with_email_or_username(world: World) -> None:
    admin = await world.community("Acme")
    by_email = await admin.api.get("/api/userinfo.json")
    assert by_email.status == 200
    assert by_email.json["user"]["id"] == admin.id
    assert by_email.json["user"]["role"] == "tenant_admin"
    by_username = await admin.api.as_user(admin.username.upper()).get("/api/userinfo")
    assert by_username.status == 200
    assert by_username.json["user"]["username"] == admin.username


async def test_missing_or_wrong_credentials_are_401_with_challenge(world: World) -> None:
    admin = await world.community("Acme Corp")
    for api in (admin.api.anonymous(), admin.api.as_user(admin.email, "wrong password")):
        resp = await api.get("/api/userinfo")
        assert resp.status == 401
        assert resp.headers["WWW-Authenticate"] == 'Basic realm="Acme Corp"'
        assert resp.json["code"] == "unauthorized"
        assert resp.json["errors"]
    garbled = await admin.api.anonymous().get(
        "/api/userinfo", headers={"Authorization": "Basic !!!notbase64"}
    )
    assert garbled.status == 401


async def test_every_response_has_a_request_id(world: World) -> None:
    admin = await world.community()
    ok = await admin.api.get("/api/userinfo")
    assert len(ok.headers["X-Request-Id"]) >= 16
    echoed = await admin.api.get("/api/userinfo", headers={"X-Request-Id": "abc-123"})
    assert echoed.headers["X-Request-Id"] == "abc-123"
    missing = await admin.api.get("/api/nothing-here")
    assert missing.status == 404
    assert missing.json["code"] == "not_found"
    assert missing.headers["X-Request-Id"]


async def test_authentication_endpoint_accepts_basic_form_and_json(world: World) -> None:
    admin = await world.community("Acme")
    anon = admin.api.anonymous()
    for kwargs in (
        {"data": {"email": admin.email, "password": PASSWORD}},
        {"json": {"email": admin.email, "password": PASSWORD}},
    ):
        resp = await anon.post("/api/authentication.json", **kwargs)
        assert resp.status == 200, resp.text
        (community,) = resp.json["communities"]
        assert list(community) == ["id", "name", "domain", "profile"]
        assert community["name"] == "Acme"
        assert community["domain"] == admin.community.domain
        assert community["profile"]["id"] == admin.id
    basic = await admin.api.post("/api/authentication")
    assert basic.status == 200
    bad = await anon.post("/api/authentication", data={"email": admin.email, "password": "x"})
    assert bad.status == 401
    assert bad.headers["WWW-Authenticate"].startswith("Basic realm=")


async def test_authentication_sets_a_session_cookie(world: World) -> None:
    admin = await world.community()
    anon = admin.api.anonymous()
    resp = await anon.post("/api/authentication", json={"email": admin.email,
                                                         "password": PASSWORD})
    assert resp.status == 200
    assert "commons_session" in resp.headers.get("Set-Cookie", "")
    # the test client keeps cookies: the next request needs no Basic header
    me = await anon.get("/api/userinfo")
    assert me.status == 200
    assert me.json["user"]["id"] == admin.id


async def test_deactivated_user_gets_401(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    assert (await bob.api.get("/api/userinfo")).status == 200
    assert (await admin.api.delete(f"/api/users/{bob.id}")).status == 200
    assert (await bob.api.get("/api/userinfo")).status == 401


async def _start_of_a_fresh_minute() -> None:
    """The limits count per clock minute: don't let a test's window straddle two."""
    left = 60 - time.time() % 60
    if left < 8:
        await asyncio.sleep(left + 0.1)


async def test_failed_logins_are_throttled(world: World) -> None:
    admin = await world.community()
    await _start_of_a_fresh_minute()
    wrong = admin.api.as_user(admin.email, "nope nope")
    for _ in range(10):
        assert (await wrong.get("/api/userinfo")).status == 401
    limited = await wrong.get("/api/userinfo")
    assert limited.status == 429
    assert int(limited.headers["Retry-After"]) >= 1
    assert limited.json["code"] == "rate_limited"
    # even the right password waits out the window for this (address, login)
    assert (await admin.api.get("/api/userinfo")).status == 429
    # another login from the same address is not affected
    other = await world.user(admin, "Other")
    assert (await other.api.get("/api/userinfo")).status == 200


async def test_tenancy_credentials_of_one_community_do_not_work_in_another(
    world: World,
) -> None:
    a = await world.community("Alpha")
    b = await world.community("Beta")
    cross = b.api.as_user(a.email)
    assert (await cross.get("/api/userinfo")).status == 401


async def test_userinfo_carries_the_community_last_for_sync_photos(world: World) -> None:
    """The original command-line client's sync_photos reads
    user.community.default_profile_photo_id from GET /api/userinfo.json."""
    admin = await world.community("Acme")
    resp = await admin.api.get("/api/userinfo.json")
    assert resp.status == 200
    user = resp.json["user"]
    assert list(user)[-1] == "community"
    assert user["community"] == {"id": admin.community.id, "name": "Acme",
                                 "domain": admin.community.domain,
                                 "default_profile_photo_id": None}
