"""Authentication: Basic with e-mail or username, the authentication endpoint, sessions,
throttling."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from aiohttp.test_utils import TestClient

from app.actions.communities import create_community
from app.config import Settings
from app.main import create_app
from app.passwords import Passwords
from app.resources import POOL
from tests.conftest import QueryLog
from tests.support import PASSWORD, Api, World


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


async def _behind_proxy(aiohttp_client: Any, settings: Settings, **changes: Any) -> World:
    app = create_app(dataclasses.replace(settings, trust_forwarded=True, **changes))
    client: TestClient = await aiohttp_client(app)
    return World(app[POOL], Passwords(settings.argon2), client)


async def test_rotating_a_forged_forwarded_for_gives_no_extra_guesses(
    aiohttp_client: Any, settings: Settings
) -> None:
    """Issue 8, defect 4: behind nginx the first X-Forwarded-For entry is the client's own."""
    world = await _behind_proxy(aiohttp_client, settings)
    admin = await world.community()
    await _start_of_a_fresh_minute()
    wrong = admin.api.as_user(admin.email, "nope nope")
    for n in range(10):
        forged = {"X-Forwarded-For": f"10.9.{n}.1, 198.51.100.20"}  # nginx appended the last
        assert (await wrong.get("/api/userinfo", headers=forged)).status == 401
    rotated = {"X-Forwarded-For": "10.9.99.1, 198.51.100.20"}
    assert (await wrong.get("/api/userinfo", headers=rotated)).status == 429
    # another real client address has its own bucket
    elsewhere = {"X-Forwarded-For": "10.9.99.1, 198.51.100.21"}
    assert (await admin.api.get("/api/userinfo", headers=elsewhere)).status == 200


