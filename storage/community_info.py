"""The figures of GET /api/community_info, in one query."""

from __future__ import annotations

import asyncpg

from storage.db import Conn
from storage.group_visibility import listed_sql

# $1 community, $2 viewer id, $3 whether the viewer is an external contributor.
# group_count counts only the groups the viewer may see listed.
INFO = f"""
SELECT c.id, c.name, c.domain, c.base_url, c.created_at,
       (SELECT count(*) FROM users u
        WHERE u.community_id = c.id AND u.state = 'active')::int AS member_count,
       (SELECT count(*) FROM groups g
        WHERE g.community_id = c.id AND {listed_sql("g", "$2", "$3")})::int AS group_count,
       (SELECT count(*) FROM badges b WHERE b.community_id = c.id)::int AS badge_count
FROM communities c WHERE c.id = $1
"""


async def info(
    conn: Conn, community_id: int, viewer_id: int, external: bool
) -> asyncpg.Record | None:
    return await conn.fetchrow(INFO, community_id, viewer_id, external)
