"""Group webhooks: list, create (the secret and url shown only then), delete, and the incoming
call `POST /api/webhooks/:webhook_identifier/:webhook_secret` (no other credentials; 204)."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import BaseModel, Field

from app.actions import webhooks as actions
from app.actions.webhooks import Incoming
from app.context import community_of, viewer_of
from app.middleware import public
from app.params import LOOSE, parse, parse_page, path_id, read_params, validate
from app.render.webhooks import created_webhook, webhook
from app.resources import LIMITER, blobs_of, hub_of, pool_of, settings_of
from app.responses import created, json_response, no_content
from app.uploads import DATA_URI_LIMIT_KEY

MAX_BODY = 50_000


class WebhookParams(BaseModel):
    model_config = LOOSE
    name: str | None = Field(None, max_length=1000)


class WebhookCreateBody(BaseModel):
    model_config = LOOSE
    webhook: WebhookParams = Field(default_factory=WebhookParams)



class WebhookMessageParams(BaseModel):
    model_config = LOOSE
    body: str | None = Field(None, max_length=MAX_BODY)
    # a multipart file, or a base64 data URI string
    attachment: Any = None


class WebhookMessageBody(BaseModel):
    model_config = LOOSE
    message: WebhookMessageParams = Field(default_factory=WebhookMessageParams)


async def list_webhooks(request: web.Request) -> web.Response:
    """GET /api/groups/:group_id/webhooks (group admin): without secrets."""
    group_id = path_id(request, "group_id")
    page = await parse_page(request)
    rows = await actions.list_webhooks(pool_of(request), viewer_of(request), group_id, page)
    return json_response({"webhooks": [webhook(r) for r in rows]})


async def create_webhook(request: web.Request) -> web.Response:
    group_id = path_id(request, "group_id")
    body = await parse(request, WebhookCreateBody)
    made = await actions.create_webhook(pool_of(request), viewer_of(request), group_id,
                                        body.webhook.name)
    return created({"webhook": created_webhook(made.row, community_of(request).base_url,
                                               made.secret)})


async def delete_webhook(request: web.Request) -> web.Response:
    await actions.delete_webhook(
        pool_of(request), viewer_of(request), path_id(request, "group_id"),
        path_id(request, "webhook_id"),
    )
    return no_content()


@public
async def incoming_webhook(request: web.Request) -> web.Response:
    """The webhook is checked (404 for a wrong identifier or secret) before the body is read."""
    community = community_of(request)
    settings = settings_of(request)
    pool = pool_of(request)
    hook = await actions.verify(
        pool, request.app[LIMITER], community.id, request.match_info["webhook_identifier"],
        request.match_info["webhook_secret"], rate_limit=settings.rate_limit_webhooks,
    )
    # a JSON body's data URI attachment is decoded as it arrives, not held whole
    request[DATA_URI_LIMIT_KEY] = settings.max_upload_bytes
    params = validate(WebhookMessageBody, await read_params(request)).message
    await actions.post_incoming(
        pool, blobs_of(request), hook, community.base_url,
        Incoming(body=params.body, attachment=params.attachment),
        max_bytes=settings.max_upload_bytes, hub=hub_of(request),
    )
    return no_content()
