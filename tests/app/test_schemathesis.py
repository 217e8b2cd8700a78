"""schemathesis over /api/openapi.json: no input makes the server fail (5xx) and every answer
conforms to the document (errors in the Error schema), over every operation.

So that successful paths are exercised and not only 404s, the server is seeded with a community
holding one of everything (users, groups, messages, comments, likes, polls, conversations...),
schemathesis authenticates as its admin, and every path parameter is bound to a seeded id; the
OpenAPI links of app.openapi let its stateful phase go on from what it creates.

Bounded for CI: a fixed number of examples per operation and a time cap (MAX_SECONDS). The server
runs in a thread of this process (its own event loop) and schemathesis in a subprocess (its CLI),
talking HTTP. A failure prints schemathesis' own report: each failing request, reproducible with
the curl command it gives.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from app.config import Settings
from app.main import create_app
from app.middleware import route_template
from app.passwords import Passwords
from app.resources import POOL
from app.routes import ROUTES
from tests.servers import free_port
from tests.support import PASSWORD, Member, World

# schemathesis' own time budgets, one per run: the stateful phase runs on its own, so that a
# slow machine cuts the other phases short rather than skip it. The test takes a little more.
MAX_SECONDS = 55
STATEFUL_SECONDS = 20
EXAMPLES = 6  # per operation and phase
# At least this share of the operations must answer a 2xx at least once (seen by the server):
# the seeded ids and credentials reach the operations' success paths, not only their 404s.
# Measured 98/152 (seed 1); see docs/faults.md for the operations that never get one.
MIN_SUCCESS_SHARE = 0.6
MIN_LINKS = 1  # OpenAPI links the stateful phase must have followed (it ran on what it made)
STATEFUL_EXAMPLES = 20  # scenarios, each up to 6 steps


@dataclasses.dataclass
class Seeded:
    port: int
    host: str
    login: str
    ids: dict[str, Any]  # path parameter name (or "<path>|<name>") -> value


async def _post(member: Member, path: str, body: dict[str, Any], key: str) -> int:
    resp = await member.api.post(path, json=body)
    assert resp.status in (200, 201), (path, resp.status, resp.text)
    return int(resp.json[key]["id"])


async def one_of_each(world: World, ann: Member, bob: Member, cat: Member,
                      n: int) -> dict[str, Any]:
    """A private group (bob a member, cat asking to join) with a message, a comment, likes, a
    flag and a webhook; an attachment, a conversation, an external system, a custom field and a
    content filter: the ids, by path parameter (`by_path` for `id`)."""
    ids: dict[str, Any] = {}
    group = await world.group(ann, f"Private {n}", members=(bob,), permission_mode="private",
                              allow_access_request=True, chat=True)
    group_id = ids["group_id"] = group["id"]
    request = await cat.api.post(f"/api/groups/{group_id}/membership_requests", json={})
    assert request.status in (200, 201), request.text
    ids["request_id"] = request.json["membership_request"]["id"]
    members = await ann.api.get(f"/api/groups/{group_id}/memberships")
    assert members.status == 200, members.text
    ids["membership_id"] = members.json["group_memberships"][-1]["id"]
    message_id = ids["message_id"] = await _post(
        ann, "/api/messages", {"message": {"body": f"Hello {n}", "group_id": group_id}},
        "message")
    comment_id = ids["comment_id"] = await _post(
        bob, f"/api/messages/{message_id}/comments", {"comment": {"text": "Nice"}}, "comment")
    ids["like_id"] = await _post(bob, f"/api/messages/{message_id}/likes", {}, "like")
    comment_like = await _post(ann, f"/api/messages/{message_id}/comments/{comment_id}/likes",
                               {}, "like")
    ids["flag_id"] = await _post(ann, f"/api/messages/{message_id}/flags", {}, "flag")
    webhook = await ann.api.post(f"/api/groups/{group_id}/webhooks",
                                 json={"webhook": {"name": f"Hook {n}"}})
    assert webhook.status == 201, webhook.text
    hook = webhook.json["webhook"]
    ids["webhook_id"] = hook["id"]
    parts = str(hook.get("url", "")).rstrip("/").split("/")
    ids["webhook_identifier"], ids["webhook_secret"] = parts[-2], parts[-1]
    form = aiohttp.FormData()
    form.add_field("attachment", b"hello", filename="a.txt", content_type="text/plain")
    uploaded = await ann.api.post("/api/attachments", data=form)
    assert uploaded.status == 201, uploaded.text
    ids["attachment_id"] = uploaded.json["attachment"]["id"]
    conversation = ids["conversation_id"] = await _post(ann, "/api/conversations", {
        "conversation": {"members_emails": f"{bob.email} {cat.email}", "name": f"Chat {n}"},
        "remark": {"text": "Hi"}}, "conversation")
    ids["external_system_id"] = await _post(ann, "/api/external_systems", {"external_system": {
        "name": f"CI {n}", "url": "https://ci.example"}}, "external_system")
    custom = await ann.api.post("/api/custom_fields", json={"name": f"Size {n}", "order": n})
    filtered = await ann.api.post("/api/content_filters", json={"word": f"darn{n}"})
    for resp in (custom, filtered):
        assert resp.status in (200, 201), resp.text
    ids["by_path"] = {
        "/api/custom_fields/{id}": custom.json["custom_field"]["id"],
        "/api/content_filters/{id}": filtered.json["content_filter"]["id"],
        "/api/conversations/{id}": conversation,
        "/api/messages/{message_id}/comments/{comment_id}/likes/{id}": comment_like,
        "/api/messages/{message_id}/comments/{id}": comment_id,
        "/api/messages/{message_id}/likes/{id}": ids["like_id"],
        "/api/groups/{id}/hide_message": group_id,
        "/api/media_files/{id}": ids["attachment_id"],
    }
    ids["comment_like_id"] = comment_like
    return ids


async def seed(world: World) -> dict[str, Any]:
    """One of everything in a community of its own, twice: the second set is what the
    destructive operations (DELETE, leave) get, so that they do not remove what the others
    work on. The ids, by path parameter."""
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    cat = await world.user(ann, "Cat")
    dan = await world.user(ann, "Dan")
    ids = await one_of_each(world, ann, bob, cat, 1)
    victims = await one_of_each(world, ann, bob, cat, 2)
    victims["user_id"] = dan.id
    ids.update({"user_id": bob.id, "my_user_id": ann.id, "company_login": bob.username,
                "thumbnail": "original", "filename": "a.txt", "filter": "all"})
    answers = [{"answer": "Yes"}, {"answer": "No"}]
    ids["poll_id"] = await _post(ann, "/api/polls", {"poll": {
        "question": "Lunch?", "poll_answers_attributes": answers}}, "poll")
    ids["topic_id"] = await _post(ann, "/api/topics", {"topic": {"name": "planning"}}, "topic")
    ids["reach_extension_id"] = await _post(ann, "/api/reach_extensions", {"reach_extension": {
        "name": "Seeded", "external_system_id": ids["external_system_id"],
        "button_type": "verb"}}, "reach_extension")
    streams = await ann.api.get("/api/streams")
    assert streams.status == 200, streams.text
    ids["stream_id"] = streams.json["streams"][0]["id"]
    follow = await ann.api.post(f"/api/users/{bob.id}/followers")
    assert follow.status in (200, 201), follow.text

    meeting = await ann.api.post("/api/meetings", json={"meeting": {
        "title": "Standup", "starts_at": "2030-01-01T10:00:00"}})
    thanks = await ann.api.post("/api/thanks", json={"thanks": {
        "body": "Thank you", "recipients": [bob.id]}})
    for resp in (meeting, thanks):
        assert resp.status in (200, 201), resp.text
    badges = await ann.api.get("/api/badges")
    notifications = await ann.api.get("/api/notifications")
    activities = await ann.api.get(f"/api/conversations/{ids['conversation_id']}/activities")
    by_path = ids["by_path"]
    by_path.update({
        "/api/meetings/{id}": meeting.json["meeting"]["id"],
        "/api/thanks/{id}": thanks.json["thanks"]["id"],
        "/api/tags/{id}": "planning",
        "/api/users/{user_id}/following/{id}": ann.id,
    })
    if badges.status == 200 and badges.json.get("badges"):
        by_path["/api/badges/{id}"] = badges.json["badges"][0]["id"]
    if notifications.status == 200 and notifications.json.get("notifications"):
        by_path["/api/notifications/{id}"] = notifications.json["notifications"][0]["id"]
    if activities.status == 200 and activities.json.get("activities"):
        by_path["/api/conversations/{conversation_id}/activities/{id}"] = (
            activities.json["activities"][0]["id"])
    ids["victims"] = victims
    ids["login"] = ann.email
    ids["host"] = ann.community.domain
    return ids


class ServerThread:
    """The app on a free port, in a thread with its own event loop, seeded."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.port = free_port()
        self.ids: dict[str, Any] = {}
        # (method, route template) of every operation answered with a 2xx, seen by the server
        self.succeeded: set[tuple[str, str]] = set()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ServerThread:
        self._thread.start()
        self._ready.wait(120)
        if self._error is not None:
            raise self._error
        assert self._ready.is_set(), "the server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        app = create_app(self.settings)

        async def record(request: web.Request, response: web.StreamResponse) -> None:
            if 200 <= response.status < 300:
                self.succeeded.add((request.method, route_template(request)))

        app.on_response_prepare.append(record)
        client = TestClient(TestServer(app, host="127.0.0.1", port=self.port))
        await client.start_server()
        try:
            world = World(app[POOL], Passwords(self.settings.argon2), client)
            self.ids = await seed(world)
            self.succeeded.clear()  # what the seeding did is not schemathesis' doing
            self._ready.set()
            await self._stop.wait()
        finally:
            await client.close()


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def destructive(method: str, path: str) -> bool:
    """Operations that remove what they act on (or the admin from it)."""
    return method == "DELETE" or path.endswith(("/leave", "/reject", "/approve"))


