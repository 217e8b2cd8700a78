"""The `commons` command: create-community, create-user, routes, seed-demo (real processes on a
fresh database), and that what it creates works through the API."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from app.config import Settings
from app.main import create_app
from app.routes import ROUTES
from tests.servers import REPO_ROOT
from tests.support import Api

CHEAP_ARGON2 = {"COMMONS_ARGON2_TIME_COST": "1", "COMMONS_ARGON2_MEMORY_KIB": "1024",
                "COMMONS_ARGON2_PARALLELISM": "1"}


async def commons(database_url: str | None, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, **CHEAP_ARGON2}
    env.pop("DATABASE_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", *args, cwd=REPO_ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture
async def api_client(
    aiohttp_client: Any, settings: Settings, fresh_database_url: str
) -> TestClient:
    """The app serving the fresh database the command line writes to."""
    app = create_app(dataclasses.replace(settings, database_url=fresh_database_url))
    return await aiohttp_client(app)


async def test_create_community_and_user_then_log_in(
    fresh_database_url: str, api_client: TestClient
) -> None:
    code, out, err = await commons(
        fresh_database_url, "create-community", "--name", "Initech", "--domain",
        "Initech.Example", "--admin-email", "boss@initech.example", "--admin-password",
        "tps reports!",
    )
    assert code == 0, err
    community = json.loads(out)
    assert community["name"] == "Initech"
    assert community["domain"] == "initech.example"
    assert community["base_url"] == "https://initech.example"
    assert community["admin"]["email"] == "boss@initech.example"
    assert community["admin"]["role"] == "tenant_admin"

    code, out, err = await commons(
        fresh_database_url, "create-user", "--domain", "initech.example", "--email",
        "peter@initech.example", "--password", "hawaiian shirt", "--first-name", "Peter",
        "--last-name", "Gibbons", "--username", "peterg",
    )
    assert code == 0, err
    user = json.loads(out)
    assert user["username"] == "peterg"
    assert user["name"] == "Peter Gibbons"
    assert user["email"] == "peter@initech.example"
    assert user["role"] == "member"
    assert user["url"] == f"https://initech.example/users/{user['id']}-peterg"

    api = Api(api_client, "initech.example")
    for login in ("peter@initech.example", "peterg"):
        me = await api.as_user(login, "hawaiian shirt").get("/api/userinfo")
        assert me.status == 200, me.text
        assert me.json["user"]["id"] == user["id"]
    boss = api.as_user("boss@initech.example", "tps reports!")
    resp = await boss.get("/api/userinfo")
    assert resp.status == 200 and resp.json["user"]["id"] == community["admin"]["id"]
    assert resp.json["user"]["role"] == "tenant_admin"
    listed = await boss.get("/api/users")
    assert [u["id"] for u in listed.json["users"]] == [community["admin"]["id"], user["id"]]
    assert (await api.as_user("peterg", "wrong").get("/api/userinfo")).status == 401

    code, out, err = await commons(
        fresh_database_url, "create-user", "--domain", "initech.example", "--email",
        "milton@initech.example", "--password", "my stapler", "--role", "tenant_admin",
    )
    assert code == 0, err
    assert json.loads(out)["role"] == "tenant_admin"
    milton = api.as_user("milton@initech.example", "my stapler")
    assert (await milton.post("/api/custom_fields", json={"name": "Desk"})).status == 201


async def test_command_line_errors(fresh_database_url: str) -> None:
    args = ["create-community", "--name", "A", "--domain", "a.example", "--admin-email",
            "admin@a.example", "--admin-password", "password1"]
    assert (await commons(fresh_database_url, *args))[0] == 0
    code, out, err = await commons(fresh_database_url, *args)
    assert code == 1 and out == ""
    assert "already exists" in err
    code, _, err = await commons(fresh_database_url, "create-user", "--domain",
                                 "nowhere.example", "--email", "x@y.example", "--password",
                                 "password1")
    assert code != 0 and "nowhere.example" in err
    code, _, err = await commons(fresh_database_url, "create-user", "--domain", "a.example",
                                 "--email", "not-an-email", "--password", "password1")
    assert code == 1 and "error:" in err
    code, _, err = await commons(fresh_database_url, "create-user", "--domain", "a.example",
                                 "--email", "admin@a.example", "--password", "password1")
    assert code == 1 and "taken" in err
    code, _, err = await commons(fresh_database_url, "create-community", "--name", "B",
                                 "--domain", "b.example", "--admin-email", "nope",
                                 "--admin-password", "password1")
    assert code == 1 and "error:" in err


async def test_routes_prints_every_route() -> None:
    code, out, err = await commons(None, "routes")
    assert code == 0, err
    lines = out.splitlines()
    # ROUTES as a fresh process sees it (the tree may change while a long test run goes on)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c",
        "import json; from app.routes import ROUTES; "
        "print(json.dumps([[r.method, r.path] for r in ROUTES]))",
        cwd=REPO_ROOT, stdout=asyncio.subprocess.PIPE,
    )
    table, _ = await proc.communicate()
    assert lines == [f"{method} {path}" for method, path in json.loads(table)]
    assert len(lines) >= len(ROUTES) > 20
    assert "GET /api/users/:user_id" in lines
    assert "DELETE /api/users/:user_id/followers/:my_user_id" in lines
    assert len(set(lines)) == len(lines)


async def test_seed_demo_fills_users_groups_and_messages(
    fresh_database_url: str, api_client: TestClient
) -> None:
    code, _, err = await commons(
        fresh_database_url, "create-community", "--name", "Demo", "--domain", "demo.example",
        "--admin-email", "admin@demo.example", "--admin-password", "admin password",
    )
    assert code == 0, err
    code, out, err = await commons(fresh_database_url, "seed-demo", "--domain", "demo.example",
                                   "--users", "12")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["users_created"] == 12
    api = Api(api_client, "demo.example", "admin@demo.example", "admin password")
    users = (await api.get("/api/users")).json["users"]
    assert len(users) == 13
    seeded = [u for u in users if u["role"] == "member"]
    assert sum(u["following_count"] for u in seeded) > 0
    assert all(len(u["custom_fields"]) == 2 for u in seeded)
    assert sum(1 for u in seeded if u["manager"] is not None) == 11
    fields = (await api.get("/api/custom_fields")).json["custom_fields"]
    assert [f["name"] for f in fields] == ["Department", "Location"]
    # the demo password works for a seeded user
    one = Api(api_client, "demo.example", seeded[0]["username"], summary["password"])
    assert (await one.get("/api/userinfo")).status == 200
    # groups and a feed with comments and likes, made through the real actions
    assert summary["groups_created"] == 3
    assert summary["messages_created"] == 24
    groups = (await api.get("/api/groups", params={"per_page": "50"})).json["groups"]
    assert {"Engineering", "Design Crit"} <= {g["name"] for g in groups}
    feed = (await one.get("/api/messages", params={"stream_id": "", "per_page": "50"})).json
    assert feed["messages"]
    assert any(m["comments_count"] and m["likes_count"] for m in feed["messages"])
    assert any(m["tags"] for m in feed["messages"])
    # running it again adds more people, not duplicates
    code, out, err = await commons(fresh_database_url, "seed-demo", "--domain", "demo.example",
                                   "--users", "3")
    assert code == 0, err
    assert len((await api.get("/api/users", params={"per_page": "100"})).json["users"]) == 16


async def test_stream_names_classic_on_create_and_update_community(
    aiohttp_client: Any, settings: Settings, fresh_database_url: str, api_client: TestClient
) -> None:
    """Older real clients look streams up by "Home Stream" and "Company Stream"."""
    code, out, err = await commons(
        fresh_database_url, "create-community", "--name", "Old", "--domain", "old.example",
        "--admin-email", "boss@old.example", "--admin-password", "tps reports!",
        "--stream-names", "classic",
    )
    assert code == 0, err
    assert json.loads(out)["stream_names"] == "classic"
    boss = Api(api_client, "old.example").as_user("boss@old.example", "tps reports!")
    streams = await boss.get("/api/streams.json")
    assert [s["name"] for s in streams.json["streams"]] == [
        "Home Stream", "@Mentions", "Bookmarked", "Sent", "Company Stream"]
    primary = await boss.get("/api/streams/primary")
    assert primary.json["stream"]["name"] == "Home Stream"

    code, out, err = await commons(
        fresh_database_url, "update-community", "--domain", "OLD.example",
        "--stream-names", "current",
    )
    assert code == 0, err
    assert json.loads(out)["stream_names"] == "current"
    # a fresh server (a running one sees it once its short community cache expires)
    fresh = await aiohttp_client(
        create_app(dataclasses.replace(settings, database_url=fresh_database_url)))
    boss = Api(fresh, "old.example").as_user("boss@old.example", "tps reports!")
    streams = await boss.get("/api/streams")
    assert [s["name"] for s in streams.json["streams"]] == [
        "Home", "@Mentions", "Bookmarked", "Sent", "Company"]

    code, _, err = await commons(
        fresh_database_url, "update-community", "--domain", "nowhere.example",
        "--stream-names", "classic",
    )
    assert code == 1 and "no community with domain nowhere.example" in err
    code, _, err = await commons(
        fresh_database_url, "update-community", "--domain", "old.example",
        "--stream-names", "modern",
    )
    assert code == 2 and "invalid choice" in err


async def test_backfill_feed_fills_in_batches(fresh_database_url: str) -> None:
    code, _, err = await commons(fresh_database_url, "migrate")
    assert code == 0, err
    code, out, err = await commons(fresh_database_url, "backfill-feed", "--batch", "100")
    assert code == 0, err
    assert json.loads(out) == {"filled": {"message_recipients": 0, "message_topics": 0}}
    code, _, err = await commons(fresh_database_url, "backfill-feed", "--batch", "0")
    assert code == 2 and "--batch" in err
