"""Response helpers: every JSON body goes through orjson here."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

JSON_TYPE = "application/json"


def dumps(data: Any) -> bytes:
    return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)


def kept_json(data: Any) -> bytes:
    """`data` serialized to be kept (and placed in many responses as an orjson.Fragment). A
    copy: orjson's own bytes keep the spare room of its buffer (8 KB for 1 KB of JSON), which
    a cache of thousands of them would hold for nothing."""
    return bytes(memoryview(dumps(data)))


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=dumps(data), status=status, content_type=JSON_TYPE, charset="utf-8", headers=headers
    )


def created(data: Any) -> web.Response:
    return json_response(data, status=201)


def no_content() -> web.Response:
    return web.Response(status=204)
