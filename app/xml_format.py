"""XML on the wire, as real XML clients of the original service read and write it.

Output is the Rails `to_xml` form of the very JSON object a view answers (decisions.md):
the root element is named after the envelope key (`<message>`, `<messages type="array">`),
keys are dasherized, integers, booleans, floats, arrays and `*_at` timestamps carry a `type`
attribute, null is `nil="true"`, element order is the JSON key order, and an error body is
`<errors><error>text</error></errors>`. Request bodies in XML decode (safely: defusedxml, no
DTD, no entities) into the same nested dicts a JSON body gives.

The choice between the two formats is made once per request, by `negotiation_middleware`:
a `.xml` path suffix, or no suffix and an Accept header preferring XML. Views never see it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any
from xml.etree.ElementTree import Element

import inflection
import orjson
from aiohttp import web
from defusedxml import ElementTree as SafeTree
from defusedxml.common import DefusedXmlException

from app.errors import BadRequest

XML_TYPE = "application/xml"
XML_TYPES = frozenset({"application/xml", "text/xml"})
DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'
WANTS_XML = web.RequestKey("wants_xml", bool)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_DATETIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)$")
# XML 1.0 cannot carry most control characters, even escaped: they become U+FFFD.
_INVALID_CHARS_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})


# --- output ------------------------------------------------------------------------------------


def _text(value: str) -> str:
    return _INVALID_CHARS_RE.sub("\ufffd", value).translate(_ESCAPES)


def _tag(key: Any) -> tuple[str, str]:
    """(element name, extra attributes) for a JSON key. Keys that are no XML name (numeric ids
    of a map, free text) keep their value in a `key` attribute of an `<item>`."""
    name = inflection.dasherize(str(key))
    if _NAME_RE.match(name) and not name.lower().startswith("xml"):
        return name, ""
    return "item", f' key="{_text(str(key))}"'


def _singular(name: str) -> str:
    # Rails names an array's elements by the singular of its key (a key with no distinct
    # singular, such as `data`, names them alike).
    return str(inflection.singularize(name))


def _write(out: list[str], key: Any, value: Any, depth: int) -> None:
    pad = "  " * depth
    name, attrs = _tag(key)
    if value is None:
        out.append(f'{pad}<{name}{attrs} nil="true"></{name}>\n')
    elif isinstance(value, bool):
        out.append(f'{pad}<{name}{attrs} type="boolean">{"true" if value else "false"}</{name}>\n')
    elif isinstance(value, int):
        out.append(f'{pad}<{name}{attrs} type="integer">{value}</{name}>\n')
    elif isinstance(value, float):
        out.append(f'{pad}<{name}{attrs} type="float">{value!r}</{name}>\n')
    elif isinstance(value, str):
        typed = ' type="datetime"' if (
            name.endswith("-at") and _DATETIME_RE.match(value)
        ) else ""
        out.append(f"{pad}<{name}{attrs}{typed}>{_text(value)}</{name}>\n")
    elif isinstance(value, dict):
        out.append(f"{pad}<{name}{attrs}>\n")
        for k, v in value.items():
            _write(out, k, v, depth + 1)
        out.append(f"{pad}</{name}>\n")
    elif isinstance(value, list | tuple):
        if not value:
            out.append(f'{pad}<{name}{attrs} type="array"/>\n')
            return
        out.append(f'{pad}<{name}{attrs} type="array">\n')
        child = _singular(name) if not attrs else "item"
        for item in value:
            _write(out, child, item, depth + 1)
        out.append(f"{pad}</{name}>\n")
    else:  # anything else orjson would have written as a string
        out.append(f"{pad}<{name}{attrs}>{_text(str(value))}</{name}>\n")


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def to_xml(data: Any) -> str:
    """The Rails `to_xml` text of a JSON body, declaration included.

    - `{"message": {...}}` (one key): `<message>...</message>`.
    - `{"messages": [...], "messages_next_page": 2}` (an array envelope and scalar paging
      keys): `<messages type="array" messages-next-page="2">`; null paging keys are left out.
    - `{"errors": [...], ...}`: `<errors><error>...</error></errors>` (Rails' errors.to_xml).
    - any other object: `<hash>...</hash>`, as Rails names a hash without a root.
    """
    out = [DECLARATION]
    if isinstance(data, dict) and isinstance(data.get("errors"), list):
        out.append("<errors>\n")
        for message in data["errors"]:
            out.append(f"  <error>{_text(str(message))}</error>\n")
        out.append("</errors>\n")
        return "".join(out)
    if isinstance(data, dict) and len(data) == 1:
        (key, value), = data.items()
        _write(out, key, value, 0)
        return "".join(out)
    if isinstance(data, dict) and data:
        first, *rest = data
        extras = {k: data[k] for k in rest}
        if isinstance(data[first], list) and all(_is_scalar(v) for v in extras.values()):
            body: list[str] = []
            _write(body, first, data[first], 0)
            attrs = "".join(
                f' {_tag(k)[0]}="{_text(_attr(v))}"'
                for k, v in extras.items() if v is not None and _tag(k)[1] == ""
            )
            head = body[0]
            cut = head.index(' type="array"') + len(' type="array"')
            body[0] = head[:cut] + attrs + head[cut:]
            out.extend(body)
            return "".join(out)
    if isinstance(data, list):
        _write(out, "objects", data, 0)
        return "".join(out)
    _write(out, "hash", data if isinstance(data, dict) else {"value": data}, 0)
    return "".join(out)


def _attr(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- input -------------------------------------------------------------------------------------


def _undasherize(name: str) -> str:
    return name.replace("-", "_")


def _value(element: Element) -> Any:
    """Rails `Hash.from_xml` typing of one element."""
    if element.get("nil") == "true":
        return None
    kind = element.get("type")
    children = list(element)
    if kind == "array":
        return [_value(child) for child in children]
    if children:
        out: dict[str, Any] = {}
        for child in children:
            key = _undasherize(child.tag)
            value = _value(child)
            if key in out:  # repeated elements without type="array" gather into a list
                previous = out[key]
                out[key] = [*previous, value] if isinstance(previous, list) else [previous, value]
            else:
                out[key] = value
        return out
    text = element.text or ""
    if kind is None and "\n" in text and not text.strip():
        return {}  # `<group>\n</group>`: how to_xml (and the original) writes an empty object
    if kind == "integer":
        try:
            return int(text.strip())
        except ValueError as exc:
            raise BadRequest(f"<{element.tag}> is not an integer") from exc
    if kind == "boolean":
        return text.strip().lower() in ("true", "1")
    if kind in ("float", "decimal", "double"):
        try:
            return float(text.strip())
        except ValueError as exc:
            raise BadRequest(f"<{element.tag}> is not a number") from exc
    return text


def parse_xml(raw: bytes) -> dict[str, Any]:
    """An XML body as nested parameters: `<message><body>x</body></message>` gives
    `{"message": {"body": "x"}}`, as Rails parses it. DTDs and entities are refused."""
    if not raw.strip():
        return {}
    try:
        root = SafeTree.fromstring(raw, forbid_dtd=True)
    except DefusedXmlException as exc:
        raise BadRequest("XML body may not declare a DTD or entities") from exc
    except SafeTree.ParseError as exc:
        raise BadRequest("Body is not valid XML") from exc
    return {_undasherize(root.tag): _value(root)}


# --- negotiation -------------------------------------------------------------------------------


def _prefers_xml(accept: str) -> bool:
    """True when the Accept header ranks XML above JSON (JSON wins ties and absence)."""
    best_xml = best_json = -1.0
    for item in accept.split(","):
        media, _, params = item.strip().partition(";")
        media = media.strip().lower()
        quality = 1.0
        for param in params.split(";"):
            name, _, val = param.strip().partition("=")
            if name.strip() == "q":
                try:
                    quality = float(val)
                except ValueError:
                    quality = 0.0
        if media in XML_TYPES:
            best_xml = max(best_xml, quality)
        elif media == "application/json" or media.endswith("+json"):
            best_json = max(best_json, quality)
    return best_xml > 0 and best_xml > best_json


def wants_xml(request: web.Request) -> bool:
    # The route's own suffix when a route matched (a download's file name is no suffix),
    # else the path's.
    suffix = request.match_info.get("_ext")
    if suffix is None and request.match_info.http_exception is not None:
        suffix = ".xml" if request.path.endswith(".xml") else (
            ".json" if request.path.endswith(".json") else "")
    if suffix:
        return suffix == ".xml"
    accept = request.headers.get("Accept", "")
    # most clients send `*/*` or JSON: no XML type named, nothing to rank
    return "xml" in accept.lower() and _prefers_xml(accept)


@web.middleware
def negotiation_middleware(
    request: web.Request, handler: Handler
) -> Awaitable[web.StreamResponse]:
    """Outermost: turns every JSON answer (errors included) into XML when the client asked
    for XML. The views and the other middlewares only ever write JSON.

    Not a coroutine: a JSON request (nearly all of them) gets the inner handler's own
    awaitable back, so it pays no frame of this layer; only an XML one is wrapped."""
    xml = wants_xml(request)
    request[WANTS_XML] = xml
    if not xml:
        return handler(request)
    return _as_xml(request, handler)


async def _as_xml(request: web.Request, handler: Handler) -> web.StreamResponse:
    response = await handler(request)
    if not isinstance(response, web.Response) or response.prepared:
        return response
    if response.content_type != "application/json" or not isinstance(response.body, bytes):
        return response
    data = orjson.loads(response.body) if response.body else None
    # The same response object: its status, headers and cookies stay as the views set them.
    response.body = to_xml(data).encode()
    response.content_type = XML_TYPE
    response.charset = "utf-8"
    return response
