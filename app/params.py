"""One decoder for every encoding clients send, and the validation of what it decodes.

Query strings, JSON bodies, url-encoded forms (`&` or `;` separated) and multipart forms all
decode into the same nested dict, with Rails bracket rules: `a[b][c]=1` nests, `a[]=1` appends,
`a[0][x]=1` makes a dict keyed "0" (models turn such dicts into lists where they want lists).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, TypeVar, get_args
from urllib.parse import parse_qsl

import orjson
from aiohttp import web
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)

from app.errors import BadRequest, Invalid, NotFound, TooLarge, UnsupportedMediaType
from app.uploads import DATA_URI_LIMIT_KEY, read_json_spooling_data_uris, read_multipart
from app.uploads import UploadedFile as UploadedFile  # the views take it from here
from app.xml_format import XML_TYPES, parse_xml

PARAMS_KEY = web.RequestKey("params", dict)
M = TypeVar("M", bound=BaseModel)

_KEY_RE = re.compile(r"^([^\[\]]+)((?:\[[^\[\]]*\])*)$")
_FORM_TYPES = {"application/x-www-form-urlencoded", ""}
MAX_DEPTH = 8


def _split_key(key: str) -> list[str]:
    match = _KEY_RE.match(key)
    if not match:
        return [key]
    head, rest = match.groups()
    parts = [head]
    if rest:
        parts.extend(rest[1:-1].split("]["))
    if len(parts) > MAX_DEPTH:
        raise BadRequest(f"Parameter {key!r} is nested too deeply")
    return parts


def nest(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """Build nested parameters from flat (key, value) pairs using Rails bracket rules."""
    root: dict[str, Any] = {}
    for key, value in pairs:
        parts = _split_key(key)
        node: Any = root
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            nxt = None if last else parts[i + 1]
            if part == "":
                if not isinstance(node, list):
                    raise BadRequest(f"Parameter {key!r} mixes list and hash forms")
                if last:
                    node.append(value)
                    break
                # a[][x]=1: start a new hash unless the last one lacks this key
                if node and isinstance(node[-1], dict) and nxt not in node[-1]:
                    node = node[-1]
                else:
                    node.append({})
                    node = node[-1]
                continue
            if not isinstance(node, dict):
                raise BadRequest(f"Parameter {key!r} mixes list and hash forms")
            if last:
                node[part] = value
                break
            child = node.get(part)
            want_list = nxt == ""
            if child is None or not isinstance(child, list if want_list else dict):
                child = [] if want_list else {}
                node[part] = child
            node = child
    return root


def parse_query(query: str) -> dict[str, Any]:
    """Decode a query string or url-encoded body; `;` separates pairs like `&`."""
    if not query:
        return {}
    try:
        pairs = parse_qsl(query.replace(";", "&"), keep_blank_values=True, strict_parsing=False)
    except ValueError as exc:
        raise BadRequest("Malformed parameters") from exc
    return nest(pairs)


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge `extra` into `base` (extra wins), used for query + body."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


async def read_body(request: web.Request) -> dict[str, Any]:
    if not request.body_exists:
        return {}
    # No Content-Type at all (aiohttp then reports application/octet-stream): a form body, as
    # sloppy clients send it.
    ctype = request.content_type if "Content-Type" in request.headers else ""
    try:
        if ctype == "application/json" or ctype.endswith("+json"):
            data_uri_limit = request.get(DATA_URI_LIMIT_KEY)
            if data_uri_limit is not None:
                return await read_json_spooling_data_uris(request, data_uri_limit)
            raw = await request.read()
            if not raw.strip():
                return {}
            try:
                data = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise BadRequest("Body is not valid JSON") from exc
            if not isinstance(data, dict):
                raise BadRequest("JSON body must be an object")
            return data
        if ctype.startswith("multipart/"):
            return nest(await read_multipart(request))
        if ctype in XML_TYPES or ctype.endswith("+xml"):
            return parse_xml(await request.read())
        if ctype in _FORM_TYPES or ctype.startswith("text/plain"):
            raw = await request.read()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise BadRequest("Body is not valid UTF-8") from exc
            return parse_query(text)
    except web.HTTPRequestEntityTooLarge as exc:
        raise TooLarge() from exc
    raise UnsupportedMediaType(f"Unsupported content type {ctype}")


@dataclass(frozen=True, slots=True)
class BodyRoot:
    """The root key of a create or update (`message`, `comment`, ...) and the fields the
    endpoint knows: at the top level of its body model and inside the root. Set per route by
    the route table (app.routes), read here."""

    name: str
    top: frozenset[str]
    nested: frozenset[str]
    model: type[BaseModel]

    @classmethod
    def of(cls, name: str, model: type[BaseModel]) -> BodyRoot:
        def names(m: type[BaseModel]) -> set[str]:
            out: set[str] = set()
            for key, info in m.model_fields.items():
                out.add(key)
                if isinstance(info.alias, str):
                    out.add(info.alias)
            return out

        nested: set[str] = set()
        info = model.model_fields.get(name)
        if info is not None:
            candidates = [info.annotation, *get_args(info.annotation)]
            for candidate in candidates:
                if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                    nested = names(candidate)
                    break
        return cls(name, frozenset(names(model) - {name}), frozenset(nested), model)

    def wrap(self, body: dict[str, Any]) -> dict[str, Any]:
        """An unwrapped body (ActiveResource 4+, Rails ParamsWrapper) read as if wrapped in
        the root key; its top-level keys stay too, as ParamsWrapper keeps them."""
        if not body or self.name in body:
            return body
        return {**body, self.name: dict(body)}

    def names_a_field(self, params: dict[str, Any]) -> bool:
        if any(key in params for key in self.top):
            return True
        inner = params.get(self.name)
        return isinstance(inner, dict) and any(key in inner for key in self.nested)

    def require_a_field(self, params: dict[str, Any]) -> None:
        """A write that names no field the endpoint knows is a 422, never a silent 200
        (decisions.md): wrapped, unwrapped, XML or empty alike. The model's own refusal comes
        first when it has one (`User can't be blank`), as it names what is missing."""
        if self.names_a_field(params):
            return
        validate(self.model, params)
        label = self.name.replace("_", " ")
        raise Invalid(f"The request names no field of {label}",
                      fields={self.name: ["names no known field"]})


BODY_ROOTS = web.AppKey("body_roots", dict[web.AbstractRoute, BodyRoot])


async def read_params(request: web.Request) -> dict[str, Any]:
    """Query string and body decoded and merged (body wins). Cached on the request.

    On a create or update whose route names a root key, an unwrapped body is read as if
    wrapped, and a request naming no field the endpoint knows (in the body, wrapped or not, or
    the query) is a 422, never a silent 200."""
    cached = request.get(PARAMS_KEY)
    if cached is not None:
        return cached
    params = parse_query(request.rel_url.raw_query_string)
    if request.method not in ("GET", "HEAD"):
        body = await read_body(request)
        root = request.app.get(BODY_ROOTS, {}).get(request.match_info.route)
        if root is not None:
            body = root.wrap(body)
        params = merge(params, body)
        if root is not None:
            root.require_a_field(params)
    request[PARAMS_KEY] = params
    return params


def _loc_name(loc: tuple[int | str, ...]) -> str:
    if not loc:
        return "base"
    head, *rest = (str(p) for p in loc)
    return head + "".join(f"[{p}]" for p in rest)


def validate(model: type[M], data: Any) -> M:
    """Validate decoded parameters into a model; failures are one 422 listing every field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        fields: dict[str, list[str]] = {}
        messages: list[str] = []
        for err in exc.errors(include_url=False):
            loc = tuple(p for p in err["loc"] if not str(p).startswith("function-"))
            name = _loc_name(loc)
            problem = "can't be blank" if err["type"] == "missing" else str(err["msg"])
            problem = problem[0].lower() + problem[1:] if problem else problem
            fields.setdefault(name, []).append(problem)
            leaf = name.rstrip("]").split("[")[-1].replace("_", " ").capitalize()
            messages.append(f"{leaf} {problem}")
        raise Invalid(*messages, fields=fields) from None


