"""Topics: creating one, changing its description, and finding the ones a viewer may see.

Rules:
- A topic's name is a #tag: letters, digits, `_` and inner `-`, at most MAX_NAME characters,
  stored lower-case (`#Sales` and `#sales` are one topic); a leading `#` is ignored.
- POST makes a `listed` topic, seen by everyone. A name the viewer can already see is a 409.
  A name that exists only through #tags in messages the viewer may not read is taken over
  (listed, the viewer its creator), so that nothing tells them those messages exist.
- PUT changes the description: the topic's creator or a community admin (403 otherwise). The
  name of a topic is what messages write, so it can't change (only its letter case may be
  given differently).
- Descriptions pass the community's content filters.
- A topic the viewer may not see is a 404 (storage/topic_pages.py says who sees what).
"""

from __future__ import annotations

import re

import asyncpg

from app.actions.content_filters import check_text
from app.actions.work import work
from app.context import Viewer
from app.errors import Conflict, Forbidden, Invalid, NotFound
from app.params import Page, parse_id
from storage import topic_pages
from storage.db import Conn

MAX_NAME = 100
MAX_DESCRIPTION = 5_000
NAME_RE = re.compile(r"^\w(?:[\w\-]*\w)?$")


def normalize_name(name: str | None, field: str = "topic[name]") -> str:
    value = (name or "").strip().lstrip("#").lower()
    if not value:
        raise Invalid.field(field, "can't be blank")
    if len(value) > MAX_NAME:
        raise Invalid.field(field, f"is too long (maximum is {MAX_NAME} characters)")
    if not NAME_RE.match(value):
        raise Invalid.field(field, "may contain only letters, digits, '_' and inner '-'")
    return value


def _description(value: str | None) -> str | None:
    if value is None:
        return None
    text = value.strip()
    if len(text) > MAX_DESCRIPTION:
        raise Invalid.field(
            "topic[description]", f"is too long (maximum is {MAX_DESCRIPTION} characters)"
        )
    return text


def may_edit(viewer: Viewer, row: asyncpg.Record) -> bool:
    return viewer.is_admin or (row["creator_id"] is not None and row["creator_id"] == viewer.id)


async def access_topic(conn: Conn, viewer: Viewer, topic_id: str) -> asyncpg.Record:
    """A topic by id (`12` or `12-name`) or by name (`sales`, `#sales`), if the viewer may see
    it; a 404 otherwise."""
    name = topic_id.strip().lstrip("#").lower()
    row = await topic_pages.visible(
        conn, viewer.community_id, viewer.id, viewer.is_external, parse_id(topic_id), name
    )
    if row is None:
        raise NotFound("Topic not found")
    return row


async def create_topic(
    pool: asyncpg.Pool, viewer: Viewer, name: str | None, description: str | None
) -> int:
    value = normalize_name(name)
    text = _description(description)
    async with work(pool, None, viewer.community_id) as w:
        await check_text(w.conn, viewer.community_id, text, field="topic[description]")
        topic_id = await topic_pages.insert(w.conn, viewer.community_id, value, text or None,
                                            viewer.id)
        if topic_id is not None:
            return topic_id
        existing = await topic_pages.by_name_any(w.conn, viewer.community_id, value)
        assert existing is not None
        seen = await topic_pages.visible(
            w.conn, viewer.community_id, viewer.id, viewer.is_external, existing["id"], value
        )
        if seen is not None:
            raise Conflict("That topic already exists",
                           fields={"topic[name]": ["has already been taken"]})
        await topic_pages.adopt(w.conn, viewer.community_id, existing["id"], viewer.id,
                                text or None)
        existing_id: int = existing["id"]
        return existing_id


async def update_topic(
    pool: asyncpg.Pool, viewer: Viewer, topic_id: str, name: str | None,
    description: str | None,
) -> int:
    text = _description(description)
    async with work(pool, None, viewer.community_id) as w:
        row = await access_topic(w.conn, viewer, topic_id)
        if not may_edit(viewer, row):
            raise Forbidden("Only the topic's creator or a community admin can change it")
        if name is not None and normalize_name(name) != row["name"]:
            raise Invalid.field("topic[name]", "can't be changed")
        if text is not None:
            await check_text(w.conn, viewer.community_id, text, field="topic[description]")
            await topic_pages.update_description(w.conn, viewer.community_id, row["id"],
                                                 text or None)
    result: int = row["id"]
    return result


# --- reads -------------------------------------------------------------------------------


async def search_topics(conn: Conn, viewer: Viewer, q: str, page: Page) -> list[asyncpg.Record]:
    """Topics whose name starts with q (an exact name first) that the viewer may see."""
    return await topic_pages.search(
        conn, viewer.community_id, viewer.id, viewer.is_external, q, page.offset, page.limit
    )


async def contributors(
    conn: Conn, viewer: Viewer, topic_id: int, page: Page
) -> list[asyncpg.Record]:
    """FULL rows of who wrote what uses the topic (and the viewer may read), most first."""
    return await topic_pages.contributors(
        conn, viewer.community_id, viewer.id, viewer.is_external, topic_id, page.offset,
        page.limit,
    )
