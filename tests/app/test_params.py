"""The parameter decoder, paging, path ids, routing conventions and the error model.

The decoder is proved twice: as pure functions (`nest`, `parse_query`) and through a tiny
aiohttp app that echoes what `read_params` decoded, so every body encoding goes through a real
HTTP request. The conventions (paging, `.json`, 404/405, error bodies) are proved on the real
endpoints.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, make_mocked_request

from app.config import Settings
from app.errors import BadRequest
from app.main import create_app
from app.middleware import errors_middleware, new_request_id
from app.params import (
    MAX_DEPTH,
    Page,
    PageQuery,
    UploadedFile,
    nest,
    parse_id,
    parse_query,
    read_params,
    validate,
)
from app.passwords import Passwords
from app.resources import POOL
from app.responses import json_response
from app.routes import ROUTES
from tests.support import Api, World

# --- nest / parse_query: pure functions -------------------------------------------------------


def test_nest_bracket_hashes() -> None:
    assert nest([("a[b][c]", "1"), ("a[b][d]", "2"), ("a[e]", "3"), ("f", "4")]) == {
        "a": {"b": {"c": "1", "d": "2"}, "e": "3"},
        "f": "4",
    }


def test_nest_appends_with_empty_brackets() -> None:
    assert nest([("email[]", "a@x.org"), ("email[]", "b@x.org")]) == {
        "email": ["a@x.org", "b@x.org"]
    }
    assert nest([("a[b][]", "1"), ("a[b][]", "2")]) == {"a": {"b": ["1", "2"]}}


def test_nest_indexed_hashes_are_dicts_keyed_by_index() -> None:
    pairs = [
        ("poll[poll_answers_attributes][0][answer]", "Yes"),
        ("poll[poll_answers_attributes][1][answer]", "No"),
        ("poll[question]", "Lunch?"),
    ]
    assert nest(pairs) == {
        "poll": {
            "poll_answers_attributes": {"0": {"answer": "Yes"}, "1": {"answer": "No"}},
            "question": "Lunch?",
        }
    }


def test_nest_list_of_hashes_starts_a_new_hash_when_a_key_repeats() -> None:
    pairs = [
        ("group_memberships[][user_id]", "1"),
        ("group_memberships[][role]", "admin"),
        ("group_memberships[][user_id]", "2"),
        ("group_memberships[][role]", "member"),
        ("group_memberships[][email]", "c@x.org"),
    ]
    assert nest(pairs) == {
        "group_memberships": [
            {"user_id": "1", "role": "admin"},
            {"user_id": "2", "role": "member", "email": "c@x.org"},
        ]
    }


def test_nest_last_value_wins_for_a_plain_key() -> None:
    assert nest([("a", "1"), ("a", "2")]) == {"a": "2"}


def test_nest_malformed_brackets_are_a_plain_key() -> None:
    assert nest([("a[b", "1"), ("c]", "2")]) == {"a[b": "1", "c]": "2"}


def test_nest_mixing_hash_and_list_forms_is_a_400() -> None:
    with pytest.raises(BadRequest):
        nest([("a[][b]", "1"), ("a[][]", "2")])


def test_nest_deeper_than_the_limit_is_a_400() -> None:
    ok = "a" + "[x]" * (MAX_DEPTH - 1)
    assert nest([(ok, "1")])
    with pytest.raises(BadRequest) as err:
        nest([("a" + "[x]" * MAX_DEPTH, "1")])
    assert "nested too deeply" in err.value.messages[0]


def test_parse_query_semicolons_percent_escapes_and_blanks() -> None:
    assert parse_query("a=1;b=2&c=") == {"a": "1", "b": "2", "c": ""}
    assert parse_query("message%5Bbody%5D=Hello+there%21;message%5Bgroup_id%5D=") == {
        "message": {"body": "Hello there!", "group_id": ""}
    }
    # an escaped ';' is data, not a separator
    assert parse_query("q=a%3Bb") == {"q": "a;b"}
    assert parse_query("") == {}


def page_of(params: dict[str, Any]) -> Page:
    """The page of a request's parameters, parsed as every list parses it (PageQuery)."""
    return validate(PageQuery, params).paging


def test_page_query_defaults_caps_and_rejects() -> None:
    assert page_of({}) == page_of({"page": "", "per_page": ""})
    page = page_of({})
    assert (page.page, page.per_page, page.offset) == (1, 20, 0)
    assert page_of({"per_page": "501"}).per_page == 500
    assert page_of({"page": "3", "per_page": "10"}).offset == 20
    for bad in ("0", "-1", "abc", "1.5", ["2"]):
        with pytest.raises(BadRequest):
            page_of({"per_page": bad})
        with pytest.raises(BadRequest):
            page_of({"page": bad})
    assert page_of({"page": "1000000"}).page == 1_000_000
    with pytest.raises(BadRequest, match="too large"):
        page_of({"page": "1000001"})


