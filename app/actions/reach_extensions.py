"""Reach extensions: widgets of an external system that other sites embed (a discussion button,
a stream, trends...). Community admins (reach admins) only: 403 for anyone else, 404 for
another community's extension.

Rules (create; an update applies the given parameters to the stored extension, then checks the
same rules on the result). Every failure is a 422 naming the parameter `reach_extension[...]`.
- `name` is required; `external_system_id` is required and names a system of this community
  (an active one when it is set or changed).
- The container: `container_id` with `container_type` (Group or TownHall; Group when only the
  id is given), or the deprecated `group_id` (a Group). A Group must be one of the community's
  groups; this service has no town halls, so a TownHall names nothing. A blank container_id
  (or group_id) on update removes the container.
- `install_type`: html (default), sharepoint, google_gadget; google_gadget only with the
  extension types dynamic or stream.
- `extension_type`: discussion (default), stream, recommend, trends, dynamic, recent_thanks.
  A stream needs `stream_type` (profile, company, group, town_hall, custom, home, default);
  stream_type is only for streams (stored ones are cleared when the type changes). A group
  stream needs a Group container, a town_hall stream a TownHall one. A discussion needs
  `button_verb` (default recommend) and `button_type` (verb, icon, icon_and_verb).
- `button_verb`: help, recommend, review, share, thanks, ask_for_help, request_assistance; the
  last two need button_type icon_and_verb or icon.
- A profile stream needs `profile_header` (true or false; rendered as `profile_heading`).
- A custom stream filters by tags (`reach_extension_tag_filters_attributes[n][tag_name]`) or
  by users (`reach_extension_user_filters_attributes[n][user_id]`, users of the community),
  not both, and needs at least one filter. Filters are only for custom streams. Giving one
  kind on update replaces the whole filter set.
- `days_ago` (trends): 1 to 365, default 7. `login_required`: default true.
  `reach_border_style`: none, solid (default), dotted, dashed, double. Colors: `#rgb` or
  `#rrggbb` (stored as lower-case `#rrggbb`); each has a default.
- `token` (for the embed script) is random and made on create.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from app.access import require_admin
from app.actions.work import work
from app.context import Viewer
from app.errors import Invalid, NotFound
from app.params import Page
from storage import external_systems as system_storage
from storage import groups as group_storage
from storage import reach_extensions as storage
from storage import topics as topic_storage
from storage import users as user_storage
from storage.db import Conn
from storage.reach_extensions import COLOR_DEFAULTS, COLORS

INSTALL_TYPES = ("html", "sharepoint", "google_gadget")
EXTENSION_TYPES = ("discussion", "stream", "recommend", "trends", "dynamic", "recent_thanks")
STREAM_TYPES = ("profile", "company", "group", "town_hall", "custom", "home", "default")
BUTTON_TYPES = ("verb", "icon", "icon_and_verb")
BUTTON_VERBS = ("help", "recommend", "review", "share", "thanks", "ask_for_help",
                "request_assistance")
ICON_VERBS = ("ask_for_help", "request_assistance")
BORDER_STYLES = ("none", "solid", "dotted", "dashed", "double")
CONTAINER_TYPES = {"group": "Group", "townhall": "TownHall", "town_hall": "TownHall"}
GADGET_EXTENSION_TYPES = ("dynamic", "stream")
MAX_FILTERS = 100
MAX_TAG = 100

# What a new extension is when a parameter is not given (the database has the same defaults).
DEFAULTS: dict[str, Any] = {
    "group_id": None, "extension_type": "discussion", "stream_type": None, "button_type": None,
    "install_type": "html", "button_verb": "recommend", "profile_heading": None, "days_ago": 7,
    "login_required": True, "reach_border_style": "solid", "tag_filters": [],
    "user_filter_ids": [],
}
# button_type and stream_type given blank are none; the others given blank take their default.

_COLOR_RE = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")

# Parameters whose value is one of a list: (name, allowed).
ENUMS: tuple[tuple[str, Sequence[str]], ...] = (
    ("install_type", INSTALL_TYPES), ("extension_type", EXTENSION_TYPES),
    ("stream_type", STREAM_TYPES), ("button_type", BUTTON_TYPES),
    ("button_verb", BUTTON_VERBS), ("reach_border_style", BORDER_STYLES),
)


def _param(name: str) -> str:
    return f"reach_extension[{name}]"


TAG_FILTERS = _param("reach_extension_tag_filters_attributes")
USER_FILTERS = _param("reach_extension_user_filters_attributes")


def color(name: str, value: str) -> str:
    """`#abc` / `#aabbcc` (the `#` may be left out) as lower-case `#aabbcc`; else a 422."""
    match = _COLOR_RE.match(value.strip())
    if not match:
        raise Invalid.field(_param(name), "must be an HTML color code like #1a2b3c")
    digits = match.group(1).lower()
    if len(digits) == 3:
        digits = "".join(ch * 2 for ch in digits)
    return f"#{digits}"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


async def _container(
    conn: Conn, viewer: Viewer, given: Mapping[str, Any]
) -> tuple[bool, int | None]:
    """(whether the request names the container, the group id or None)."""
    if "container_id" in given or "container_type" in given:
        raw_type = _text(given.get("container_type"))
        container_id = given.get("container_id")
        if raw_type is None:
            kind = "Group"
        else:
            found_kind = CONTAINER_TYPES.get(raw_type.lower())
            if found_kind is None:
                raise Invalid.field(_param("container_type"), "must be Group or TownHall")
            kind = found_kind
        if container_id is None:
            if raw_type is not None:
                raise Invalid.field(_param("container_id"), "can't be blank")
            return True, None
        name = "container_id"
    elif "group_id" in given:
        kind, container_id, name = "Group", given["group_id"], "group_id"
        if container_id is None:
            return True, None
    else:
        return False, None
    if kind == "TownHall":
        raise Invalid.field(_param(name), "is not a town hall of this community")
    group = await group_storage.by_id(conn, viewer.community_id, viewer.id, viewer.is_external,
                                      int(container_id))
    if group is None:
        raise Invalid.field(_param(name), "is not a group of this community")
    return True, int(group["id"])


def _tags(raw: Sequence[str]) -> list[str]:
    names = list(dict.fromkeys(n for n in (topic_storage.normalize(t) for t in raw) if n))
    if any(len(n) > MAX_TAG for n in names):
        raise Invalid.field(TAG_FILTERS, f"has a tag name longer than {MAX_TAG} characters")
    if len(names) > MAX_FILTERS:
        raise Invalid.field(TAG_FILTERS, f"has too many filters (maximum is {MAX_FILTERS})")
    return names


async def _users(conn: Conn, viewer: Viewer, raw: Sequence[int]) -> list[int]:
    ids = list(dict.fromkeys(raw))
    if len(ids) > MAX_FILTERS:
        raise Invalid.field(USER_FILTERS, f"has too many filters (maximum is {MAX_FILTERS})")
    found = {u["id"] for u in await user_storage.by_ids(conn, viewer.community_id, ids)}
    unknown = [str(i) for i in ids if i not in found]
    if unknown:
        raise Invalid.field(USER_FILTERS, f"names no user of this community: {', '.join(unknown)}")
    return ids


async def resolve(
    conn: Conn, viewer: Viewer, given: Mapping[str, Any], current: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The columns to write: `given` (parameter name -> value; None: given blank) applied to
    `current` (None on create: every column), every rule checked."""
    if current is None:
        state: dict[str, Any] = {**DEFAULTS, **COLOR_DEFAULTS}
    else:
        state = {k: current[k] for k in storage.SETTABLE}

    if "name" in given or current is None:
        name = _text(given.get("name"))
        if name is None:
            raise Invalid.field(_param("name"), "can't be blank")
        state["name"] = name

    if "external_system_id" in given or current is None:
        system_id = given.get("external_system_id")
        if system_id is None:
            raise Invalid.field(_param("external_system_id"), "can't be blank")
        if current is None or system_id != current["external_system_id"]:
            system = await system_storage.by_id(conn, viewer.community_id, int(system_id))
            if system is None:
                raise Invalid.field(_param("external_system_id"),
                                    "is not an external system of this community")
            if system["state"] != "active":
                raise Invalid.field(_param("external_system_id"), "is an inactive system")
        state["external_system_id"] = int(system_id)

    named, group_id = await _container(conn, viewer, given)
    if named:
        state["group_id"] = group_id

    for name, allowed in ENUMS:
        if name not in given:
            continue
        value = _text(given[name])
        if value is None:  # given blank: none, or the default
            state[name] = DEFAULTS[name]
            continue
        value = value.lower()
        if value not in allowed:
            raise Invalid.field(_param(name), f"must be one of {', '.join(allowed)}")
        state[name] = value

    if "profile_header" in given:
        state["profile_heading"] = given["profile_header"]
    for name in ("days_ago", "login_required"):
        if name in given:
            state[name] = given[name] if given[name] is not None else DEFAULTS[name]
    if not 1 <= state["days_ago"] <= 365:
        raise Invalid.field(_param("days_ago"), "must be between 1 and 365")
    for name in COLORS:
        if name in given:
            value = _text(given[name])
            state[name] = color(name, value) if value is not None else COLOR_DEFAULTS[name]

    tags_given = "tag_filters" in given
    users_given = "user_filter_ids" in given
    if tags_given or users_given:  # given filters replace the whole set
        state["tag_filters"] = _tags(given.get("tag_filters") or [])
        state["user_filter_ids"] = await _users(conn, viewer, given.get("user_filter_ids") or [])

    _check_rules(state, given)
    if current is None:
        return state
    return {k: v for k, v in state.items() if v != current[k]}


