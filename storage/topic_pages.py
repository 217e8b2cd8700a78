"""Topic pages: the topics a viewer may see, with their counts, search and contributors.

storage/topics.py (the feed's) upserts topics from #tags; this module serves the topic
endpoints. A topic is visible to a viewer when it is `listed` (made through POST /api/topics)
or when at least one message whose thread uses it (body or comments) is readable by them.
Counts only count what the viewer may read. Placeholders: `$1` community, `$2` viewer,
`$3` whether the viewer is an external contributor.
"""

from __future__ import annotations

import asyncpg

from storage import messages as message_storage
from storage.db import Conn
from storage.users import FULL_FLAT, MANAGER_JOIN

_THREADS = f"""
FROM message_topics mt
JOIN messages m ON m.id = mt.message_id
LEFT JOIN groups g ON g.id = m.group_id
LEFT JOIN comments cm ON cm.id = mt.comment_id
WHERE mt.topic_id = t.id AND m.community_id = $1 AND {message_storage.READABLE}
"""

# Topic rows with what the viewer may see of them; a caller adds WHERE conditions on `t` and
# keeps `VISIBLE`.
SELECT = f"""
SELECT t.id, t.name, t.description, t.creator_id, t.listed, t.created_at, t.updated_at,
       s.messages_count, s.contributors_count
FROM topics t
CROSS JOIN LATERAL (
    SELECT count(DISTINCT mt.message_id)::int AS messages_count,
           count(DISTINCT coalesce(cm.user_id, m.user_id))::int AS contributors_count
    {_THREADS}
) s
"""
VISIBLE = "(t.listed OR s.messages_count > 0)"

# $4 id (NULL when looking up by name), $5 lower-case name, $6 whether an id match wins over
# a name match (`12`) or the other way round (`2024-plans` is a name before it is `2024-slug`)
BY_ID_OR_NAME = f"""
{SELECT}
WHERE t.community_id = $1 AND (t.id = $4 OR t.name = $5) AND {VISIBLE}
ORDER BY CASE WHEN $6 THEN coalesce(t.id = $4, false) ELSE t.name = $5 END DESC
LIMIT 1
"""
BY_NAME_ANY = """
SELECT id, name, listed, creator_id FROM topics WHERE community_id = $1 AND name = $2
"""

# $4 LIKE prefix, $5 the lower-case query, $6 offset, $7 limit: an exact name first
SEARCH = f"""
{SELECT}
WHERE t.community_id = $1 AND t.name LIKE $4 ESCAPE '\\' AND {VISIBLE}
ORDER BY (t.name = $5) DESC, t.name
OFFSET $6 LIMIT $7
"""

INSERT = """
INSERT INTO topics (community_id, name, description, creator_id, listed)
VALUES ($1, $2, $3, $4, true)
ON CONFLICT (community_id, name) DO NOTHING
RETURNING id
"""
# A topic that existed only through #tags the creator may not read becomes theirs and listed.
ADOPT = """
UPDATE topics SET listed = true, creator_id = $3, description = coalesce($4, description),
                  updated_at = now()
WHERE community_id = $1 AND id = $2
"""
UPDATE_DESCRIPTION = """
UPDATE topics SET description = $3, updated_at = now() WHERE community_id = $1 AND id = $2
"""

# Who contributed to topic $4 in what the viewer may read: the authors of the messages whose
# body uses it and of the comments that use it, most contributions first. FULL user rows.
# $5 offset, $6 limit.
CONTRIBUTORS = f"""
WITH c AS (
    SELECT coalesce(cm.user_id, m.user_id) AS user_id, count(*) AS n
    FROM message_topics mt
    JOIN messages m ON m.id = mt.message_id
    LEFT JOIN groups g ON g.id = m.group_id
    LEFT JOIN comments cm ON cm.id = mt.comment_id
    WHERE mt.topic_id = $4 AND m.community_id = $1 AND {message_storage.READABLE}
    GROUP BY 1
)
SELECT {FULL_FLAT} FROM c JOIN users u ON u.id = c.user_id {MANAGER_JOIN}
WHERE u.community_id = $1
ORDER BY c.n DESC, lower(u.first_name), lower(u.last_name), u.id
OFFSET $5 LIMIT $6
"""


def like_prefix(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


async def visible(
    conn: Conn, community_id: int, viewer_id: int, external: bool, topic_id: int | None,
    name: str,
) -> asyncpg.Record | None:
    return await conn.fetchrow(
        BY_ID_OR_NAME, community_id, viewer_id, external, topic_id, name.lower(),
        name.isdigit(),
    )


async def by_name_any(conn: Conn, community_id: int, name: str) -> asyncpg.Record | None:
    """The topic of that name whoever may see it (for creation only: never rendered)."""
    return await conn.fetchrow(BY_NAME_ANY, community_id, name)


async def search(
    conn: Conn, community_id: int, viewer_id: int, external: bool, q: str, offset: int,
    limit: int,
) -> list[asyncpg.Record]:
    return await conn.fetch(
        SEARCH, community_id, viewer_id, external, like_prefix(q), q.lower(), offset, limit
    )


async def insert(
    conn: asyncpg.Connection, community_id: int, name: str, description: str | None,
    creator_id: int,
) -> int | None:
    """The new topic's id; None when the name is taken."""
    value: int | None = await conn.fetchval(INSERT, community_id, name, description, creator_id)
    return value


async def adopt(
    conn: asyncpg.Connection, community_id: int, topic_id: int, creator_id: int,
    description: str | None,
) -> None:
    await conn.execute(ADOPT, community_id, topic_id, creator_id, description)


async def update_description(
    conn: asyncpg.Connection, community_id: int, topic_id: int, description: str | None
) -> None:
    await conn.execute(UPDATE_DESCRIPTION, community_id, topic_id, description)


async def contributors(
    conn: Conn, community_id: int, viewer_id: int, external: bool, topic_id: int,
    offset: int, limit: int,
) -> list[asyncpg.Record]:
    return await conn.fetch(
        CONTRIBUTORS, community_id, viewer_id, external, topic_id, offset, limit
    )