def test_parse_id_accepts_slugs() -> None:
    assert parse_id("42") == 42
    assert parse_id("42-the-answer") == 42
    assert parse_id("x42") is None
    assert parse_id("42x") is None
    assert parse_id("") is None
    assert parse_id("9" * 19) is None


# --- read_params through a real HTTP request --------------------------------------------------


async def _plain(value: Any) -> Any:
    if isinstance(value, UploadedFile):
        return {"filename": value.filename, "content_type": value.content_type,
                "data": (await value.read()).decode()}
    if isinstance(value, dict):
        return {k: await _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [await _plain(v) for v in value]
    return value


async def _echo(request: web.Request) -> web.Response:
    return json_response(await _plain(await read_params(request)))


async def _boom(request: web.Request) -> web.Response:
    raise RuntimeError("kaboom")


@pytest.fixture
async def echo(aiohttp_client: Any) -> TestClient:
    app = web.Application(middlewares=[errors_middleware], client_max_size=64 * 1024)
    app.router.add_route("*", "/echo", _echo)
    app.router.add_get("/boom", _boom)
    return await aiohttp_client(app)


async def test_query_string_brackets(echo: TestClient) -> None:
    resp = await echo.get("/echo?a[b][c]=1&email[]=x@y.org&email[]=z@y.org;q=hi")
    assert resp.status == 200
    assert await resp.json() == {"a": {"b": {"c": "1"}}, "email": ["x@y.org", "z@y.org"],
                                 "q": "hi"}


async def test_form_body_with_semicolons(echo: TestClient) -> None:
    resp = await echo.post(
        "/echo", data="message[body]=Hi%20all;message[group_id]=;tags[]=a;tags[]=b",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert await resp.json() == {"message": {"body": "Hi all", "group_id": ""},
                                 "tags": ["a", "b"]}


async def test_json_body(echo: TestClient) -> None:
    body = {"message": {"body": "Hi", "attachment_ids": [1, 2]}, "flag": True, "n": None}
    resp = await echo.post("/echo", json=body)
    assert await resp.json() == body
    # +json media types and an empty JSON body
    resp = await echo.post("/echo", data=b'{"a": 1}',
                           headers={"Content-Type": "application/vnd.api+json"})
    assert await resp.json() == {"a": 1}
    resp = await echo.post("/echo", data=b"", headers={"Content-Type": "application/json"})
    assert await resp.json() == {}


async def test_multipart_with_a_file(echo: TestClient) -> None:
    form = aiohttp.FormData()
    form.add_field("message[body]", "With a file")
    form.add_field("message[attachment_ids][]", "7")
    form.add_field("message[attachment_ids][]", "8")
    form.add_field("message[attachment]", b"hello bytes", filename="hello.txt",
                   content_type="text/plain")
    resp = await echo.post("/echo", data=form)
    assert resp.status == 200
    assert await resp.json() == {
        "message": {
            "body": "With a file",
            "attachment_ids": ["7", "8"],
            "attachment": {"filename": "hello.txt", "content_type": "text/plain",
                           "data": "hello bytes"},
        }
    }


async def test_query_and_body_merge_body_wins(echo: TestClient) -> None:
    resp = await echo.post("/echo?user[first_name]=Q&user[title]=Boss&page=2",
                           json={"user": {"first_name": "B", "last_name": "L"}})
    assert await resp.json() == {
        "user": {"first_name": "B", "title": "Boss", "last_name": "L"}, "page": "2"
    }


async def test_get_ignores_the_body(echo: TestClient) -> None:
    resp = await echo.get("/echo?a=1", data=b'{"b": 2}',
                          headers={"Content-Type": "application/json"})
    assert await resp.json() == {"a": "1"}


def _is_error(body: Any, code: str) -> None:
    assert isinstance(body, dict)
    assert next(iter(body)) == "errors"
    assert isinstance(body["errors"], list) and body["errors"]
    assert all(isinstance(m, str) and m for m in body["errors"])
    assert body["code"] == code
    assert set(body) <= {"errors", "code", "fields", "request_id"}


@pytest.mark.parametrize(
    ("data", "ctype", "status", "code"),
    [
        (b'{"a": ', "application/json", 400, "bad_request"),
        (b"[1, 2]", "application/json", 400, "bad_request"),
        (b'"text"', "application/json", 400, "bad_request"),
        (b"\xff\xfe=1", "application/x-www-form-urlencoded", 400, "bad_request"),
        (b"<a>", "application/xml", 400, "bad_request"),
        (b"abc", "application/yaml", 415, "unsupported_media_type"),
        (b"abc", "application/octet-stream", 415, "unsupported_media_type"),
        (("a" + "[b]" * 20 + "=1").encode(), "application/x-www-form-urlencoded", 400,
         "bad_request"),
    ],
)
async def test_undecodable_bodies(
    echo: TestClient, data: bytes, ctype: str, status: int, code: str
) -> None:
    resp = await echo.post("/echo", data=data, headers={"Content-Type": ctype})
    assert resp.status == status
    assert resp.content_type == "application/json"
    _is_error(await resp.json(), code)
    assert resp.headers["X-Request-Id"]


async def test_deep_nesting_in_the_query_is_a_400(echo: TestClient) -> None:
    resp = await echo.get("/echo?" + "a" + "[b]" * 20 + "=1")
    assert resp.status == 400
    _is_error(await resp.json(), "bad_request")


async def test_too_large_bodies_are_413(echo: TestClient) -> None:
    big = b"x" * (65 * 1024)
    resp = await echo.post("/echo", data=b'{"a": "' + big + b'"}',
                           headers={"Content-Type": "application/json"})
    assert resp.status == 413
    _is_error(await resp.json(), "too_large")
    form = aiohttp.FormData()
    form.add_field("file", big, filename="big.bin", content_type="application/octet-stream")
    resp = await echo.post("/echo", data=form)
    assert resp.status == 413
    _is_error(await resp.json(), "too_large")
    # many parts, each under the limit, over it together
    form = aiohttp.FormData()
    for i in range(3):
        form.add_field(f"f{i}", b"y" * (30 * 1024), filename=f"{i}.bin",
                       content_type="application/octet-stream")
    resp = await echo.post("/echo", data=form)
    assert resp.status == 413
    _is_error(await resp.json(), "too_large")


async def test_unexpected_errors_are_500_with_the_request_id(echo: TestClient) -> None:
    resp = await echo.get("/boom", headers={"X-Request-Id": "req-42"})
    assert resp.status == 500
    body = await resp.json()
    _is_error(body, "internal")
    assert body["request_id"] == "req-42" == resp.headers["X-Request-Id"]
    assert "kaboom" not in await resp.text()


# --- conventions on the real endpoints ----------------------------------------------------------


async def test_per_page_defaults_caps_and_bad_values(world: World) -> None:
    admin = await world.community()
    await world.many_users(admin, 520)
    default = await admin.api.get("/api/users")
    assert default.status == 200 and len(default.json["users"]) == 20
    capped = await admin.api.get("/api/users", params={"per_page": "501"})
    assert capped.status == 200 and len(capped.json["users"]) == 500
    rest = await admin.api.get("/api/users", params={"per_page": "500", "page": "2"})
    assert len(rest.json["users"]) == 21  # 520 + the admin
    past = await admin.api.get("/api/users", params={"page": "99"})
    assert past.status == 200 and past.json == {"users": []}
    for name in ("page", "per_page"):
        for bad in ("0", "-1", "abc", "2.5"):
            resp = await admin.api.get("/api/users", params={name: bad})
            assert resp.status == 400, (name, bad, resp.text)
            _is_error(resp.json, "bad_request")
    for path in ("/api/users/search?q=a", "/api/users/suggest?q=a",
                 f"/api/users/{admin.id}/followers", f"/api/users/{admin.id}/following",
                 f"/api/users/{admin.id}/employees"):
        sep = "&" if "?" in path else "?"
        resp = await admin.api.get(f"{path}{sep}per_page=abc")
        assert resp.status == 400, (path, resp.text)


async def test_ids_with_slugs_in_paths(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob", "Stone")
    for path in (f"/api/users/{bob.id}-bobstone", f"/api/users/{bob.id}-bobstone.json",
                 f"/api/users/{bob.id}-whatever-else"):
        resp = await admin.api.get(path)
        assert resp.status == 200, path
        assert resp.json["user"]["id"] == bob.id
    for path in (f"/api/users/x{bob.id}", "/api/users/-1", f"/api/users/{bob.id}x"):
        resp = await admin.api.get(path)
        assert resp.status == 404, path
        _is_error(resp.json, "not_found")


def _sample_path(path: str) -> str:
    return "/".join("1" if seg.startswith(":") else seg for seg in path.split("/"))


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
async def test_every_route_resolves_with_and_without_json(
    settings: Settings, route: Any
) -> None:
    app = create_app(settings)
    for path in (_sample_path(route.path), _sample_path(route.path) + ".json"):
        request = make_mocked_request(route.method, path, app=app)
        match = await app.router.resolve(request)
        assert match.http_exception is None, path
        assert match.route.handler is route.handler, path


async def test_json_suffix_on_each_kind_of_route(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob", company_login="bob.s")
    await world.user(admin, "Eve", manager_id=bob.id)
    field = await admin.api.post("/api/custom_fields.json", json={"name": "Dept"})
    assert field.status == 201
    field_id = field.json["custom_field"]["id"]
    for path in (
        "/api/userinfo.json",  # literal
        "/api/users.json",
        "/api/users/search.json?q=bob",  # literal beside a parameter
        f"/api/users/{bob.id}.json",  # parameter
        f"/api/users/{bob.id}/employees.json",  # literal after a parameter
        f"/api/users/{bob.id}/followers.json",
        "/api/users/company_login/bob.s.json",  # parameter after literals
        f"/api/custom_fields/{field_id}.json",
        "/api/openapi.json",
    ):
        plain = await admin.api.get(path.replace(".json", "", 1) if ".json?" not in path
                                    else path.replace(".json?", "?"))
        suffixed = await admin.api.get(path)
        assert suffixed.status == 200, (path, suffixed.text)
        assert plain.status == 200, (path, plain.text)
        assert suffixed.json == plain.json, path
    assert (await admin.api.put(f"/api/users/{bob.id}.json",
                                json={"user": {"title": "Chief"}})).status == 200
    assert (await admin.api.delete(f"/api/custom_fields/{field_id}.json")).status == 204


async def test_unknown_path_is_a_json_404(world: World) -> None:
    admin = await world.community()
    for api in (admin.api, admin.api.anonymous()):
        for path in ("/api/nope", "/api/users/1/nope", "/nothing", "/api/users.yaml"):
            resp = await api.get(path)
            assert resp.status == 404, path
            assert resp.headers["Content-Type"].startswith("application/json")
            _is_error(resp.json, "not_found")


async def test_wrong_method_is_a_json_405_with_allow(world: World) -> None:
    admin = await world.community()
    cases = {
        ("PATCH", "/api/users"): {"GET", "POST"},
        ("POST", f"/api/users/{admin.id}"): {"GET", "PUT", "DELETE"},
        ("PUT", "/api/userinfo.json"): {"GET"},
        ("DELETE", "/api/custom_fields"): {"GET", "POST"},
    }
    for (method, path), allowed in cases.items():
        resp = await admin.api.request(method, path)
        assert resp.status == 405, (method, path)
        _is_error(resp.json, "method_not_allowed")
        assert {m.strip() for m in resp.headers["Allow"].split(",")} == allowed


async def test_error_bodies_of_the_real_endpoints(world: World) -> None:
    admin = await world.community("Acme")
    bob = await world.user(admin, "Bob")
    cases: list[tuple[Api, str, str, dict[str, Any], int, str]] = [
        (admin.api, "GET", "/api/users", {"params": {"per_page": "abc"}}, 400, "bad_request"),
        (admin.api, "POST", "/api/users", {"data": b"{oops",
                                           "headers": {"Content-Type": "application/json"}},
         400, "bad_request"),
        (admin.api.anonymous(), "GET", "/api/users", {}, 401, "unauthorized"),
        (bob.api, "POST", "/api/custom_fields", {"json": {"name": "X"}}, 403, "forbidden"),
        (admin.api, "GET", "/api/users/987654", {}, 404, "not_found"),
        (admin.api, "PATCH", "/api/users", {}, 405, "method_not_allowed"),
        (admin.api, "POST", "/api/users", {"json": {"user": {"email": bob.email}}}, 409,
         "conflict"),
        (admin.api, "POST", "/api/users", {"data": b"user: {}",
                                           "headers": {"Content-Type": "application/yaml"}},
         415, "unsupported_media_type"),
        (admin.api, "POST", "/api/users", {"json": {"user": {"email": "nope"}}}, 422,
         "validation_failed"),
    ]
    for api, method, path, kwargs, status, code in cases:
        resp = await api.request(method, path, **kwargs)
        assert resp.status == status, (method, path, resp.text)
        _is_error(resp.json, code)
        assert resp.headers["X-Request-Id"]
    invalid = await admin.api.post("/api/users", json={"user": {"email": "nope"}})
    assert invalid.json["fields"] == {"user[email]": ["is not a valid e-mail address"]}
    assert invalid.json["errors"] == ["Email is not a valid e-mail address"]
    conflict = await admin.api.post("/api/users", json={"user": {"email": bob.email}})
    assert conflict.json["fields"] == {"user[email]": ["has already been taken"]}
    while True:  # failed logins count per fixed minute: try again if one ended meanwhile
        target = await world.user(admin, "Target")
        minute = int(time.time() // 60)
        wrong = target.api.as_user(target.email, "wrong password")
        for _ in range(10):
            assert (await wrong.get("/api/userinfo")).status == 401
        limited = await wrong.get("/api/userinfo")
        if int(time.time() // 60) == minute:
            break
    assert limited.status == 429
    _is_error(limited.json, "rate_limited")
    assert int(limited.headers["Retry-After"]) >= 1


async def test_request_rate_limit_per_user(
    aiohttp_client: Any, settings: Settings
) -> None:
    app = create_app(dataclasses.replace(settings, rate_limit_requests=3))
    client = await aiohttp_client(app)
    world = World(client.app[POOL], Passwords(settings.argon2), client)
    admin = await world.community()
    while True:  # the limit is per fixed minute: try again (afresh) if one ended meanwhile
        user = await world.user(admin, "Busy")
        minute = int(time.time() // 60)
        statuses = [(await user.api.get("/api/userinfo")).status for _ in range(3)]
        limited = await user.api.get("/api/userinfo")
        if int(time.time() // 60) == minute:
            break
    assert statuses == [200, 200, 200]
    assert limited.status == 429
    _is_error(limited.json, "rate_limited")
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    other = await world.user(admin, "Other")
    assert (await other.api.get("/api/userinfo")).status == 200


async def test_validation_errors_name_every_field(world: World) -> None:
    admin = await world.community()
    resp = await admin.api.post("/api/users", json={"user": {"manager_id": "abc",
                                                             "email": "a@b.example",
                                                             "first_name": "x" * 101}})
    assert resp.status == 422
    assert set(resp.json["fields"]) == {"user[manager_id]", "user[first_name]"}
    assert len(resp.json["errors"]) == 2
    missing = await admin.api.post("/api/users", json={})
    assert missing.status == 422
    assert missing.json["fields"] == {"user": ["can't be blank"]}


async def test_values_the_database_cannot_take_are_400_not_500(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    cases = [
        ("PUT", f"/api/users/{bob.id}", {"json": {"user": {"manager_id": 2**63}}}),
        ("PUT", f"/api/users/{bob.id}", {"json": {"user": {"title": "nul\x00byte"}}}),
        ("POST", "/api/custom_fields", {"data": {"name": "nul\x00byte"}}),
        ("GET", "/api/users/company_login/a%00b", {}),
    ]
    for method, path, kwargs in cases:
        resp = await admin.api.request(method, path, **kwargs)
        assert resp.status == 400, (method, path, resp.text)
        _is_error(resp.json, "bad_request")
    assert (await admin.api.get(f"/api/users/{bob.id}")).json["user"]["title"] is None
    for q in ("-", "a-b", "@", ".", "a@", "x.y", "é", "_", "-a", "'", "\\", "a:b", "&", "!",
              "<->", "a'b", "ab*", "o'neil", "a\x00b", "x" * 500):
        resp = await admin.api.get("/api/users/search", params={"q": q})
        assert resp.status == 200, (q, resp.text)


async def test_request_ids_are_echoed_only_when_sane(echo: TestClient) -> None:
    ok = await echo.get("/echo", headers={"X-Request-Id": "abc.DEF_1:2-3"})
    assert ok.headers["X-Request-Id"] == "abc.DEF_1:2-3"
    for bad in ("has space", "x" * 129, "semi;colon", "<script>"):
        resp = await echo.get("/echo", headers={"X-Request-Id": bad})
        assert resp.headers["X-Request-Id"] != bad
        assert len(resp.headers["X-Request-Id"]) == 32


def test_new_request_ids_are_random_hex_and_differ_in_forked_workers() -> None:
    ids = {new_request_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a worker forked from this process: its own sequence
        os.write(write, new_request_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.waitpid(pid, 0)
    os.close(read)
    assert len(child) == 32 and child != new_request_id()


async def test_a_body_without_content_type_is_read_as_a_form(world: World) -> None:
    admin = await world.community()
    resp = await admin.api.post(
        "/api/custom_fields", data=b"name=Shoe+size;order=3",
        skip_auto_headers={"Content-Type"},
    )
    assert resp.status == 201, resp.text
    assert resp.json["custom_field"]["name"] == "Shoe size"