def _check_rules(state: dict[str, Any], given: Mapping[str, Any]) -> None:
    """The rules between parameters; clears what only another type uses."""
    extension = state["extension_type"]
    if state["install_type"] == "google_gadget" and extension not in GADGET_EXTENSION_TYPES:
        raise Invalid.field(_param("extension_type"),
                            "must be dynamic or stream for a google_gadget install")
    if extension == "stream":
        if state["stream_type"] is None:
            raise Invalid.field(_param("stream_type"), "can't be blank for a stream extension")
    elif state["stream_type"] is not None:
        if _text(given.get("stream_type")) is not None:
            raise Invalid.field(_param("stream_type"), "is only for stream extensions")
        state["stream_type"] = None
    stream = state["stream_type"]
    if stream == "group" and state["group_id"] is None:
        raise Invalid.field(_param("container_id"), "can't be blank for a group stream")
    if stream == "town_hall":
        raise Invalid.field(_param("container_id"),
                            "must be a town hall for a town_hall stream (there are none)")
    if extension == "discussion" and state["button_type"] is None:
        raise Invalid.field(_param("button_type"), "can't be blank for a discussion")
    verb = state["button_verb"]
    if verb in ICON_VERBS and state["button_type"] not in ("icon_and_verb", "icon"):
        raise Invalid.field(_param("button_type"), f"must be icon_and_verb or icon for {verb}")
    if stream == "profile" and state["profile_heading"] is None:
        raise Invalid.field(_param("profile_header"), "can't be blank for a profile stream")
    tags, users = state["tag_filters"], state["user_filter_ids"]
    if stream == "custom":
        if tags and users:
            raise Invalid.field(TAG_FILTERS, "can't be used with user filters: use one kind")
        if not tags and not users:
            raise Invalid.field(
                TAG_FILTERS, "can't be blank: a custom stream needs tag filters or user filters"
            )
        return
    if "tag_filters" in given and tags:
        raise Invalid.field(TAG_FILTERS, "are only for custom streams")
    if "user_filter_ids" in given and users:
        raise Invalid.field(USER_FILTERS, "are only for custom streams")
    state["tag_filters"], state["user_filter_ids"] = [], []


