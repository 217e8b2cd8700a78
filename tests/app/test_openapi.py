"""GET /api/openapi.json: the OpenAPI 3.1 document generated from the route table."""

from __future__ import annotations

import ast
import inspect
import re
import sys
from typing import Any

from app.routes import ROUTES
from tests.support import World

METHODS = {"get", "put", "post", "delete", "patch"}


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


async def test_openapi_document(world: World) -> None:
    admin = await world.community()
    anon = admin.api.anonymous()
    resp = await anon.get("/api/openapi.json")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("application/json")
    doc = resp.json
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["title"] and doc["info"]["version"]
    assert (await anon.get("/api/openapi")).json == doc
    # served alike at any host, even one no community answers to
    elsewhere = anon.anonymous()
    elsewhere.host = "unknown.example"
    assert (await elsewhere.get("/api/openapi.json")).json == doc

    # one operation per route, with its path parameters
    operations = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
    expected = {(r.method, re.sub(r":(\w+)", r"{\1}", r.path)) for r in ROUTES}
    assert operations == expected
    ids = []
    for path, item in doc["paths"].items():
        assert path.startswith("/api/")
        for method, op in item.items():
            assert method in METHODS
            ids.append(op["operationId"])
            assert op["summary"]
            named = set(re.findall(r"{(\w+)}", path))
            in_path = {p["name"] for p in op["parameters"] if p["in"] == "path"}
            assert in_path == named, (method, path)
            assert all(p["required"] for p in op["parameters"] if p["in"] == "path")
            assert op["responses"]["default"]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/Error"}
    assert len(ids) == len(set(ids)), "operationIds must be unique"

    # every $ref resolves to a component schema
    schemas = doc["components"]["schemas"]
    for ref in _refs(doc):
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.rsplit("/", 1)[1] in schemas, ref

    # request models
    create = doc["paths"]["/api/users"]["post"]["requestBody"]["content"]
    assert set(create) == {"application/json", "application/x-www-form-urlencoded",
                           "multipart/form-data"}
    body = schemas[create["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]]
    assert body["required"] == ["user"]
    user_params = schemas[_refs(body["properties"]["user"])[0].rsplit("/", 1)[1]]
    for name in ("first_name", "last_name", "email", "username", "password", "title",
                 "company_login", "manager_id", "role", "custom_fields"):
        assert name in user_params["properties"], name
    assert "UserUpdateBody" in schemas
    field = schemas["CustomFieldBody"]["properties"]
    assert set(field) >= {"name", "order"}
    assert set(schemas["Credentials"]["properties"]) == {"email", "password"}
    assert schemas["Error"]["required"] == ["errors", "code"]

    # query parameters of the users list, with paging
    params = {p["name"]: p for p in doc["paths"]["/api/users"]["get"]["parameters"]}
    assert set(params) == {"state", "email", "page", "per_page"}
    assert params["per_page"]["schema"]["maximum"] == 500
    assert params["per_page"]["schema"]["default"] == 20
    assert all(p["in"] == "query" for p in params.values())
    search = {p["name"] for p in doc["paths"]["/api/users/search"]["get"]["parameters"]}
    assert search == {"q", "page", "per_page"}
    assert doc["components"]["securitySchemes"]["basic"] == {"type": "http",
                                                              "scheme": "basic"}


async def test_openapi_links_lead_from_what_is_created_to_its_operations(world: World) -> None:
    admin = await world.community()
    doc = (await admin.api.anonymous().get("/api/openapi.json")).json
    ids = {op["operationId"]: (m, p) for p, item in doc["paths"].items() for m, op in item.items()}
    groups = doc["paths"]["/api/groups"]["post"]["responses"]["2XX"]["links"]
    show = groups["get_groups_show_group"]
    assert show["parameters"] == {"path.group_id": "$response.body#/group/id"}
    # every link names an operation of the document and fills all its path parameters
    linked = 0
    for item in doc["paths"].values():
        for op in item.values():
            for link in op["responses"].get("2XX", {}).get("links", {}).values():
                linked += 1
                _, path = ids[link["operationId"]]
                named = {f"path.{n}" for n in re.findall(r"{(\w+)}", path)}
                assert set(link["parameters"]) == named, (path, link)
    assert linked > 50
    # and the created resource really is under that key
    created = await admin.api.post("/api/groups", json={"group": {"name": "Linked"}})
    assert (await admin.api.get(f"/api/groups/{created.json['group']['id']}")).status == 200


# The multipart upload is read part by part as it streams (app/views/attachments.py), never
# decoded into parameters: its model documents the form only.
DOCUMENTATION_ONLY = {"AttachmentUpload"}
# what parses a model without naming it at the call: parse_page parses PageQuery
PARSERS = {"PageQuery": ("parse_page",)}


def _called_with(tree: ast.AST) -> set[str]:
    """Names passed to, or called as, functions anywhere in a module."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for arg in [node.func, *node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, ast.Name):
                    names.add(arg.id)
                elif isinstance(arg, ast.Attribute):
                    names.add(arg.attr)
    return names


def test_the_published_request_models_are_the_ones_the_views_parse() -> None:
    """Every query and body model of the route table is handed to a parser (parse, validate,
    parse_listing...) in the module of its handler: none exists for the document only."""
    unparsed = []
    for route in ROUTES:
        module = sys.modules[route.handler.__module__]
        called = _called_with(ast.parse(inspect.getsource(module)))
        for model in (route.query, route.body):
            if model is None or model.__name__ in DOCUMENTATION_ONLY:
                continue
            if not ({model.__name__, *PARSERS.get(model.__name__, ())} & called):
                unparsed.append(f"{route.method} {route.path}: {model.__name__}")
    assert unparsed == []