async def test_email_and_username_of_one_user_share_one_bucket(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    await _start_of_a_fresh_minute()
    logins = [bob.email, bob.username, bob.email.upper(), bob.username.upper()]
    for n in range(10):
        wrong = bob.api.as_user(logins[n % len(logins)], "nope nope")
        assert (await wrong.get("/api/userinfo")).status == 401
    for login in logins:
        assert (await bob.api.as_user(login).get("/api/userinfo")).status == 429
    form = await bob.api.anonymous().post(
        "/api/authentication", json={"email": bob.username, "password": PASSWORD})
    assert form.status == 429


def _session_cookie(headers: Any) -> str:
    cookies = [c for c in headers.getall("Set-Cookie", []) if c.startswith("commons_session=")]
    assert len(cookies) == 1, cookies
    return str(cookies[0])


async def test_session_cookie_is_secure_behind_https(
    aiohttp_client: Any, settings: Settings
) -> None:
    """Issue 8, defect 5: Secure with a trusted X-Forwarded-Proto: https or an https base URL,
    never from a client's own claim."""
    world = await _behind_proxy(aiohttp_client, settings)
    community, admin_row = await create_community(
        world.pool, world.passwords, name="Plain", domain="plain.example",
        base_url="http://plain.example", admin_email="admin@plain.example",
        admin_password=PASSWORD, admin_username="plainadmin",
    )
    api = Api(world.client, community.domain)
    credentials = {"email": admin_row["email"], "password": PASSWORD}

    async def cookie_of(headers: dict[str, str]) -> str:
        resp = await api.post("/api/authentication", json=credentials, headers=headers)
        assert resp.status == 200, resp.text
        return _session_cookie(resp.headers)

    assert "secure" in (await cookie_of({"X-Forwarded-Proto": "https"})).lower()
    plain = (await cookie_of({"X-Forwarded-Proto": "http"})).lower()
    assert "secure" not in plain and "httponly" in plain
    # the client's own value, left of what nginx set, is not trusted
    assert "secure" not in (await cookie_of({"X-Forwarded-Proto": "https, http"})).lower()
    https_admin = await world.community("Tls")  # default base URL: https://<domain>
    resp = await https_admin.api.anonymous().post(
        "/api/authentication", json={"email": https_admin.email, "password": PASSWORD})
    assert "secure" in _session_cookie(resp.headers).lower()


async def test_forwarded_proto_is_ignored_without_a_trusted_proxy(world: World) -> None:
    community, admin_row = await create_community(
        world.pool, world.passwords, name="Plain", domain="plain2.example",
        base_url="http://plain2.example", admin_email="admin@plain2.example",
        admin_password=PASSWORD, admin_username="plain2admin",
    )
    resp = await Api(world.client, community.domain).post(
        "/api/authentication", json={"email": admin_row["email"], "password": PASSWORD},
        headers={"X-Forwarded-Proto": "https"})
    assert resp.status == 200
    assert "secure" not in _session_cookie(resp.headers).lower()


async def test_the_central_host_counts_in_the_users_own_bucket(world: World) -> None:
    """Guessing through the central host (api.socialcast.com) or switching to the username
    there gives no guesses beyond the limit on the community's own host."""
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    await _start_of_a_fresh_minute()
    central = bob.api.anonymous()
    central.host = "api.socialcast.com"
    for n in range(5):
        wrong = await central.post("/api/authentication", data={
            "email": bob.username if n % 2 else bob.email, "password": "nope nope"})
        assert wrong.status == 401
    for _ in range(5):
        assert (await bob.api.as_user(bob.email, "nope nope").get("/api/userinfo")).status == 401
    assert (await bob.api.get("/api/userinfo")).status == 429
    limited = await central.post("/api/authentication", data={
        "email": bob.username, "password": PASSWORD})
    assert limited.status == 429


async def test_sessions_of_concurrent_requests_are_read_together_each_its_own(
    world: World, query_log: QueryLog
) -> None:
    """The users that the session cookies of concurrent requests name are read by one query
    per turn of the event loop (app.authentication), and every request gets its own user."""
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    cookies = {}
    for member, email in ((admin, admin.email), (bob, bob.email)):
        resp = await admin.api.anonymous().post(
            "/api/authentication", json={"email": email, "password": PASSWORD})
        assert resp.status == 200
        cookies[member.id] = _session_cookie(resp.headers).split(";")[0].split("=", 1)[1]
    world.client.session.cookie_jar.clear()  # each request sends its own cookie, below
    anon = admin.api.anonymous()

    async def me(user_id: int) -> int:
        resp = await anon.get("/api/userinfo",
                              headers={"Cookie": f"commons_session={cookies[user_id]}"})
        assert resp.status == 200
        return int(resp.json["user"]["id"])

    await asyncio.sleep(0.05)
    query_log.reset()
    asked = [admin.id, bob.id] * 8
    assert await asyncio.gather(*(me(uid) for uid in asked)) == asked
    session_reads = [q for q in query_log if "session_epoch" in q]
    assert 1 <= len(session_reads) < len(asked), len(session_reads)


async def test_userinfo_of_concurrent_requests_is_read_together_each_its_own(
    world: World, query_log: QueryLog
) -> None:
    """The users asking GET /api/userinfo in one turn of the event loop are read by one query
    (app.actions.users.own_full_row); each gets their own profile, counts included."""
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    assert (await bob.api.post(f"/api/users/{admin.id}/followers")).status in (200, 201)
    await asyncio.sleep(0.05)
    query_log.reset()
    members = [admin, bob] * 8
    answers = await asyncio.gather(*(m.api.get("/api/userinfo") for m in members))
    for member, resp in zip(members, answers, strict=True):
        assert resp.status == 200
        user = resp.json["user"]
        assert user["id"] == member.id
        assert (user["followers_count"], user["following_count"]) == (
            (1, 0) if member is admin else (0, 1))
        assert user["followable"] is False
    profile_reads = [q for q in query_log if "followers_count" in q]
    assert 1 <= len(profile_reads) < len(members)