# --- actions ----------------------------------------------------------------------------------


async def list_extensions(
    pool: asyncpg.Pool, viewer: Viewer, page: Page
) -> list[asyncpg.Record]:
    require_admin(viewer)
    return await storage.list_page(pool, viewer.community_id, page.offset, page.limit)


async def access_extension(
    pool: asyncpg.Pool, viewer: Viewer, extension_id: int
) -> asyncpg.Record:
    require_admin(viewer)
    row = await storage.by_id(pool, viewer.community_id, extension_id)
    if row is None:
        raise NotFound("Reach extension not found")
    return row


async def create_extension(
    pool: asyncpg.Pool, viewer: Viewer, given: Mapping[str, Any]
) -> asyncpg.Record:
    require_admin(viewer)
    async with work(pool, None, viewer.community_id) as w:
        values = await resolve(w.conn, viewer, given, None)
        return await storage.insert(w.conn, viewer.community_id, secrets.token_urlsafe(24),
                                    viewer.id, values)


async def update_extension(
    pool: asyncpg.Pool, viewer: Viewer, extension_id: int, given: Mapping[str, Any]
) -> asyncpg.Record:
    require_admin(viewer)
    async with work(pool, None, viewer.community_id) as w:
        current = await storage.by_id(w.conn, viewer.community_id, extension_id, lock=True)
        if current is None:
            raise NotFound("Reach extension not found")
        changes = await resolve(w.conn, viewer, given, current)
        row = await storage.update(w.conn, viewer.community_id, extension_id, changes)
    if row is None:
        raise NotFound("Reach extension not found")
    return row
