"""Content versions: what the ETags of polled lists are made of (migration 0020, docs/polling.md).

`content_versions` holds per community a row for its content (user_id = COMMUNITY, 0) and a row
per user for what only that user sees. Units of work bump them inside their COMMIT (the
`versions` of `storage.events.stage_events`); `bump` is for writes made outside one (the
command line, the demo seed), whose row lock then lasts until their commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from storage.db import Conn

COMMUNITY = 0
"""The user_id of the community's content row."""

# Both rows in one index probe each; a missing row is version 0. With $3, also the latest
# moment an announcement stopped being sticky (messages_announcement_idx): a message list
# changes then, with no write (storage/messages.py: `sticky_until > now()`).
READ_VERSIONS = """
SELECT coalesce(max(version) FILTER (WHERE user_id = 0), 0) AS community,
       coalesce(max(version) FILTER (WHERE user_id = $2), 0) AS viewer,
       CASE WHEN $3 THEN (
           SELECT max(m.sticky_until) FROM messages m
           WHERE m.community_id = $1 AND m.is_announcement AND m.sticky_until <= now()
       ) END AS sticky_ended
FROM content_versions WHERE community_id = $1 AND user_id IN (0, $2)
"""

# The same three values as columns of a query over `users u` (the authentication's: a polled
# list's validator then costs no query of its own). NULL versions are 0.
OF_USER = """
(SELECT v.version FROM content_versions v
 WHERE v.community_id = u.community_id AND v.user_id = 0) AS content_version,
(SELECT v.version FROM content_versions v
 WHERE v.community_id = u.community_id AND v.user_id = u.id) AS own_version,
(SELECT max(m.sticky_until) FROM messages m
 WHERE m.community_id = u.community_id AND m.is_announcement AND m.sticky_until <= now()
) AS sticky_ended
"""

# bump_content_versions: migration 0020 (the commit trigger calls it too)
BUMP = "SELECT bump_content_versions($1, $2::bigint[])"
# Every community's content row (what a command that rewrote rows of any community ends with).
BUMP_ALL = "SELECT bump_content_versions(id, '{0}') FROM communities ORDER BY id"


async def read(
    conn: Conn, community_id: int, user_id: int, sticky: bool
) -> tuple[int, int, datetime | None]:
    """(community version, user's version, end of the latest sticky period when `sticky`)."""
    row = await conn.fetchrow(READ_VERSIONS, community_id, user_id, sticky)
    assert row is not None  # an aggregate always answers one row
    return row[0], row[1], row[2]


def of_user(row: Mapping[str, Any]) -> tuple[int, int, datetime | None]:
    """`read`'s answer from a row that selected OF_USER."""
    return row["content_version"] or 0, row["own_version"] or 0, row["sticky_ended"]


async def bump(conn: Conn, community_id: int, user_ids: Iterable[int] = (COMMUNITY,)) -> None:
    """Bump the community's content version (COMMUNITY) and/or users' versions now, in the
    caller's transaction: for writes that do not go through a unit of work."""
    await conn.execute(BUMP, community_id, list(user_ids))


async def bump_all(conn: Conn) -> None:
    """Bump every community's content version (after a command that rewrote rows of many)."""
    await conn.execute(BUMP_ALL)
