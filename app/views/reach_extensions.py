"""Reach extensions (reach admin = community admin): list, show, create, update. The rules are
in app/actions/reach_extensions.py; parameters come wrapped in `reach_extension[...]` (plain
ones are read when there is no wrapper). The custom stream's filters arrive Rails-style:
`reach_extension[reach_extension_tag_filters_attributes][0][tag_name]=news` (or a JSON list of
{"tag_name"} / {"user_id"} objects); entries with a true `_destroy` are left out.
"""

from __future__ import annotations

from typing import Annotated, Any

from aiohttp import web
from pydantic import BaseModel, BeforeValidator, Field

from app.access import require_admin
from app.actions import reach_extensions as actions
from app.context import community_of, viewer_of
from app.errors import Invalid
from app.params import (
    LOOSE,
    OptionalId,
    RootedBody,
    as_list,
    flag,
    parse,
    parse_page,
    path_id,
)
from app.render.reach_extensions import reach_extension
from app.resources import pool_of
from app.responses import created, json_response


def _blank_to_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


OptionalText = Annotated[
    Annotated[str, Field(max_length=255)] | None, BeforeValidator(_blank_to_none)
]
OptionalBool = Annotated[bool | None, BeforeValidator(_blank_to_none)]
OptionalInt = Annotated[int | None, BeforeValidator(_blank_to_none)]


class ReachExtensionParams(BaseModel):
    model_config = LOOSE

    name: OptionalText = None
    external_system_id: OptionalId = None
    group_id: OptionalId = None
    container_id: OptionalId = None
    container_type: OptionalText = None
    install_type: OptionalText = None
    extension_type: OptionalText = None
    stream_type: OptionalText = None
    button_verb: OptionalText = None
    button_type: OptionalText = None
    profile_header: OptionalBool = None
    days_ago: OptionalInt = None
    login_required: OptionalBool = None
    reach_border_style: OptionalText = None
    reach_border_color: OptionalText = None
    reach_poweredby_bg: OptionalText = None
    reach_entry_border_color: OptionalText = None
    reach_comment_bg: OptionalText = None
    reach_default_text: OptionalText = None
    reach_secondary_text: OptionalText = None
    reach_default_link: OptionalText = None
    reach_secondary_link: OptionalText = None
    reach_button_border: OptionalText = None
    reach_button_color: OptionalText = None
    reach_button_bgcolor: OptionalText = None
    reach_button_inner_border: OptionalText = None
    reach_button_border_hover: OptionalText = None
    reach_button_bgcolor_hover: OptionalText = None
    reach_button_textshadow: OptionalText = None
    reach_social_button_border: OptionalText = None
    reach_social_button_text: OptionalText = None
    reach_social_button_background: OptionalText = None
    reach_separator_color: OptionalText = None
    reach_extension_tag_filters_attributes: Any = None
    reach_extension_user_filters_attributes: Any = None

    def given(self) -> dict[str, Any]:
        """Parameter name -> value for what the request named (None: given blank), the
        filters as `tag_filters` (names) and `user_filter_ids`."""
        out: dict[str, Any] = {}
        for name in self.model_fields_set:
            if name == "reach_extension_tag_filters_attributes":
                out["tag_filters"] = _tag_names(getattr(self, name))
            elif name == "reach_extension_user_filters_attributes":
                out["user_filter_ids"] = _user_ids(getattr(self, name))
            else:
                out[name] = getattr(self, name)
        return out


def _entries(value: Any) -> list[Any]:
    return [e for e in as_list(value) if not (isinstance(e, dict) and flag(e.get("_destroy")))]


def _tag_names(value: Any) -> list[str]:
    names: list[str] = []
    for entry in _entries(value):
        name = entry.get("tag_name") if isinstance(entry, dict) else entry
        if isinstance(name, str | int) and str(name).strip():
            names.append(str(name))
        elif name is not None and not isinstance(name, str):
            raise Invalid.field(actions.TAG_FILTERS, "must be tag_name entries")
    return names


def _user_ids(value: Any) -> list[int]:
    ids: list[int] = []
    for entry in _entries(value):
        raw = entry.get("user_id") if isinstance(entry, dict) else entry
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            continue
        if isinstance(raw, bool):
            raise Invalid.field(actions.USER_FILTERS, "must be user_id entries (integers)")
        try:
            ids.append(int(str(raw).strip()))
        except ValueError:
            raise Invalid.field(actions.USER_FILTERS,
                                "must be user_id entries (integers)") from None
    return ids


class ReachExtensionBody(RootedBody):
    ROOT = "reach_extension"
    reach_extension: ReachExtensionParams = Field(default_factory=ReachExtensionParams)



async def list_reach_extensions(request: web.Request) -> web.Response:
    page = await parse_page(request)
    rows = await actions.list_extensions(pool_of(request), viewer_of(request), page)
    base = community_of(request).base_url
    return json_response({"reach_extensions": [reach_extension(r, base) for r in rows]})


async def show_reach_extension(request: web.Request) -> web.Response:
    row = await actions.access_extension(
        pool_of(request), viewer_of(request), path_id(request, "reach_extension_id")
    )
    return json_response({"reach_extension": reach_extension(row, community_of(request).base_url)})


async def create_reach_extension(request: web.Request) -> web.Response:
    require_admin(viewer_of(request))
    params = (await parse(request, ReachExtensionBody)).reach_extension
    row = await actions.create_extension(pool_of(request), viewer_of(request), params.given())
    return created({"reach_extension": reach_extension(row, community_of(request).base_url)})


async def update_reach_extension(request: web.Request) -> web.Response:
    extension_id = path_id(request, "reach_extension_id")
    require_admin(viewer_of(request))
    params = (await parse(request, ReachExtensionBody)).reach_extension
    row = await actions.update_extension(
        pool_of(request), viewer_of(request), extension_id, params.given()
    )
    return json_response({"reach_extension": reach_extension(row, community_of(request).base_url)})
