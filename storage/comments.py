"""Comments on messages: rows, the page of one thread, and the last N of many threads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import asyncpg

from storage import topics
from storage.db import Conn
from storage.messages import Recipient, recipient_arrays
from storage.rows import CommentRow, LatestCommentRow, NewCommentRow

COLUMNS = """
c.id, c.community_id, c.message_id, c.user_id, c.text, c.html_body, c.external_resource_ids,
c.created_at, c.updated_at,
(SELECT count(*) FROM likes l WHERE l.comment_id = c.id)::int AS likes_count
"""

# A new comment in one statement: its message's last_interacted_at bumped (the thread rises in
# every stream), the comment, its recipients (as messages.add_recipients adds
# them) and its topics (upserted by name as topics.upsert does). The recipient and topic rows
# carry the bumped last_interacted_at themselves: within one statement, migration 0012's
# copying trigger would read the message's value from before it. Answers the comment's row as
# BY_ID reads it, plus `tag_names` (sorted as topics.OF_COMMENTS sorts); no row when the
# message is gone.
# $1 community, $2 message, $3 author, $4 text, $5 html, $6 external resource ids, $7-$10 the
# recipients' aligned arrays (messages.INSERT_RECIPIENTS' $4-$7), $11 topic names
# (topics.distinct_names).
INSERT = f"""
WITH touched AS (
    UPDATE messages SET last_interacted_at = now() WHERE community_id = $1 AND id = $2
    RETURNING id, last_interacted_at
), tp AS ({topics.upsert_sql("$1", "$11", "$3")}), c AS (
    INSERT INTO comments (community_id, message_id, user_id, text, html_body,
                          external_resource_ids)
    SELECT $1, touched.id, $3, $4, $5, $6 FROM touched
    RETURNING *
), r AS (
    INSERT INTO message_recipients (community_id, message_id, comment_id, user_id, group_id,
                                    reason, position, last_interacted_at)
    SELECT $1, c.message_id, c.id, r.user_id, r.group_id, r.reason, r.position,
           touched.last_interacted_at
    FROM c, touched, unnest($7::bigint[], $8::bigint[], $9::text[], $10::int[])
        AS r(user_id, group_id, reason, position)
    ON CONFLICT DO NOTHING
), t AS (
    INSERT INTO message_topics (community_id, message_id, comment_id, topic_id,
                                last_interacted_at)
    SELECT $1, c.message_id, c.id, tp.id, touched.last_interacted_at FROM c, touched, tp
    ON CONFLICT DO NOTHING
)
SELECT {COLUMNS}, ARRAY(SELECT tp.name FROM tp ORDER BY tp.name) AS tag_names FROM c
"""
UPDATE = """
UPDATE comments SET text = $3, html_body = $4, external_resource_ids = $5, updated_at = now()
WHERE community_id = $1 AND id = $2
"""
DELETE = "DELETE FROM comments WHERE community_id = $1 AND id = $2"

BY_ID = f"""
SELECT {COLUMNS} FROM comments c
WHERE c.community_id = $1 AND c.message_id = $2 AND c.id = $3
"""

# One thread, oldest first. $1 message, $2 offset, $3 limit.
OF_MESSAGE = f"""
SELECT {COLUMNS} FROM comments c
WHERE c.message_id = $1
ORDER BY c.created_at, c.id
OFFSET $2 LIMIT $3
"""

IDS_OF_MESSAGE = "SELECT id FROM comments WHERE message_id = $1 ORDER BY id"

# The $2 most recent comments of each message in $1, returned oldest first per message, with
# what three more queries would read (issue 13): whom each addresses (user and group ids,
# aligned, in messages.COMMENT_RECIPIENTS' order; NULL when none), its tags (by name, as
# topics.of_comments sorts them; NULL when none) and whether it has attachments. Set-based
# (each table read once for the page, as those queries did), not per comment.
LATEST_OF_MESSAGES = f"""
WITH c AS (
    SELECT c.* FROM unnest($1::bigint[]) AS mid(id)
    CROSS JOIN LATERAL (
        SELECT {COLUMNS} FROM comments c
        WHERE c.message_id = mid.id
        ORDER BY c.created_at DESC, c.id DESC
        LIMIT $2
    ) c
), r AS (
    SELECT r.comment_id, array_agg(r.user_id ORDER BY r.position, r.id) AS user_ids,
           array_agg(r.group_id ORDER BY r.position, r.id) AS group_ids
    FROM message_recipients r
    WHERE r.message_id = ANY($1::bigint[]) AND r.comment_id IN (SELECT id FROM c)
    GROUP BY r.comment_id
), t AS (
    SELECT mt.comment_id, array_agg(t.name ORDER BY t.name) AS names
    FROM message_topics mt JOIN topics t ON t.id = mt.topic_id
    WHERE mt.message_id = ANY($1::bigint[]) AND mt.comment_id IN (SELECT id FROM c)
    GROUP BY mt.comment_id
)
SELECT c.*, r.user_ids AS recipient_user_ids, r.group_ids AS recipient_group_ids,
       t.names AS tag_names,
       c.id IN (SELECT a.subject_id FROM attachments a
                WHERE a.subject_type = 'comment' AND a.subject_id IN (SELECT id FROM c))
           AS has_attachments
FROM c LEFT JOIN r ON r.comment_id = c.id LEFT JOIN t ON t.comment_id = c.id
ORDER BY c.message_id, c.created_at, c.id
"""


async def insert(
    conn: asyncpg.Connection,
    community_id: int,
    *,
    message_id: int,
    user_id: int,
    text: str,
    html_body: str,
    external_resource_ids: Sequence[int],
    recipients: Sequence[Recipient] = (),
    topic_names: Sequence[str] = (),
) -> NewCommentRow | None:
    """The new comment with its recipients and topics, its message bumped (INSERT); None when
    the message is gone."""
    return cast("NewCommentRow | None", await conn.fetchrow(
        INSERT, community_id, message_id, user_id, text, html_body, list(external_resource_ids),
        *recipient_arrays(recipients), topics.distinct_names(topic_names),
    ))


async def update(
    conn: asyncpg.Connection,
    community_id: int,
    comment_id: int,
    *,
    text: str,
    html_body: str,
    external_resource_ids: Sequence[int],
) -> None:
    await conn.execute(
        UPDATE, community_id, comment_id, text, html_body, list(external_resource_ids)
    )


async def delete(conn: asyncpg.Connection, community_id: int, comment_id: int) -> bool:
    return bool((await conn.execute(DELETE, community_id, comment_id)).endswith(" 1"))


async def by_id(
    conn: Conn, community_id: int, message_id: int, comment_id: int
) -> CommentRow | None:
    return cast(
        "CommentRow | None", await conn.fetchrow(BY_ID, community_id, message_id, comment_id)
    )


async def of_message(
    conn: Conn, message_id: int, offset: int, limit: int
) -> list[CommentRow]:
    return cast("list[CommentRow]", await conn.fetch(OF_MESSAGE, message_id, offset, limit))


async def ids_of_message(conn: Conn, message_id: int) -> list[int]:
    return [r["id"] for r in await conn.fetch(IDS_OF_MESSAGE, message_id)]


async def latest_of_messages(
    conn: Conn, message_ids: Sequence[int], limit: int
) -> list[LatestCommentRow]:
    return cast(
        "list[LatestCommentRow]", await conn.fetch(LATEST_OF_MESSAGES, list(message_ids), limit)
    )