def config(ids: dict[str, Any], max_seconds: int) -> str:
    """schemathesis.toml: every path parameter bound to a seeded id (per operation for `id`),
    the second set for destructive operations."""
    names = {n for r in ROUTES for n in re.findall(r":(\w+)", r.path)} - {"id"}
    common = {f"path.{n}": ids[n] for n in sorted(names) if n in ids}
    victims = ids["victims"]
    lines = [
        f"max-time = {max_seconds}",
        "workers = 1",
        "[parameters]",
        *(f"{json.dumps(k)} = {_toml(v)}" for k, v in common.items()),
        "[generation]",
        f"max-examples = {EXAMPLES}",
        "[phases.stateful.generation]",
        f"max-examples = {STATEFUL_EXAMPLES}",
        "[checks]",
        "enabled = false",
        "not_a_server_error.enabled = true",
        "response_schema_conformance.enabled = true",
    ]
    for route in ROUTES:
        path = re.sub(r":(\w+)", r"{\1}", route.path)
        params = dict(common)
        by_path = ids["by_path"]
        if destructive(route.method, path):
            params.update({f"path.{n}": v for n, v in victims.items()
                           if n != "by_path" and f"path.{n}" in params})
            by_path = {**by_path, **victims["by_path"]}
        if "{id}" in path:
            prefix = next((p for p in by_path if path.startswith(p)), None)
            if prefix is None:
                continue
            params["path.id"] = by_path[prefix]
        elif params == common:
            continue
        lines += ["[[operations]]", f"include-path = {json.dumps(path)}",
                  f"include-method = {json.dumps(route.method)}",
                  f"parameters = {_toml(params)}"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def served(settings: Settings) -> Iterator[ServerThread]:
    # no rate limit in the way of a few thousand requests a minute by one user
    on = dataclasses.replace(settings, rate_limit_requests=10**9,
                             rate_limit_failed_logins=10**9, redis_url=None)
    with ServerThread(on) as server:
        yield server


def schemathesis(served: ServerThread, tmp_path: Path, phases: str, max_seconds: int) -> str:
    """Runs the CLI with `phases` within `max_seconds`; its output, asserting it passed."""
    ids = served.ids
    config_file = tmp_path / f"schemathesis-{phases.replace(',', '-')}.toml"
    config_file.write_text(config(ids, max_seconds))
    token = base64.b64encode(f"{ids['login']}:{PASSWORD}".encode()).decode()
    base = f"http://127.0.0.1:{served.port}"
    command = [
        str(Path(sys.executable).parent / "st"), "--config-file", str(config_file),
        "run", f"{base}/api/openapi.json", "--url", base,
        "-H", f"Host: {ids['host']}", "-H", f"Authorization: Basic {token}",
        "--phases", phases,
        "--seed", "1", "--no-color", "--generation-database", "none",
        "--request-timeout", "20", "--suppress-health-check", "all",
    ]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": ""}
    result = subprocess.run(command, capture_output=True, text=True, timeout=max_seconds * 4,
                            cwd=tmp_path, env=env)
    output = result.stdout + result.stderr
    (tmp_path / f"{config_file.stem}.txt").write_text(output)
    print(output[-3000:])
    assert result.returncode == 0, output[-20000:]
    return output


def test_schemathesis_finds_no_server_error(served: ServerThread, tmp_path: Path) -> None:
    output = schemathesis(served, tmp_path, "examples,coverage,fuzzing", MAX_SECONDS)
    summary = output[output.rindex("SUMMARY"):]
    tested = re.search(r"Selected: (\d+)/(\d+)\s+Tested: (\d+)", summary)
    assert tested is not None, summary
    assert tested.groups() == (str(len(ROUTES)),) * 3, summary  # every operation
    cases = re.search(r"(\d+) generated, (\d+) passed", summary)
    assert cases is not None and cases.group(1) == cases.group(2), summary
    assert int(cases.group(1)) >= 300, summary  # not a run cut short

    # the stateful phase on its own: from what its POSTs create, through the OpenAPI links
    output = schemathesis(served, tmp_path, "stateful", STATEFUL_SECONDS)
    stateful = re.search(r"Stateful.*?Scenarios:\s+(\d+).*?API Links:\s+(\d+) covered / (\d+)",
                         output, re.S)
    assert stateful is not None, output[-6000:]
    scenarios, links, all_links = (int(g) for g in stateful.groups())
    steps = re.search(r"(\d+) generated, (\d+) passed", output[output.rindex("SUMMARY"):])
    assert steps is not None and steps.group(1) == steps.group(2), output[-6000:]

    ok = {(r.method, r.path) for r in ROUTES} & served.succeeded
    missed = sorted(f"{r.method} {r.path}" for r in ROUTES if (r.method, r.path) not in ok)
    print(f"schemathesis: {tested.group(3)} operations, {cases.group(1)} cases "
          f"(+{steps.group(1)} stateful), {len(ok)}/{len(ROUTES)} operations answered a 2xx; "
          f"stateful: {scenarios} scenarios, {links}/{all_links} links followed")
    print("never answered a 2xx:", ", ".join(missed))
    assert scenarios > 0 and links >= MIN_LINKS, (scenarios, links, all_links)
    assert len(ok) >= MIN_SUCCESS_SHARE * len(ROUTES), missed
