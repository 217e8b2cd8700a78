"""Conversations, their members, activities and remarks (spec "Conversations")."""

from __future__ import annotations

from typing import Annotated, Any

from aiohttp import web
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from app.actions import conversations as actions
from app.actions.remarks import Remark, Uploads, post_remark, render_activities
from app.context import community_of, viewer_of
from app.params import (
    LOOSE,
    IdList,
    OptionalId,
    PageQuery,
    UploadedFile,
    as_list,
    flag,
    parse,
    parse_page,
    path_id,
)
from app.render.users import conversation_member
from app.resources import blobs_of, hub_of, pool_of, settings_of
from app.responses import created, json_response, no_content
from app.views.conditional import conditional


def _blank_to_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


def _emails(value: Any) -> Any:
    """Space-separated e-mails; a list (`members_emails[]=`) is joined."""
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return value


OptionalFloat = Annotated[float | None, BeforeValidator(_blank_to_none)]
Emails = Annotated[str | None, BeforeValidator(_emails)]
Files = Annotated[list[UploadedFile], BeforeValidator(as_list)]


class LocationParams(BaseModel):
    model_config = LOOSE
    longitude: OptionalFloat = Field(None, ge=-180, le=180)
    latitude: OptionalFloat = Field(None, ge=-90, le=90)


class RemarkParams(BaseModel):
    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True,
                              arbitrary_types_allowed=True)
    text: str | None = None
    attachment_ids: IdList = Field(default_factory=list)
    attachments: Files = Field(default_factory=list)
    # blank (`remark[location]=`) means absent, like other optional parameters
    location: Annotated[LocationParams | None, BeforeValidator(_blank_to_none)] = None
    shared_message_id: OptionalId = None
    client_provided_guid: Annotated[str | None, BeforeValidator(_blank_to_none)] = Field(
        None, max_length=255
    )

    def to_remark(self) -> Remark:
        location = self.location or LocationParams()
        return Remark(
            text=self.text or "", attachment_ids=list(self.attachment_ids),
            files=list(self.attachments), longitude=location.longitude,
            latitude=location.latitude, shared_message_id=self.shared_message_id,
            client_provided_guid=self.client_provided_guid,
        )


class RemarkBody(BaseModel):
    model_config = LOOSE
    remark: RemarkParams = Field(default_factory=RemarkParams)


class ConversationParams(BaseModel):
    model_config = LOOSE
    name: str | None = None
    members_emails: Emails = None


class ConversationCreateBody(BaseModel):
    model_config = LOOSE
    conversation: ConversationParams = Field(default_factory=ConversationParams)
    remark: RemarkParams | None = None


class ConversationUpdateBody(BaseModel):
    model_config = LOOSE
    conversation: ConversationParams = Field(default_factory=ConversationParams)


class MembersBody(BaseModel):
    """members_emails, or conversation[members_emails] as in the create request."""

    model_config = LOOSE
    members_emails: Emails = None
    conversation: ConversationParams = Field(default_factory=ConversationParams)

    @property
    def emails(self) -> str | None:
        return self.members_emails if self.members_emails is not None \
            else self.conversation.members_emails


class ConversationListQuery(PageQuery):
    model_config = LOOSE
    unread: str | None = None
    hidden: str | None = None



def _uploads(request: web.Request) -> Uploads:
    return Uploads(blobs_of(request), settings_of(request).max_upload_bytes)


async def _conversation(request: web.Request, conversation_id: int) -> web.Response:
    data = await actions.render_one(
        pool_of(request), viewer_of(request), conversation_id, community_of(request).base_url
    )
    return json_response({"conversation": data})


@conditional
async def list_conversations(request: web.Request) -> web.Response:
    """Latest activity first; `unread=true` only unread ones; `hidden=true` only hidden ones
    (hidden conversations are left out otherwise)."""
    query = await parse(request, ConversationListQuery)
    viewer = viewer_of(request)
    pool = pool_of(request)
    rows = await actions.list_conversations(
        pool, viewer, query.paging, unread_only=flag(query.unread), hidden=flag(query.hidden)
    )
    rendered = await actions.render_conversations(
        pool, viewer, rows, community_of(request).base_url
    )
    return json_response({"conversations": rendered})


