"""Group chat: POST/GET/PATCH /api/groups/:group_id/chat_messages."""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel, Field

from app.actions import chat_messages as actions
from app.context import community_of, viewer_of
from app.params import LOOSE, IdList, PageQuery, QueryId, Since, parse, path_id
from app.resources import hub_of, pool_of
from app.responses import created, json_response, no_content
from app.views.conditional import conditional


class ChatMessageParams(BaseModel):
    model_config = LOOSE
    body: str | None = None
    attachment_ids: IdList = Field(default_factory=list)


class ChatMessageBody(BaseModel):
    model_config = LOOSE
    chat_message: ChatMessageParams = Field(default_factory=ChatMessageParams)


class ChatListQuery(PageQuery):
    model_config = LOOSE
    before: QueryId = None
    since: Since = None


async def create_chat_message(request: web.Request) -> web.Response:
    group_id = path_id(request, "group_id")
    body = await parse(request, ChatMessageBody)
    rendered = await actions.post_chat_message(
        pool_of(request), hub_of(request), viewer_of(request), group_id,
        body.chat_message.body, body.chat_message.attachment_ids,
        community_of(request).base_url,
    )
    return created({"chat_message": rendered})


@conditional
async def list_chat_messages(request: web.Request) -> web.Response:
    """Newest first, paged; `before=<id>` only older messages, `since=<epoch>` only newer."""
    group_id = path_id(request, "group_id")
    query = await parse(request, ChatListQuery)
    page = query.paging
    rendered = await actions.list_chat_messages(
        pool_of(request), viewer_of(request), group_id, community_of(request).base_url,
        before_id=query.before, since=query.since,
        offset=page.offset, limit=page.limit,
    )
    return json_response({"chat_messages": rendered})


async def mark_chat_read(request: web.Request) -> web.Response:
    """No parameters: the chat is read up to now."""
    await actions.mark_chat_read(pool_of(request), viewer_of(request),
                                 path_id(request, "group_id"))
    return no_content()
