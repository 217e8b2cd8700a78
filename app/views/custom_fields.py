"""Custom profile fields: `name` and `order`, plain or wrapped in `custom_field[...]`."""

from __future__ import annotations

from aiohttp import web
from pydantic import Field

from app.actions import custom_fields as actions
from app.context import viewer_of
from app.params import FlatBody, parse, path_id
from app.render.custom_fields import custom_field
from app.resources import pool_of
from app.responses import created, json_response, no_content


class CustomFieldBody(FlatBody):
    ROOT = "custom_field"
    name: str | None = Field(None, max_length=100)
    order: int | None = Field(None, ge=0, le=1_000_000)


async def list_fields(request: web.Request) -> web.Response:
    rows = await actions.list_fields(pool_of(request), viewer_of(request))
    return json_response({"custom_fields": [custom_field(r) for r in rows]})


async def show_field(request: web.Request) -> web.Response:
    row = await actions.field(pool_of(request), viewer_of(request), path_id(request, "id"))
    return json_response({"custom_field": custom_field(row)})


async def create_field(request: web.Request) -> web.Response:
    body = await parse(request, CustomFieldBody)
    row = await actions.create_field(pool_of(request), viewer_of(request), body.name, body.order)
    return created({"custom_field": custom_field(row)})


async def update_field(request: web.Request) -> web.Response:
    field_id = path_id(request, "id")
    body = await parse(request, CustomFieldBody)
    row = await actions.update_field(
        pool_of(request), viewer_of(request), field_id, body.name, body.order
    )
    return json_response({"custom_field": custom_field(row)})


async def delete_field(request: web.Request) -> web.Response:
    await actions.delete_field(pool_of(request), viewer_of(request), path_id(request, "id"))
    return no_content()
