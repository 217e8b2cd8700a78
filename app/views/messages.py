"""Messages: posting, reading, editing, deleting, the message lists (streams, groups, users,
external systems, topics), search, and hiding a message from a group's stream.

Every list answers {"messages": [...], "messages_next_page": n | null} and takes page,
per_page, since (epoch seconds: interacted with after it), tag, comments_limit, likes_limit
and comment_likes_limit (each 0..500, default 100). GET /api/messages shows the Home stream
unless stream_id names another; tag (without stream_id) searches the whole company.
"""

from __future__ import annotations

from typing import Annotated, Any

from aiohttp import web
from pydantic import BaseModel, BeforeValidator, Field

from app.access import access_user
from app.actions import message_lists as lists
from app.actions import messages as actions
from app.actions.message_lists import MessageQuery
from app.actions.messages import API_MESSAGE_TYPES, Limits, MessageChanges, NewMessage
from app.context import community_of, viewer_of
from app.errors import BadRequest, Invalid
from app.params import (
    LOOSE,
    BodyId,
    IdList,
    OptionalId,
    PageQuery,
    Since,
    parse,
    path_id,
)
from app.resources import blobs_of, hub_of, pool_of
from app.responses import created, json_response, no_content
from app.views.conditional import conditional_messages

MAX_BODY = 50_000


def _blank_to_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


OptionalText = Annotated[str | None, BeforeValidator(_blank_to_none)]
OptionalInt = Annotated[int | None, BeforeValidator(_blank_to_none)]


class MessageParams(BaseModel):
    model_config = LOOSE

    body: str | None = Field(None, max_length=MAX_BODY)
    title: str | None = Field(None, max_length=255)
    url: str | None = Field(None, max_length=2048)
    group_id: OptionalId = None
    message_type: OptionalText = None
    attachment_ids: IdList = Field(default_factory=list)
    poll_id: OptionalId = None
    recipients: Any = None
    days_of_stickiness: OptionalInt = Field(None, ge=0, le=actions.MAX_STICKINESS_DAYS)
    shared_message_id: OptionalId = None
    client_provided_guid: str | None = Field(None, max_length=255)


class MessageCreateBody(BaseModel):
    model_config = LOOSE
    message: MessageParams


class MessageUpdateBody(BaseModel):
    model_config = LOOSE
    message: MessageParams = Field(default_factory=MessageParams)


class MessageListQuery(PageQuery):
    """Parameters of every message list."""

    model_config = LOOSE
    since: Since = None
    stream_id: OptionalId = None
    user_id: OptionalId = None
    external_system_id: OptionalId = None
    tag: OptionalText = None
    comments_limit: OptionalInt = None
    likes_limit: OptionalInt = None
    comment_likes_limit: OptionalInt = None


class SearchQuery(MessageListQuery):
    q: str = Field("", max_length=500)


class HideMessageBody(BaseModel):
    model_config = LOOSE
    message_id: BodyId = None


# --- parameters ------------------------------------------------------------------------------


def _recipients(value: Any) -> tuple[list[str], list[int], list[int]]:
    """message[recipients]: "alice, @bob", ["alice", "ops"], or [{"type": "User"|"Group",
    "id": n}] (also keyed by index). Names are usernames or groupnames."""
    names: list[str] = []
    user_ids: list[int] = []
    group_ids: list[int] = []
    if value is None:
        return names, user_ids, group_ids
    if isinstance(value, dict):
        if "id" in value or "type" in value:
            value = [value]
        else:
            value = [value[k] for k in sorted(value, key=str)]
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, list):
        value = [value]
    for item in value:
        if isinstance(item, dict):
            kind = str(item.get("type", "User")).lower()
            try:
                ident = int(str(item.get("id", "")).strip())
            except ValueError:
                raise Invalid.field("message[recipients]", "has an entry without an id") from None
            (group_ids if kind == "group" else user_ids).append(ident)
        elif isinstance(item, str):
            names.extend(n for n in item.replace(",", " ").split() if n.strip("@"))
        else:
            raise Invalid.field("message[recipients]", "must be names or {type, id} entries")
    return names, user_ids, group_ids


def new_message(params: MessageParams, *, group_id: int | None = None) -> NewMessage:
    """The NewMessage of API parameters (`group_id` overrides message[group_id])."""
    if params.message_type is not None and params.message_type not in API_MESSAGE_TYPES:
        raise Invalid.field(
            "message[message_type]", f"must be one of {', '.join(API_MESSAGE_TYPES)}"
        )
    names, user_ids, group_ids = _recipients(params.recipients)
    return NewMessage(
        body=params.body or "",
        title=params.title or "",
        url=params.url,
        group_id=group_id if group_id is not None else params.group_id,
        message_type=params.message_type,
        attachment_ids=params.attachment_ids,
        poll_id=params.poll_id,
        recipient_names=names,
        recipient_user_ids=user_ids,
        recipient_group_ids=group_ids,
        days_of_stickiness=params.days_of_stickiness or 0,
        source="api",
        client_provided_guid=params.client_provided_guid,
        shared_message_id=params.shared_message_id,
    )