async def parse(request: web.Request, model: type[M]) -> M:
    return validate(model, await read_params(request))


# --- lenient field types shared by request models -------------------------------------------


def _blank_to_none(value: Any) -> Any:
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _to_list(value: Any) -> Any:
    """Accept a list, a dict keyed by integers (`a[0][x]` forms), a CSV string or a scalar."""
    if value is None:
        return []
    if isinstance(value, list):
        return [v for v in value if not (isinstance(v, str) and not v.strip())]
    if isinstance(value, dict):
        try:
            return [value[k] for k in sorted(value, key=lambda k: int(k))]
        except ValueError:
            return [value]
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [value]


def _blank_to_false(value: Any) -> Any:
    return False if value is None or (isinstance(value, str) and not value.strip()) else value


OptionalId = Annotated[int | None, BeforeValidator(_blank_to_none)]
# A query flag (`can_join_only=`): blank means absent, i.e. false.
QueryFlag = Annotated[bool, BeforeValidator(_blank_to_false)]
OptionalStr = Annotated[str | None, BeforeValidator(lambda v: v)]
IdList = Annotated[list[int], BeforeValidator(_to_list)]
StrList = Annotated[list[str], BeforeValidator(_to_list)]


def as_list(value: Any) -> list[Any]:
    out = _to_list(value)
    return out if isinstance(out, list) else [out]


