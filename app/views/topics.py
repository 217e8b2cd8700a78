"""Topics and tags (shapes: app/render/topics.py; rules: app/actions/topics.py).

- POST /api/topics -> 201 {"topic": Topic}. topic[name] (required), topic[description].
- GET /api/topics/:topic_id -> 200 {"topic": Topic, "messages": [Message],
  "messages_next_page"}: the topic and the messages whose thread uses it that the viewer may
  read, newest interaction first. topic_id is an id (`12`, `12-sales`) or a name (`sales`).
  Takes page, per_page, since, comments_limit, likes_limit, comment_likes_limit like every
  message list.
- PUT /api/topics/:topic_id -> 200 {"topic": Topic}. topic[description] ("" clears it).
- GET /api/topics/search?q= -> 200 {"topics": [Topic]}: names starting with q (an exact name
  first), paged; a blank q answers [].
- GET /api/topics/:topic_id/contributors -> 200 {"users": [User]}: the authors of messages
  and comments using the topic that the viewer may read, most contributions first, paged.
- GET /api/tags/:id -> 200 {"tag": Tag}, id or name.
A topic the viewer may not see is a 404.
"""

from __future__ import annotations

from typing import Any

import asyncpg
from aiohttp import web
from pydantic import BaseModel, Field

from app.actions import messages as message_actions
from app.actions import topics as actions
from app.actions.message_lists import MessageQuery
from app.actions.users import full_users
from app.context import Viewer, community_of, viewer_of
from app.errors import BadRequest, Invalid, NotFound
from app.params import LOOSE, PageQuery, parse, parse_page
from app.render.topics import tag, topic
from app.resources import pool_of
from app.responses import created, json_response
from app.views.messages import MessageListQuery, limits_of


class TopicParams(BaseModel):
    model_config = LOOSE
    name: str | None = None
    description: str | None = None


class TopicBody(BaseModel):
    model_config = LOOSE
    topic: TopicParams = Field(default_factory=TopicParams)


class TopicSearchQuery(PageQuery):
    model_config = LOOSE
    q: str = Field("", max_length=200)


def _raw_id(request: web.Request, name: str) -> str:
    raw = request.match_info.get(name, "")
    if not raw.strip():
        raise NotFound("Topic not found")
    return raw


async def _render(
    conn: asyncpg.Connection, viewer: Viewer, topic_id: int | str, base: str
) -> dict[str, Any]:
    row = await actions.access_topic(conn, viewer, str(topic_id))
    return topic(row, base, editable=actions.may_edit(viewer, row))


async def create_topic(request: web.Request) -> web.Response:
    body = await parse(request, TopicBody)
    viewer = viewer_of(request)
    pool = pool_of(request)
    topic_id = await actions.create_topic(pool, viewer, body.topic.name, body.topic.description)
    async with pool.acquire() as conn:
        rendered = await _render(conn, viewer, topic_id, community_of(request).base_url)
    return created({"topic": rendered})


async def update_topic(request: web.Request) -> web.Response:
    body = await parse(request, TopicBody)
    viewer = viewer_of(request)
    pool = pool_of(request)
    topic_id = await actions.update_topic(
        pool, viewer, _raw_id(request, "topic_id"), body.topic.name, body.topic.description
    )
    async with pool.acquire() as conn:
        rendered = await _render(conn, viewer, topic_id, community_of(request).base_url)
    return json_response({"topic": rendered})


async def show_topic(request: web.Request) -> web.Response:
    try:
        query = await parse(request, MessageListQuery)
    except Invalid as exc:  # a non-number where a number belongs cannot be parsed: 400
        raise BadRequest(*exc.messages, fields=exc.fields) from None
    page = query.paging
    since = query.since
    viewer = viewer_of(request)
    base = community_of(request).base_url
    pool = pool_of(request)
    async with pool.acquire() as conn:
        row = await actions.access_topic(conn, viewer, _raw_id(request, "topic_id"))
    scope = MessageQuery(
        stream="company", topic=row["name"],
        since=since,
    )
    result = await message_actions.list_messages(
        pool, viewer, base, scope, page=page.page, per_page=page.per_page,
        limits=limits_of(query),
    )
    return json_response({
        "topic": topic(row, base, editable=actions.may_edit(viewer, row)),
        "messages": result.messages,
        "messages_next_page": result.next_page,
    })


async def search_topics(request: web.Request) -> web.Response:
    try:
        query = await parse(request, TopicSearchQuery)
    except Invalid as exc:
        raise BadRequest(*exc.messages, fields=exc.fields) from None
    page = query.paging
    q = query.q.strip().lstrip("#")
    if not q:
        return json_response({"topics": []})
    viewer = viewer_of(request)
    base = community_of(request).base_url
    rows = await actions.search_topics(pool_of(request), viewer, q, page)
    return json_response({
        "topics": [topic(r, base, editable=actions.may_edit(viewer, r)) for r in rows]
    })


async def topic_contributors(request: web.Request) -> web.Response:
    page = await parse_page(request)
    viewer = viewer_of(request)
    base = community_of(request).base_url
    async with pool_of(request).acquire() as conn:
        row = await actions.access_topic(conn, viewer, _raw_id(request, "topic_id"))
        rows = await actions.contributors(conn, viewer, row["id"], page)
        users = await full_users(conn, viewer, rows, base)
    return json_response({"users": users})


async def show_tag(request: web.Request) -> web.Response:
    viewer = viewer_of(request)
    async with pool_of(request).acquire() as conn:
        row = await actions.access_topic(conn, viewer, _raw_id(request, "id"))
    return json_response({"tag": tag(row, community_of(request).base_url)})