async def show_conversation(request: web.Request) -> web.Response:
    return await _conversation(request, path_id(request, "id"))


async def create_conversation(request: web.Request) -> web.Response:
    body = await parse(request, ConversationCreateBody)
    conversation_id = await actions.create_conversation(
        pool_of(request), hub_of(request), viewer_of(request), community_of(request).base_url,
        members_emails=body.conversation.members_emails, name=body.conversation.name,
        remark=body.remark.to_remark() if body.remark is not None else None,
        uploads=_uploads(request),
    )
    response = await _conversation(request, conversation_id)
    response.set_status(201)
    return response


async def update_conversation(request: web.Request) -> web.Response:
    conversation_id = path_id(request, "id")
    body = await parse(request, ConversationUpdateBody)
    await actions.rename_conversation(
        pool_of(request), hub_of(request), viewer_of(request), conversation_id,
        body.conversation.name, community_of(request).base_url,
    )
    return await _conversation(request, conversation_id)


async def list_members(request: web.Request) -> web.Response:
    page = await parse_page(request)
    rows = await actions.list_members(
        pool_of(request), viewer_of(request), path_id(request, "conversation_id"), page
    )
    base = community_of(request).base_url
    return json_response({"users": [conversation_member(r, base) for r in rows]})


async def add_members(request: web.Request) -> web.Response:
    conversation_id = path_id(request, "conversation_id")
    body = await parse(request, MembersBody)
    members = await actions.add_members(
        pool_of(request), hub_of(request), viewer_of(request), conversation_id, body.emails,
        community_of(request).base_url,
    )
    return created({"users": members})


async def leave_conversation(request: web.Request) -> web.Response:
    await actions.leave_conversation(
        pool_of(request), hub_of(request), viewer_of(request),
        path_id(request, "conversation_id"), community_of(request).base_url,
    )
    return no_content()


async def list_activities(request: web.Request) -> web.Response:
    """Newest first, paged."""
    page = await parse_page(request)
    pool = pool_of(request)
    viewer = viewer_of(request)
    rows = await actions.list_activities(
        pool, viewer, path_id(request, "conversation_id"), page
    )
    rendered = await render_activities(pool, viewer, rows, community_of(request).base_url)
    return json_response({"activities": rendered})


async def show_activity(request: web.Request) -> web.Response:
    pool = pool_of(request)
    viewer = viewer_of(request)
    row = await actions.activity(
        pool, viewer, path_id(request, "conversation_id"), path_id(request, "id")
    )
    rendered = await render_activities(pool, viewer, [row], community_of(request).base_url)
    return json_response({"activity": rendered[0]})


async def create_remark(request: web.Request) -> web.Response:
    """201 with the activity; a retry with the same client_provided_guid gets the first one."""
    conversation_id = path_id(request, "conversation_id")
    body = await parse(request, RemarkBody)
    rendered, _ = await post_remark(
        pool_of(request), hub_of(request), viewer_of(request), conversation_id,
        body.remark.to_remark(), community_of(request).base_url, _uploads(request),
    )
    return created({"activity": rendered})


async def acknowledge(request: web.Request) -> web.Response:
    conversation_id = path_id(request, "id")
    await actions.acknowledge(pool_of(request), viewer_of(request), conversation_id)
    return await _conversation(request, conversation_id)


async def acknowledge_all(request: web.Request) -> web.Response:
    await actions.acknowledge_all(pool_of(request), viewer_of(request))
    return no_content()


async def hide(request: web.Request) -> web.Response:
    conversation_id = path_id(request, "id")
    await actions.set_hidden(pool_of(request), viewer_of(request), conversation_id, True)
    return await _conversation(request, conversation_id)


async def unhide(request: web.Request) -> web.Response:
    conversation_id = path_id(request, "id")
    await actions.set_hidden(pool_of(request), viewer_of(request), conversation_id, False)
    return await _conversation(request, conversation_id)