def _bounded(value: int | None, name: str, default: int) -> int:
    if value is None:
        return default
    if value < 0:
        raise BadRequest(f"{name} must be zero or a positive integer")
    return min(value, actions.MAX_THREAD_LIMIT)


def limits_of(query: MessageListQuery) -> Limits:
    default = actions.DEFAULT_THREAD_LIMIT
    return Limits(
        comments=_bounded(query.comments_limit, "comments_limit", default),
        likes=_bounded(query.likes_limit, "likes_limit", default),
        comment_likes=_bounded(query.comment_likes_limit, "comment_likes_limit", default),
    )


async def _list_query(request: web.Request) -> MessageListQuery:
    try:
        return await parse(request, MessageListQuery)
    except Invalid as exc:  # a non-number where a number belongs cannot be parsed: 400
        raise BadRequest(*exc.messages, fields=exc.fields) from None


# --- rendering -------------------------------------------------------------------------------


async def render_created(request: web.Request, message_id: int) -> dict[str, Any]:
    viewer = viewer_of(request)
    pool = pool_of(request)
    base = community_of(request).base_url
    async with pool.acquire() as conn:
        return await actions.render_created(conn, viewer, message_id, base)


async def _render_one(
    request: web.Request, message_id: int, limits: Limits = Limits()
) -> dict[str, Any]:
    viewer = viewer_of(request)
    async with pool_of(request).acquire() as conn:
        return await actions.render_message(
            conn, viewer, message_id, community_of(request).base_url, limits
        )


def _narrowed(scope: MessageQuery, query: MessageListQuery, **extra: Any) -> MessageQuery:
    """The scope plus the filters every list takes (since, tag) and `extra` fields."""
    return lists.narrowed(scope, since=query.since, tag=query.tag, **extra)


# --- lists -----------------------------------------------------------------------------------


def _narrowing(query: MessageListQuery) -> dict[str, Any]:
    """`user_id` and `external_system_id` narrow every message list (decisions.md)."""
    extra: dict[str, Any] = {}
    if query.user_id is not None:
        extra["author_id"] = query.user_id
    if query.external_system_id is not None:
        extra["external_system_id"] = query.external_system_id
    return extra


@conditional_messages
async def list_messages(request: web.Request) -> web.Response:
    """GET /api/messages: the Home stream, or the stream_id one; `tag` overrides stream_id (the
    Company stream's messages with that topic); user_id / external_system_id narrow the chosen
    stream, or alone every readable message to that author / system."""
    query = await _list_query(request)
    viewer = viewer_of(request)
    pool = pool_of(request)
    first = query.paging.page == 1
    if query.tag is not None:
        scope = lists.COMPANY
    elif query.stream_id is not None:
        stream = await lists.open_stream(pool, viewer, query.stream_id, mark_read=first)
        scope = lists.query_of_stream(stream)
    elif query.user_id is not None or query.external_system_id is not None:
        scope = lists.EVERYTHING
    else:
        # page 1 marks Home read, on the page's connection, before the page is read
        return await _respond_with(request, query, lists.HOME, _narrowing(query),
                                   opening=lists.mark_home_read if first else None)
    return await _respond_with(request, query, scope, _narrowing(query))


async def _respond_with(
    request: web.Request, query: MessageListQuery, scope: MessageQuery, extra: dict[str, Any],
    *, opening: actions.Opening | None = None,
) -> web.Response:
    page = query.paging
    result = await actions.list_messages(
        pool_of(request), viewer_of(request), community_of(request).base_url,
        _narrowed(scope, query, **extra), page=page.page, per_page=page.per_page,
        limits=limits_of(query), opening=opening,
    )
    return json_response({"messages": result.messages, "messages_next_page": result.next_page})


@conditional_messages
async def stream_messages(request: web.Request) -> web.Response:
    """GET /api/streams/:stream_id/messages (page 1 marks the stream read)."""
    query = await _list_query(request)
    viewer = viewer_of(request)
    stream_id = path_id(request, "stream_id")
    first = query.paging.page == 1
    stream = await lists.open_stream(pool_of(request), viewer, stream_id,
                                     mark_read=query.tag is None and first)
    # `tag` overrides stream_id (interface.md), the path's too: the stream must still be one
    # the viewer has, and is then not marked read
    scope = lists.COMPANY if query.tag is not None else lists.query_of_stream(stream)
    return await _respond_with(request, query, scope, _narrowing(query))


