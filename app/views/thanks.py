"""Thanks and the messages of badges.

- POST /api/thanks -> 201 {"thanks": Thanks}. thanks[body] (required), thanks[recipients][]
  (user ids; thanks[recipient], deprecated, is one more, put first), thanks[badge_id].
  Rules: app/actions/thanks.py.
- GET /api/thanks -> 200 {"thanks": [Thanks]}, newest first. user_id (received by that user),
  since (epoch seconds: given after it), page, per_page.
- GET /api/thanks/:id -> 200 {"thanks": Thanks} (not in the spec; reads one back).
- GET /api/users/:user_id/thanks -> the thanks that user received (404 for an unknown user).
- GET /api/badges/:id/messages and GET /api/users/:user_id/badges/:id/messages -> 200
  {"messages": [Message], "messages_next_page"}: the announcements of thanks with that badge
  (received by that user), that the viewer may read, newest interaction first; they take the
  message lists' comments_limit, likes_limit and comment_likes_limit.
A malformed number in a list's query string is a 400, as in the message lists.
"""

from __future__ import annotations

from typing import Annotated, Any

from aiohttp import web
from pydantic import BaseModel, BeforeValidator, Field

from app.access import access_user
from app.actions import thanks as actions
from app.actions.messages import render_messages
from app.context import community_of, viewer_of
from app.errors import BadRequest, Invalid
from app.params import (
    LOOSE,
    IdList,
    OptionalId,
    PageQuery,
    Since,
    parse,
    path_id,
)
from app.resources import hub_of, pool_of
from app.responses import created, json_response
from app.views.messages import MessageListQuery, limits_of


def _blank_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


OptionalInt = Annotated[int | None, BeforeValidator(_blank_none)]


class ThanksParams(BaseModel):
    model_config = LOOSE
    body: str | None = None
    recipients: IdList = Field(default_factory=list)
    recipient: OptionalId = None
    badge_id: OptionalId = None

    def to_fields(self) -> actions.ThanksFields:
        ids = list(self.recipients)
        if self.recipient is not None:  # it stays `recipient`: the first of them
            ids = [self.recipient, *(i for i in ids if i != self.recipient)]
        return actions.ThanksFields(body=self.body, recipient_ids=ids, badge_id=self.badge_id)


class ThanksBody(BaseModel):
    model_config = LOOSE
    thanks: ThanksParams = Field(default_factory=ThanksParams)


class ThanksListQuery(PageQuery):
    model_config = LOOSE
    user_id: OptionalId = None
    since: Since = None


async def _query(request: web.Request, model: type[Any]) -> Any:
    try:
        return await parse(request, model)
    except Invalid as exc:  # a non-number where a number belongs cannot be parsed: 400
        raise BadRequest(*exc.messages, fields=exc.fields) from None


async def create_thanks(request: web.Request) -> web.Response:
    body = await parse(request, ThanksBody)
    viewer = viewer_of(request)
    base = community_of(request).base_url
    pool = pool_of(request)
    thanks_id = await actions.create_thanks(pool, viewer, base, body.thanks.to_fields(),
                                            hub=hub_of(request))
    async with pool.acquire() as conn:
        rendered = await actions.load_thanks(conn, viewer, thanks_id, base)
    return created({"thanks": rendered})


async def _list(request: web.Request, recipient_id: int | None) -> web.Response:
    query: ThanksListQuery = await _query(request, ThanksListQuery)
    page = query.paging
    since = query.since
    viewer = viewer_of(request)
    async with pool_of(request).acquire() as conn:
        rows = await actions.list_thanks(
            conn, viewer, page,
            recipient_id=recipient_id if recipient_id is not None else query.user_id,
            since=since,
        )
        rendered = await actions.render_thanks_rows(
            conn, viewer, rows, community_of(request).base_url
        )
    return json_response({"thanks": rendered})


async def list_thanks(request: web.Request) -> web.Response:
    return await _list(request, None)


async def user_thanks(request: web.Request) -> web.Response:
    user = await access_user(pool_of(request), viewer_of(request), path_id(request, "user_id"))
    return await _list(request, user["id"])


async def show_thanks(request: web.Request) -> web.Response:
    viewer = viewer_of(request)
    async with pool_of(request).acquire() as conn:
        rendered = await actions.load_thanks(
            conn, viewer, path_id(request, "id"), community_of(request).base_url
        )
    return json_response({"thanks": rendered})


async def _badge_messages(request: web.Request, recipient_id: int | None) -> web.Response:
    query: MessageListQuery = await _query(request, MessageListQuery)
    page = query.paging
    viewer = viewer_of(request)
    base = community_of(request).base_url
    async with pool_of(request).acquire() as conn:
        rows, more = await actions.badge_messages(
            conn, viewer, path_id(request, "id"), page, recipient_id=recipient_id
        )
        messages = await render_messages(conn, viewer, rows, base, limits_of(query))
    return json_response({
        "messages": messages, "messages_next_page": page.page + 1 if more else None,
    })


async def badge_messages(request: web.Request) -> web.Response:
    return await _badge_messages(request, None)


async def user_badge_messages(request: web.Request) -> web.Response:
    user = await access_user(pool_of(request), viewer_of(request), path_id(request, "user_id"))
    return await _badge_messages(request, user["id"])
