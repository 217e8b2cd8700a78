"""Polls, their answers and one response per user (counts are computed from the responses)."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from storage.db import Conn

# A poll with its answers (json, in order, with response counts) and the viewer's ($2) answer.
COLUMNS = """
p.id, p.community_id, p.user_id, p.message_id, p.question, p.created_at,
(SELECT r.answer_id FROM poll_responses r WHERE r.poll_id = p.id AND r.user_id = $2)
    AS my_response_id,
coalesce((SELECT json_agg(json_build_object(
              'id', a.id, 'text', a.text,
              'response_count', (SELECT count(*) FROM poll_responses r WHERE r.answer_id = a.id))
              ORDER BY a.position, a.id)
          FROM poll_answers a WHERE a.poll_id = p.id), '[]'::json) AS answers
"""

INSERT = """
WITH poll AS (
    INSERT INTO polls (community_id, user_id, question) VALUES ($1, $2, $3) RETURNING id
), answers AS (
    INSERT INTO poll_answers (community_id, poll_id, position, text)
    SELECT $1, poll.id, a.position, a.text
    FROM poll, unnest($4::text[]) WITH ORDINALITY AS a(text, position)
)
SELECT id FROM poll
"""

BY_ID = f"SELECT {COLUMNS} FROM polls p WHERE p.community_id = $1 AND p.id = $3"
OF_MESSAGES = f"""
SELECT {COLUMNS} FROM polls p WHERE p.community_id = $1 AND p.message_id = ANY($3::bigint[])
"""

# The creator's ($2) poll ($3) that no message uses yet, locked until it is bound.
LOCK_UNBOUND = """
SELECT id FROM polls
WHERE community_id = $1 AND user_id = $2 AND id = $3 AND message_id IS NULL
FOR UPDATE
"""
BIND = "UPDATE polls SET message_id = $3 WHERE community_id = $1 AND id = $2"

# Answer ($4) poll ($2) as user ($3), or change the answer; nothing when the answer is not one
# of the poll's.
RESPOND = """
INSERT INTO poll_responses (community_id, poll_id, answer_id, user_id)
SELECT $1, a.poll_id, a.id, $3 FROM poll_answers a WHERE a.id = $4 AND a.poll_id = $2
ON CONFLICT (poll_id, user_id) DO UPDATE
    SET answer_id = EXCLUDED.answer_id, updated_at = now()
RETURNING id
"""


async def insert(
    conn: Conn, community_id: int, user_id: int, question: str, answers: Sequence[str]
) -> int:
    poll_id: int = await conn.fetchval(INSERT, community_id, user_id, question, list(answers))
    return poll_id


async def by_id(
    conn: Conn, community_id: int, viewer_id: int, poll_id: int
) -> asyncpg.Record | None:
    return await conn.fetchrow(BY_ID, community_id, viewer_id, poll_id)


async def of_messages(
    conn: Conn, community_id: int, viewer_id: int, message_ids: Sequence[int]
) -> list[asyncpg.Record]:
    return await conn.fetch(OF_MESSAGES, community_id, viewer_id, list(message_ids))


async def lock_unbound(
    conn: asyncpg.Connection, community_id: int, user_id: int, poll_id: int
) -> bool:
    return await conn.fetchval(LOCK_UNBOUND, community_id, user_id, poll_id) is not None


async def bind(conn: asyncpg.Connection, community_id: int, poll_id: int, message_id: int) -> None:
    await conn.execute(BIND, community_id, poll_id, message_id)


async def respond(
    conn: Conn, community_id: int, poll_id: int, user_id: int, answer_id: int
) -> bool:
    """True when recorded; False when the answer is not one of the poll's."""
    return await conn.fetchval(RESPOND, community_id, poll_id, user_id, answer_id) is not None
