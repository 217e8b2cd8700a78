"""OpenAPI 3.1 document generated from the route table and its pydantic request models."""

from __future__ import annotations

import functools
import re
from typing import Any

from pydantic import BaseModel

from app.routes import ROUTES, Route

_PARAM_RE = re.compile(r":([A-Za-z_][A-Za-z0-9_]*)")
ERROR_SCHEMA = {
    "type": "object",
    "required": ["errors", "code"],
    "properties": {
        "errors": {"type": "array", "items": {"type": "string"}},
        "code": {"type": "string"},
        "fields": {"type": "object", "additionalProperties": {
            "type": "array", "items": {"type": "string"}}},
        "request_id": {"type": "string"},
    },
}
# routes that answer with a file or a redirect to one, not JSON
_FILE_PATH = re.compile(r"^/api/(attachments/:attachment_id|media_files/)")
PAGING = [
    {"name": "page", "in": "query", "required": False,
     "schema": {"type": "integer", "minimum": 1, "default": 1}},
    {"name": "per_page", "in": "query", "required": False,
     "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 20}},
]


def _operation(route: Route, schemas: dict[str, Any]) -> dict[str, Any]:
    params: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in _PARAM_RE.findall(route.path)
    ]
    if route.query is not None:
        schema = _schema(route.query, schemas)  # nested models become component schemas
        required = set(schema.get("required", []))
        for name, prop in schema.get("properties", {}).items():
            if name in ("page", "per_page"):
                continue
            params.append({"name": name, "in": "query", "required": name in required,
                           "schema": prop})
        if "page" in schema.get("properties", {}):
            params.extend(PAGING)
    op: dict[str, Any] = {
        "summary": route.summary,
        "operationId": f"{route.method.lower()}_{route.handler.__module__.split('.')[-1]}_"
                       f"{route.handler.__name__}",
        "parameters": params,
        "responses": {
            "default": {"description": "Error",
                        "content": {"application/json": {"schema": {"$ref":
                                    "#/components/schemas/Error"}}}},
            "2XX": {"description": "Success", "content": {"application/json": {}}},
        },
    }
    if route.method == "GET" and _FILE_PATH.match(route.path):
        # files: a 302 to the bytes (or a presigned URL), or the bytes themselves
        op["responses"]["3XX"] = {"description": "Redirect to the file"}
        op["responses"]["2XX"] = {"description": "The file", "content": {"*/*": {}}}
    if getattr(route.handler, "__commons_conditional__", False):  # app/views/conditional.py
        params.append({"name": "If-None-Match", "in": "header", "required": False,
                       "schema": {"type": "string"}})
        op["responses"]["304"] = {"description": "Not modified: the ETag sent is current",
                                  "headers": {"ETag": {"schema": {"type": "string"}}}}
    if route.body is not None:
        name = route.body.__name__
        schemas[name] = _schema(route.body, schemas)
        ref = {"$ref": f"#/components/schemas/{name}"}
        op["requestBody"] = {"content": {
            "application/json": {"schema": ref},
            "application/x-www-form-urlencoded": {"schema": ref},
            "multipart/form-data": {"schema": ref},
        }}
    return op


# What a creating POST answers: {"<key>": {"id": ...}}. Its 2XX response links to every operation
# on `<collection>/{param}` (and below), so that tools following OpenAPI links (schemathesis'
# stateful phase) go on from what they created instead of guessing ids.
CREATED_KEYS = {
    "/api/users": "user",
    "/api/groups": "group",
    "/api/groups/:group_id/memberships": "group_membership",
    "/api/groups/:group_id/membership_requests": "membership_request",
    "/api/attachments": "attachment",
    "/api/messages": "message",
    "/api/messages/:message_id/comments": "comment",
    "/api/messages/:message_id/likes": "like",
    "/api/messages/:message_id/comments/:comment_id/likes": "like",
    "/api/messages/:message_id/flags": "flag",
    "/api/polls": "poll",
    "/api/custom_fields": "custom_field",
    "/api/content_filters": "content_filter",
    "/api/meetings": "meeting",
    "/api/thanks": "thanks",
    "/api/topics": "topic",
    "/api/conversations": "conversation",
    "/api/external_systems": "external_system",
    "/api/reach_extensions": "reach_extension",
    "/api/groups/:group_id/webhooks": "webhook",
}


def _links(route: Route, ids: dict[tuple[str, str], str]) -> dict[str, Any]:
    """OpenAPI links from a creating POST to the operations on what it created."""
    key = CREATED_KEYS.get(route.path) if route.method == "POST" else None
    if key is None:
        return {}
    known = set(_PARAM_RE.findall(route.path))
    links: dict[str, Any] = {}
    for target in ROUTES:
        rest = target.path[len(route.path):]
        match = re.match(r"^/:([A-Za-z_][A-Za-z0-9_]*)(/|$)", rest)
        if not target.path.startswith(route.path) or match is None:
            continue
        new = match.group(1)
        params = set(_PARAM_RE.findall(target.path))
        if not params <= known | {new}:
            continue  # needs an id this response does not give
        parameters = {f"path.{name}": f"$request.path.{name}" for name in sorted(known)}
        parameters[f"path.{new}"] = f"$response.body#/{key}/id"
        name = ids[(target.method, target.path)]
        links[name] = {"operationId": name, "parameters": parameters}
    return links


def _schema(model: type[BaseModel], schemas: dict[str, Any]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in schema.pop("$defs", {}).items():
        schemas[name] = definition
    return schema


@functools.cache
def document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    schemas: dict[str, Any] = {"Error": ERROR_SCHEMA}
    used: set[str] = set()
    ids: dict[tuple[str, str], str] = {}
    operations: list[tuple[Route, dict[str, Any]]] = []
    for route in ROUTES:
        path = _PARAM_RE.sub(r"{\1}", route.path)
        op = _operation(route, schemas)
        if op["operationId"] in used:
            # one handler serving several routes: operationIds must still be unique
            op["operationId"] += "_" + re.sub(r"\W+", "_", route.path).strip("_")
        used.add(op["operationId"])
        ids[(route.method, route.path)] = op["operationId"]
        operations.append((route, op))
        paths.setdefault(path, {})[route.method.lower()] = op
    for route, op in operations:
        links = _links(route, ids)
        if links:
            op["responses"]["2XX"]["links"] = links
    return {
        "openapi": "3.1.0",
        "info": {"title": "Commons API", "version": "1",
                 "description": "The Socialcast-compatible REST API served by Commons. "
                                "Every path is also served with a .json suffix."},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"basic": {"type": "http", "scheme": "basic"}},
        },
        "security": [{"basic": []}],
    }
