"""Streams: each user's system streams (created on demand), group streams, and read state.

A stream's `last_activity` is the newest last_interacted_at among the messages it shows the
viewer (the same conditions as the message lists, storage.messages); `new_updates` is activity
after the viewer last read it (table stream_reads). Placeholders: `$1` community, `$2` viewer,
`$3` whether the viewer is an external contributor.
"""

from __future__ import annotations

import asyncpg

from storage.db import Conn
from storage.events import Statement
from storage.group_visibility import readable_sql
from storage.messages import GROUP_FOR_POSTING, HOME_GROUP_COUNT, STREAM_KINDS, latest_sql

SYSTEM_NAMES = {
    "home": "Home",
    "mentions": "@Mentions",
    "bookmarked": "Bookmarked",
    "sent": "Sent",
    "company": "Company",
}
# External contributors read no company-wide stream.
EXTERNAL_KINDS = ("home", "mentions", "bookmarked", "sent")

ENSURE_SYSTEM = """
INSERT INTO streams (community_id, kind, user_id, name)
SELECT $1, k.kind, $2, k.name FROM unnest($3::text[], $4::text[]) AS k(kind, name)
ON CONFLICT (user_id, kind) WHERE user_id IS NOT NULL AND kind <> 'custom' DO NOTHING
"""
# The stream of every group the viewer belongs to (normally made with the group).
ENSURE_GROUP_STREAMS = """
INSERT INTO streams (community_id, kind, group_id, name)
SELECT g.community_id, 'group', g.id, g.name
FROM groups g JOIN group_memberships gm ON gm.group_id = g.id AND gm.user_id = $2
WHERE g.community_id = $1
  AND NOT EXISTS (SELECT 1 FROM streams s WHERE s.group_id = g.id AND s.kind = 'group')
ON CONFLICT (group_id, kind) WHERE group_id IS NOT NULL DO NOTHING
"""


# Each stream's newest activity is read like its first page (storage.messages: the first row of
# each of its sources, through their indexes).
LAST_ACTIVITY = (
    "CASE s.kind "
    + " ".join(f"WHEN '{k}' THEN {latest_sql(stream=k)}" for k in STREAM_KINDS)
    + f" WHEN 'group' THEN {latest_sql(group='s.group_id')} END"
)

STREAM_COLUMNS = f"""
s.id, s.kind, s.group_id, s.user_id, s.name, rd.last_read_at, {LAST_ACTIVITY} AS last_activity
"""

# The viewer's system streams of kinds $4 (in that order), then the streams of the groups they
# belong to, by group name.
OF_VIEWER = f"""
SELECT {STREAM_COLUMNS}
FROM streams s
LEFT JOIN groups sg ON sg.id = s.group_id
LEFT JOIN stream_reads rd ON rd.stream_id = s.id AND rd.user_id = $2
WHERE s.community_id = $1
  AND ((s.user_id = $2 AND s.kind = ANY($4::text[]))
       OR (s.kind = 'group' AND EXISTS (SELECT 1 FROM group_memberships gm
                                        WHERE gm.group_id = s.group_id AND gm.user_id = $2)))
ORDER BY s.group_id IS NOT NULL, array_position($4::text[], s.kind), lower(sg.name), s.id
"""

# One stream the viewer may read: theirs (kinds $5) or the stream of a group they may read.
BY_ID = f"""
SELECT {STREAM_COLUMNS}
FROM streams s
LEFT JOIN groups sg ON sg.id = s.group_id
LEFT JOIN stream_reads rd ON rd.stream_id = s.id AND rd.user_id = $2
WHERE s.community_id = $1 AND s.id = $4
  AND ((s.user_id = $2 AND s.kind = ANY($5::text[]))
       OR (s.kind = 'group' AND {readable_sql("sg", "$2", "$3")}))
"""

