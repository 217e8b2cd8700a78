"""Polls: made first (POST /api/polls), then bound to one message of their creator with
message[poll_id]. Anyone who reads the message answers once; answering again moves the answer
(counts come from the responses, so concurrent answers never miscount). Nothing is answered in
an archived group (403). An unbound poll is seen by its creator only.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from app.access import access_message, access_poll, may_comment
from app.actions.work import work
from app.context import Viewer
from app.errors import Forbidden, Invalid, NotFound
from storage import polls as poll_storage
from storage.db import Conn

MAX_QUESTION = 500
MAX_ANSWER = 500
MAX_ANSWERS = 50


async def create_poll(
    pool: asyncpg.Pool, viewer: Viewer, question: str, answers: Sequence[str]
) -> int:
    question = question.strip()
    if not question:
        raise Invalid.field("poll[question]", "can't be blank")
    if len(question) > MAX_QUESTION:
        raise Invalid.field("poll[question]", f"is too long (maximum is {MAX_QUESTION})")
    texts = [a.strip() for a in answers if a.strip()]
    if len(texts) < 2:
        raise Invalid.field("poll[poll_answers_attributes]", "needs at least two answers")
    if len(texts) > MAX_ANSWERS:
        raise Invalid.field("poll[poll_answers_attributes]", f"has more than {MAX_ANSWERS}")
    if any(len(t) > MAX_ANSWER for t in texts):
        raise Invalid.field("poll[poll_answers_attributes]",
                            f"has an answer longer than {MAX_ANSWER}")
    async with work(pool, None, viewer.community_id) as w:
        return await poll_storage.insert(w.conn, viewer.community_id, viewer.id, question, texts)


async def respond(pool: asyncpg.Pool, viewer: Viewer, poll_id: int, answer_id: int) -> None:
    async with work(pool, None, viewer.community_id) as w:
        poll = await access_poll(w.conn, viewer, poll_id)
        if poll["message_id"] is not None:
            message = await access_message(w.conn, viewer, poll["message_id"])
            if not may_comment(viewer, message):
                raise Forbidden("This group is archived: its polls are closed")
        if not await poll_storage.respond(w.conn, viewer.community_id, poll_id, viewer.id,
                                          answer_id):
            raise Invalid.field("answer_id", "is not an answer of this poll")


async def poll_of_message(conn: Conn, viewer: Viewer, message_id: int) -> asyncpg.Record:
    await access_message(conn, viewer, message_id)
    rows = await poll_storage.of_messages(conn, viewer.community_id, viewer.id, [message_id])
    if not rows:
        raise NotFound("This message has no poll")
    return rows[0]
