"""Topics (hashtags) as far as messages need them: upsert by name, and the topics of messages.

Topic names are lower-case (`#Sales` and `#sales` are one topic).
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from storage.db import Conn


def upsert_sql(community: str, names: str, creator: str) -> str:
    """The topics of these names (created when new): `id, name`, over three SQL expressions."""
    return f"""
INSERT INTO topics AS t (community_id, name, creator_id)
SELECT {community}, n.name, {creator} FROM unnest({names}::text[]) AS n(name)
ON CONFLICT (community_id, name) DO UPDATE SET name = t.name
RETURNING id, name
"""


UPSERT = upsert_sql("$1", "$2", "$3")

# Topics used in a message body (comment_id NULL) or in a comment.
ADD_TO_MESSAGE = """
INSERT INTO message_topics (community_id, message_id, comment_id, topic_id)
SELECT $1, $2, $3, t.id FROM unnest($4::bigint[]) AS t(id)
ON CONFLICT DO NOTHING
"""
CLEAR_MESSAGE = "DELETE FROM message_topics WHERE message_id = $1 AND comment_id IS NULL"
CLEAR_COMMENT = "DELETE FROM message_topics WHERE comment_id = $1"

# Body topics of many messages, by name.
OF_MESSAGES = """
SELECT mt.message_id, t.name FROM message_topics mt JOIN topics t ON t.id = mt.topic_id
WHERE mt.message_id = ANY($1::bigint[]) AND mt.comment_id IS NULL
ORDER BY mt.message_id, t.name
"""
# Topics of these comments ($2) of these messages ($1), by name.
OF_COMMENTS = """
SELECT mt.comment_id, t.name FROM message_topics mt JOIN topics t ON t.id = mt.topic_id
WHERE mt.message_id = ANY($1::bigint[]) AND mt.comment_id = ANY($2::bigint[])
ORDER BY mt.comment_id, t.name
"""


def normalize(name: str) -> str:
    return name.strip().lstrip("#").lower()


def distinct_names(names: Sequence[str]) -> list[str]:
    """The topic names of these hashtags, normalized, each once, in order."""
    return list(dict.fromkeys(n for n in (normalize(x) for x in names) if n))


async def upsert(
    conn: asyncpg.Connection, community_id: int, names: Sequence[str], creator_id: int | None
) -> list[int]:
    """Ids of these topics (created when new), in the names' order."""
    distinct = distinct_names(names)
    if not distinct:
        return []
    rows = await conn.fetch(UPSERT, community_id, distinct, creator_id)
    ids = {r["name"]: r["id"] for r in rows}
    return [ids[n] for n in distinct]


async def set_message_topics(
    conn: asyncpg.Connection,
    community_id: int,
    message_id: int,
    topic_ids: Sequence[int],
    comment_id: int | None = None,
) -> None:
    """Replace the topics of the message body (or of one comment)."""
    if comment_id is None:
        await conn.execute(CLEAR_MESSAGE, message_id)
    else:
        await conn.execute(CLEAR_COMMENT, comment_id)
    if topic_ids:
        await conn.execute(ADD_TO_MESSAGE, community_id, message_id, comment_id, list(topic_ids))


async def of_messages(conn: Conn, message_ids: Sequence[int]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for row in await conn.fetch(OF_MESSAGES, list(message_ids)):
        out.setdefault(row["message_id"], []).append(row["name"])
    return out


async def of_comments(
    conn: Conn, message_ids: Sequence[int], comment_ids: Sequence[int]
) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    if not comment_ids:
        return out
    for row in await conn.fetch(OF_COMMENTS, list(set(message_ids)), list(comment_ids)):
        out.setdefault(row["comment_id"], []).append(row["name"])
    return out
