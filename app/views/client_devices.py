"""Client devices (spec "Client devices"): the viewer's push registrations."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import BaseModel, BeforeValidator, Field

from app.actions import client_devices as actions
from app.context import viewer_of
from app.errors import Invalid
from app.params import LOOSE, parse
from app.render.client_devices import client_device
from app.resources import pool_of
from app.responses import json_response, no_content

MAX_TOKEN = 4096
MAX_VERSION = 255


def _blank_to_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


def _stripped(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


Switch = Annotated[bool | None, BeforeValidator(_blank_to_none)]
Version = Annotated[str | None, BeforeValidator(_blank_to_none)]
NotificationType = Annotated[
    Literal["main", "conversations"], BeforeValidator(lambda v: _blank_to_none(v) or "main")
]
Token = Annotated[str | None, BeforeValidator(lambda v: _blank_to_none(_stripped(v)))]


class DeviceParams(BaseModel):
    model_config = LOOSE
    registration_id: Token = Field(None, max_length=MAX_TOKEN)
    push_enabled: Switch = None
    push_mentions: Switch = None
    push_announcements: Switch = None
    push_replies: Switch = None
    push_conversation_activity: Switch = None
    os_version: Version = Field(None, max_length=MAX_VERSION)
    client_version: Version = Field(None, max_length=MAX_VERSION)
    platform: Version = None


class DeviceBody(BaseModel):
    """registration_id (required; also read from client_device[registration_id]),
    notification_type (main or conversations; default main), client_device[...] switches,
    os_version, client_version and platform (apns or fcm; default: from the token's shape)."""

    model_config = LOOSE
    registration_id: Token = Field(None, max_length=MAX_TOKEN)
    notification_type: NotificationType = "main"
    client_device: DeviceParams = Field(default_factory=DeviceParams)


class DeviceDeleteQuery(BaseModel):
    """registration_id (required), notification_type (main or conversations; default main)."""

    model_config = LOOSE
    registration_id: Token = Field(None, max_length=MAX_TOKEN)
    notification_type: NotificationType = "main"


def _token(value: str | None) -> str:
    if value is None:
        raise Invalid.field("registration_id", "can't be blank")
    return value


async def list_devices(request: web.Request) -> web.Response:
    rows = await actions.list_devices(pool_of(request), viewer_of(request))
    return json_response({"client_devices": [client_device(r) for r in rows]})


async def register_device(request: web.Request) -> web.Response:
    """PUT /api/client_devices: register, or update the device (registration_id,
    notification_type) of the viewer: 204."""
    body = await parse(request, DeviceBody)
    params = body.client_device
    token = _token(body.registration_id or params.registration_id)
    await actions.register_device(pool_of(request), viewer_of(request), actions.DeviceFields(
        registration_id=token,
        notification_type=body.notification_type,
        platform=actions.platform_of(token, params.platform),
        push_enabled=params.push_enabled,
        push_mentions=params.push_mentions,
        push_announcements=params.push_announcements,
        push_replies=params.push_replies,
        push_conversation_activity=params.push_conversation_activity,
        os_version=params.os_version,
        client_version=params.client_version,
    ))
    return no_content()


async def unregister_device(request: web.Request) -> web.Response:
    query = await parse(request, DeviceDeleteQuery)
    await actions.unregister_device(
        pool_of(request), viewer_of(request), _token(query.registration_id),
        query.notification_type,
    )
    return no_content()