def flag(value: Any, default: bool = False) -> bool:
    """Lenient boolean of a raw parameter: true/1/yes/on."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"true", "1", "yes", "on", "t", "y"}


# --- paging and path ids ----------------------------------------------------------------------

DEFAULT_PER_PAGE = 20
MAX_PER_PAGE = 500
MAX_PAGE = 1_000_000


@dataclass(frozen=True, slots=True)
class Page:
    page: int
    per_page: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page

    @property
    def limit(self) -> int:
        return self.per_page


def _positive(params: dict[str, Any], name: str, default: int) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise BadRequest(f"{name} must be a positive integer") from None
    if value < 1:
        raise BadRequest(f"{name} must be a positive integer")
    return value


def _page_param(value: Any, info: ValidationInfo) -> Any:
    name = info.field_name or "page"
    if value is None or value == "":
        return None
    number = _positive({name: value}, name, 1)
    if name == "page" and number > MAX_PAGE:
        raise BadRequest("page is too large")
    return number


# `page` / `per_page` fields of request models: a bad value is a 400, not the 422 a plain `int`
# field would give (raised from the validator, so it wins over any 422 of the same request).
PageParam = Annotated[int | None, BeforeValidator(_page_param)]

# Request models are lenient as real clients are (decisions.md): unknown parameters are
# ignored, numbers sent where text is expected are taken as text.
LOOSE = ConfigDict(extra="ignore", coerce_numbers_to_str=True)


class PageQuery(BaseModel):
    """page (default 1) and per_page (default 20, capped at 500); non-positive is a 400. The
    base of every list's request model: the request's page is parsed once, with the rest of
    its parameters, and `paging` is it."""

    model_config = LOOSE
    page: PageParam = None
    per_page: PageParam = None

    @property
    def paging(self) -> Page:
        return Page(page=self.page or 1,
                    per_page=min(self.per_page or DEFAULT_PER_PAGE, MAX_PER_PAGE))


async def parse_page(request: web.Request) -> Page:
    """The page of a list that takes no other parameter."""
    return (await parse(request, PageQuery)).paging


class RootedBody(BaseModel):
    """A body whose fields sit under one root key (`{"external_system": {...}}`, the key named
    by `ROOT`); a body sent without it is read as if wrapped."""

    model_config = LOOSE
    ROOT: ClassVar[str]

    @model_validator(mode="before")
    @classmethod
    def _wrap(cls, data: Any) -> Any:
        if isinstance(data, dict) and not isinstance(data.get(cls.ROOT), dict):
            return {cls.ROOT: data}
        return data


class FlatBody(BaseModel):
    """A body of top-level fields that may also come wrapped under the key named by `ROOT`
    (`{"content_filter": {"word": ...}}`); wrapped values win."""

    model_config = LOOSE
    ROOT: ClassVar[str]

    @model_validator(mode="before")
    @classmethod
    def _unwrap(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get(cls.ROOT), dict):
            return {**data, **data[cls.ROOT]}
        return data


_ID_RE = re.compile(r"^(\d{1,18})(?:-[^/]*)?$")


def parse_id(raw: str | None) -> int | None:
    """`123` or `123-some-slug` -> 123; anything else -> None."""
    if raw is None:
        return None
    match = _ID_RE.match(raw)
    return int(match.group(1)) if match else None


def path_id(request: web.Request, name: str) -> int:
    """An integer id from the path; a malformed one names nothing, so it is a 404."""
    value = parse_id(request.match_info.get(name))
    if value is None:
        raise NotFound()
    return value


def param_id(params: dict[str, Any], name: str) -> int | None:
    """An optional integer id parameter; blank means absent, garbage is a 422."""
    raw = params.get(name)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, bool):
        raise Invalid.field(name, "must be an integer")
    if isinstance(raw, int):
        return raw
    value = parse_id(str(raw).strip())
    if value is None:
        raise Invalid.field(name, "must be an integer")
    return value


def query_id(params: dict[str, Any], name: str) -> int | None:
    """An optional integer id in a query string (`before=<id>`): blank means absent; a value
    that is no id cannot be parsed, so a 400 (decisions.md), unlike a body's 422."""
    try:
        return param_id(params, name)
    except Invalid:
        raise BadRequest(f"{name} must be an integer", fields={name: ["must be an integer"]}
                         ) from None