# Marking read: each a statement that is a unit of work by itself (app.actions.work.write_one).
# The viewer's Home (made if missing) marked read, answering the viewer's count of groups
# (storage.messages.HOME_GROUP_COUNT): what the plan of the Home page read next depends on,
# without a statement of its own.
MARK_HOME_READ = f"""
WITH made AS (
    INSERT INTO streams (community_id, kind, user_id, name) VALUES ($1, 'home', $2, $3)
    ON CONFLICT (user_id, kind) WHERE user_id IS NOT NULL AND kind <> 'custom' DO NOTHING
    RETURNING id
), target AS (
    SELECT id FROM made
    UNION ALL SELECT s.id FROM streams s WHERE s.user_id = $2 AND s.kind = 'home'
), marked AS (
    INSERT INTO stream_reads (community_id, user_id, stream_id)
    SELECT $1, $2, id FROM target LIMIT 1
    ON CONFLICT (user_id, stream_id) DO UPDATE SET last_read_at = now()
)
{HOME_GROUP_COUNT.strip()}
"""
# BY_ID, the stream found marked read by the same statement (its row as found, last_read_at
# from before).
BY_ID_MARKING_READ = f"""
WITH found AS ({BY_ID.strip()}), marked AS (
    INSERT INTO stream_reads (community_id, user_id, stream_id) SELECT $1, $2, id FROM found
    ON CONFLICT (user_id, stream_id) DO UPDATE SET last_read_at = now()
)
SELECT * FROM found
"""
# storage.messages.GROUP_FOR_POSTING, the group's stream marked read by the same statement when
# the viewer may read the group.
GROUP_MARKING_READ = f"""
WITH found AS ({GROUP_FOR_POSTING.strip()}), marked AS (
    INSERT INTO stream_reads (community_id, user_id, stream_id)
    SELECT $1, $2, s.id FROM found JOIN streams s ON s.group_id = found.id AND s.kind = 'group'
    WHERE found.readable
    ON CONFLICT (user_id, stream_id) DO UPDATE SET last_read_at = now()
)
SELECT * FROM found
"""

IS_GROUP_MEMBER_ANYWHERE = """
SELECT EXISTS (SELECT 1 FROM group_memberships WHERE community_id = $1 AND user_id = $2)
"""


def kinds_for(external: bool) -> tuple[str, ...]:
    return EXTERNAL_KINDS if external else STREAM_KINDS


async def ensure(conn: Conn, community_id: int, viewer_id: int, external: bool) -> None:
    """Create the viewer's system streams and their groups' streams where missing."""
    kinds = kinds_for(external)
    await conn.execute(
        ENSURE_SYSTEM, community_id, viewer_id, list(kinds), [SYSTEM_NAMES[k] for k in kinds]
    )
    await conn.execute(ENSURE_GROUP_STREAMS, community_id, viewer_id)


async def of_viewer(
    conn: Conn, community_id: int, viewer_id: int, external: bool
) -> list[asyncpg.Record]:
    return await conn.fetch(
        OF_VIEWER, community_id, viewer_id, external, list(kinds_for(external))
    )


async def by_id(
    conn: Conn, community_id: int, viewer_id: int, external: bool, stream_id: int
) -> asyncpg.Record | None:
    return await conn.fetchrow(
        BY_ID, community_id, viewer_id, external, stream_id, list(kinds_for(external))
    )


def by_id_marking_read(
    community_id: int, viewer_id: int, external: bool, stream_id: int
) -> Statement:
    """`by_id`'s row (none: not a stream the viewer may read), the stream marked read."""
    return Statement(BY_ID_MARKING_READ, (community_id, viewer_id, external, stream_id,
                                          list(kinds_for(external))))


def group_marking_read(
    community_id: int, viewer_id: int, external: bool, group_id: int
) -> Statement:
    """storage.messages.group_for_posting's row (none: no such group), the group's stream
    marked read when the row is `readable`."""
    return Statement(GROUP_MARKING_READ, (community_id, viewer_id, external, group_id))


def marking_home_read(community_id: int, viewer_id: int) -> Statement:
    """Mark the viewer's Home read (made if missing). Its one row: the viewer's count of groups
    (what `storage.messages.list_page` takes as `home_groups`)."""
    return Statement(MARK_HOME_READ, (community_id, viewer_id, SYSTEM_NAMES["home"]))


async def belongs_to_a_group(conn: Conn, community_id: int, viewer_id: int) -> bool:
    return bool(await conn.fetchval(IS_GROUP_MEMBER_ANYWHERE, community_id, viewer_id))