@conditional_messages
async def group_messages(request: web.Request) -> web.Response:
    """GET /api/groups/:group_id/messages: the group's stream (without hidden messages)."""
    query = await _list_query(request)
    viewer = viewer_of(request)
    group_id = path_id(request, "group_id")
    scope = await lists.open_group(pool_of(request), viewer, group_id,
                                   mark_read=query.paging.page == 1)
    return await _respond_with(request, query, scope, {})


async def _stream_param_scope(
    request: web.Request, query: MessageListQuery
) -> MessageQuery:
    """The stream_id stream, else every message the viewer may read (an author's or a system's
    messages are theirs even when the system keeps out of the Company stream)."""
    if query.stream_id is None or query.tag is not None:  # tag overrides stream_id
        return lists.EVERYTHING
    return await lists.stream_query(pool_of(request), viewer_of(request), query.stream_id)


@conditional_messages
async def user_messages(request: web.Request) -> web.Response:
    """GET /api/users/:user_id/messages: what the user posted (that the viewer may read),
    narrowed by stream_id, external_system_id, since and tag."""
    query = await _list_query(request)
    user = await access_user(pool_of(request), viewer_of(request), path_id(request, "user_id"))
    scope = await _stream_param_scope(request, query)
    return await _respond_with(request, query, scope,
                               {**_narrowing(query), "author_id": user["id"]})


@conditional_messages
async def external_system_messages(request: web.Request) -> web.Response:
    """GET /api/external_systems/:external_system_id/messages: messages posted by the system
    (matched on messages.external_system_id), narrowed by stream_id, user_id, since and tag."""
    query = await _list_query(request)
    system_id = path_id(request, "external_system_id")
    await lists.access_external_system(pool_of(request), viewer_of(request), system_id)
    scope = await _stream_param_scope(request, query)
    return await _respond_with(request, query, scope,
                               {**_narrowing(query), "external_system_id": system_id})


@conditional_messages
async def search_messages(request: web.Request) -> web.Response:
    """GET /api/messages/search?q=: full-text search (web-search syntax: words, "phrases",
    -excluded, or), best match first, among what the viewer may read."""
    try:
        query = await parse(request, SearchQuery)
    except Invalid as exc:
        raise BadRequest(*exc.messages, fields=exc.fields) from None
    if not query.q.strip():
        return json_response({"messages": [], "messages_next_page": None})
    return await _respond_with(request, query, lists.search(query.q.strip()), {})


# --- one message -----------------------------------------------------------------------------


async def create_message(request: web.Request) -> web.Response:
    body = await parse(request, MessageCreateBody)
    viewer = viewer_of(request)
    return created({"message": await actions.create_and_render(
        pool_of(request), viewer, community_of(request).base_url, new_message(body.message),
        hub_of(request),
    )})


async def create_stream_message(request: web.Request) -> web.Response:
    """POST /api/streams/:stream_id/messages: into the group of a group stream; a system
    stream posts as POST /api/messages does."""
    body = await parse(request, MessageCreateBody)
    viewer = viewer_of(request)
    pool = pool_of(request)
    group_id = await lists.group_of_stream(pool, viewer, path_id(request, "stream_id"))
    return created({"message": await actions.create_and_render(
        pool, viewer, community_of(request).base_url, new_message(body.message, group_id=group_id),
        hub_of(request),
    )})


async def show_message(request: web.Request) -> web.Response:
    """GET /api/messages/:message_id (comments_limit, likes_limit, comment_likes_limit)."""
    limits = limits_of(await _list_query(request))
    rendered = await _render_one(request, path_id(request, "message_id"), limits)
    return json_response({"message": rendered})


async def update_message(request: web.Request) -> web.Response:
    message_id = path_id(request, "message_id")
    params = (await parse(request, MessageUpdateBody)).message
    await actions.update_message(
        pool_of(request), viewer_of(request), community_of(request).base_url, message_id,
        MessageChanges(body=params.body, title=params.title, url=params.url), hub_of(request),
    )
    return json_response({"message": await _render_one(request, message_id)})


async def delete_message(request: web.Request) -> web.Response:
    """DELETE /api/messages/:message_id: 204, like the other deletes of the feed."""
    await actions.delete_message(
        pool_of(request), viewer_of(request), path_id(request, "message_id"), blobs_of(request)
    )
    return no_content()


async def hide_message(request: web.Request) -> web.Response:
    """POST /api/groups/:id/hide_message (message_id): 200 with the message (hidden: true)."""
    group_id = path_id(request, "id")
    message_id = (await parse(request, HideMessageBody)).message_id
    if message_id is None:
        raise Invalid.field("message_id", "can't be blank")
    viewer = viewer_of(request)
    await actions.hide_message(pool_of(request), viewer, group_id, message_id)
    return json_response({"message": await _render_one(request, message_id)})