# 9999-12-31T23:59:59Z: the last second a timestamp of the API can hold.
MAX_EPOCH = 253_402_300_799


def since_param(value: Any, name: str = "since") -> datetime | None:
    """`since` (epoch seconds) as a time. Not a plausible epoch second (negative, past year
    9999, not a number) is a 400, never a 500 (decisions.md)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        seconds = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        seconds = -1
    if isinstance(value, bool) or not 0 <= seconds <= MAX_EPOCH:
        raise BadRequest(f"{name} must be a Unix timestamp in seconds",
                         fields={name: ["must be a Unix timestamp in seconds"]})
    return datetime.fromtimestamp(seconds, UTC)


def _query_id_value(value: Any, info: ValidationInfo) -> Any:
    name = info.field_name or "id"
    return query_id({name: value}, name)


def _since_value(value: Any, info: ValidationInfo) -> Any:
    return since_param(value, info.field_name or "since")


def _param_id_value(value: Any, info: ValidationInfo) -> Any:
    name = info.field_name or "id"
    return param_id({name: value}, name)


# A body's optional id, as param_id reads it (`12`, `12-slug`; blank: absent; garbage: 422).
BodyId = Annotated[int | None, BeforeValidator(_param_id_value)]
# A query's optional id (`before=<id>`): garbage is a 400 (query_id).
QueryId = Annotated[int | None, BeforeValidator(_query_id_value)]
# `since=<epoch seconds>` read as a time: garbage is a 400 (since_param).
Since = Annotated[datetime | None, BeforeValidator(_since_value), WithJsonSchema(
    {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}],
     "description": "Unix time in seconds"})]
