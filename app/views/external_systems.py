"""External systems (reach admin = community admin): list, show, create (with the client
credentials, the secret shown only then), update (activate=true reactivates), delete
(deactivates), the credentials check, and posting a message as a system.

Parameters come wrapped in `external_system[...]` (plain ones are read when there is no
wrapper); `external_system[profile_photo][data]` is a multipart file.
"""

from __future__ import annotations

from typing import Annotated, Any

from aiohttp import web
from pydantic import BaseModel, BeforeValidator, Field

from app.access import require_admin
from app.actions import external_systems as actions
from app.actions.external_systems import SystemFields
from app.authentication import client_address
from app.context import community_of, viewer_of
from app.middleware import public
from app.params import (
    LOOSE,
    RootedBody,
    UploadedFile,
    parse,
    parse_page,
    path_id,
)
from app.render.external_systems import created_external_system, external_system
from app.resources import LIMITER, blobs_of, hub_of, pool_of, settings_of
from app.responses import created, json_response
from app.views import messages as message_views


def _blank_to_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


OptionalBool = Annotated[bool | None, BeforeValidator(_blank_to_none)]


class ExternalSystemParams(BaseModel):
    model_config = LOOSE

    name: str | None = Field(None, max_length=255)
    description: str | None = Field(None, max_length=5000)
    url: str | None = Field(None, max_length=2048)
    profile_photo_url: str | None = Field(None, max_length=2048)
    profile_photo: Any = None
    not_in_company_stream: OptionalBool = None
    external_system_type: str | None = Field(None, max_length=50)
    sharepoint_version: str | None = Field(None, max_length=10)
    activate: OptionalBool = None

    def fields(self) -> SystemFields:
        return SystemFields(
            name=self.name, description=self.description, url=self.url,
            profile_photo_url=self.profile_photo_url,
            not_in_company_stream=self.not_in_company_stream,
            external_system_type=self.external_system_type,
            sharepoint_version=self.sharepoint_version, activate=bool(self.activate),
        )

    def upload(self) -> UploadedFile | None:
        photo = self.profile_photo
        data = photo.get("data") if isinstance(photo, dict) else None
        return data if isinstance(data, UploadedFile) else None


class ExternalSystemBody(RootedBody):
    ROOT = "external_system"
    external_system: ExternalSystemParams = Field(default_factory=ExternalSystemParams)



async def list_external_systems(request: web.Request) -> web.Response:
    page = await parse_page(request)
    rows = await actions.list_systems(pool_of(request), viewer_of(request), page)
    base = community_of(request).base_url
    return json_response({"external_systems": [external_system(r, base) for r in rows]})


async def show_external_system(request: web.Request) -> web.Response:
    row = await actions.access_system(
        pool_of(request), viewer_of(request), path_id(request, "external_system_id")
    )
    return json_response({"external_system": external_system(row, community_of(request).base_url)})


async def create_external_system(request: web.Request) -> web.Response:
    require_admin(viewer_of(request))
    params = (await parse(request, ExternalSystemBody)).external_system
    made = await actions.create_system(
        pool_of(request), blobs_of(request), viewer_of(request), params.fields(),
        params.upload(), max_bytes=settings_of(request).max_upload_bytes,
    )
    base = community_of(request).base_url
    return created({"external_system": created_external_system(made.row, base,
                                                               made.client_secret)})


async def update_external_system(request: web.Request) -> web.Response:
    system_id = path_id(request, "external_system_id")
    require_admin(viewer_of(request))
    params = (await parse(request, ExternalSystemBody)).external_system
    row = await actions.update_system(
        pool_of(request), blobs_of(request), viewer_of(request), system_id, params.fields(),
        params.upload(), max_bytes=settings_of(request).max_upload_bytes,
    )
    return json_response({"external_system": external_system(row, community_of(request).base_url)})


async def deactivate_external_system(request: web.Request) -> web.Response:
    """DELETE: the system becomes inactive (200 with it, as the interface says)."""
    row = await actions.deactivate_system(
        pool_of(request), viewer_of(request), path_id(request, "external_system_id")
    )
    return json_response({"external_system": external_system(row, community_of(request).base_url)})


@public
async def authenticate_external_system(request: web.Request) -> web.Response:
    """`Authorization: ServiceApiClient <client_identifier>:<client_secret>` (or
    SocialcastApiClient): 200 with the system, or 401."""
    community = community_of(request)
    settings = settings_of(request)
    row = await actions.authenticate_system(
        pool_of(request), request.app[LIMITER], community.id, community.name.replace('"', "'"),
        request.headers.get("Authorization", ""), client_address=client_address(request),
        failed_limit=settings.rate_limit_failed_logins,
    )
    return json_response({"external_system": external_system(row, community.base_url)})


async def create_external_system_message(request: web.Request) -> web.Response:
    """POST /api/external_systems/:id/messages: the message parameters of POST /api/messages;
    201 with the message, posted by the calling admin on behalf of the system."""
    system_id = path_id(request, "external_system_id")
    require_admin(viewer_of(request))
    body = await parse(request, message_views.MessageCreateBody)
    message_id = await actions.post_message(
        pool_of(request), viewer_of(request), community_of(request).base_url, system_id,
        message_views.new_message(body.message), hub_of(request),
    )
    return created({"message": await message_views.render_created(request, message_id)})
