"""The queries behind GET /api/search/suggestions: one for users, one for groups.

Both take the community id as $1 and the viewer's id as $2, match word prefixes of `q` (a
tsquery text built by the caller; empty matches nothing), and return at most `limit` rows per
result set, so a request runs the same two statements whatever it matches.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from storage.db import Conn
from storage.group_visibility import is_member_sql, listed_sql, readable_sql
from storage.users import BASIC

# Users: $3 tsquery, $4 states, $5 excluded ids, $6 roles (NULL = any), $7 want the people the
# viewer follows as their own set, $8 want the entire company, $9 limit per set, $10 context
# group id (NULL = none), $11 whether the viewer is an external contributor, $12 users ranked
# first as well (the people of a context message).
# `category` is 'followed' or 'company'; when both sets are wanted a followed user is listed
# only under 'followed'. A context group the viewer may not read is ignored, so that ranking
# never tells who belongs to a group the viewer cannot see.
USERS = f"""
WITH ctx AS (
    SELECT g.id FROM groups g
    WHERE g.community_id = $1 AND g.id = $10 AND {readable_sql("g", "$2", "$11")}
), matched AS (
    SELECT {BASIC},
           EXISTS (SELECT 1 FROM follows f WHERE f.follower_id = $2 AND f.followed_id = u.id)
               AS followed,
           (u.id = ANY($12::bigint[])
            OR EXISTS (SELECT 1 FROM group_memberships m JOIN ctx ON ctx.id = m.group_id
                       WHERE m.user_id = u.id)) AS in_context
    FROM users u
    WHERE u.community_id = $1
      AND u.state = ANY($4::text[])
      AND NOT (u.id = ANY($5::bigint[]))
      AND ($6::text[] IS NULL OR u.role = ANY($6::text[]))
      AND $3 <> ''
      AND to_tsvector('simple', u.first_name || ' ' || u.last_name || ' ' || u.username
                      || ' ' || u.email) @@ to_tsquery('simple', $3)
), categorized AS (
    SELECT m.*,
           CASE WHEN $7 AND m.followed THEN 'followed' WHEN $8 THEN 'company' END AS category
    FROM matched m
), ranked AS (
    SELECT c.*,
           row_number() OVER (
               PARTITION BY c.category
               ORDER BY c.in_context DESC, lower(c.first_name), lower(c.last_name), c.id
           ) AS rank
    FROM categorized c
    WHERE c.category IS NOT NULL
)
SELECT * FROM ranked WHERE rank <= $9 ORDER BY category, rank
"""

# Groups the viewer may see listed: $3 whether the viewer is an external contributor,
# $4 tsquery over the name, $5 groupname prefix (LIKE-escaped), $6 'public' / 'private' / NULL,
# $7 excluded ids, $8 member only, $9 can post only, $10 exclude external-facing groups,
# $11 exclude provisioned groups, $12 limit, $13 whether the viewer is a community admin.
# The viewer's own groups come first.
#
# "Can post" follows the messages' rule (app/actions/messages.py): the group is active, its
# content readable by the viewer, who is a member (or a community admin), and posting is
# enabled (or they are an admin of the group, or a community admin).
# A provisioned group is one not made by hand: its group_type is anything but 'standard'
# (directory sync or membership rules).
GROUPS = f"""
SELECT g.id, g.name, g.groupname, g.permission, g.chat_enabled, g.post_enabled, g.avatar_id,
       g.state, {is_member_sql("g", "$2")} AS is_member
FROM groups g
WHERE g.community_id = $1
  AND {listed_sql("g", "$2", "$3")}
  AND (($4 <> '' AND to_tsvector('simple', g.name) @@ to_tsquery('simple', $4))
       OR lower(g.groupname) LIKE $5 ESCAPE '\\')
  AND ($6::text IS NULL OR (g.permission = 'public') = ($6 = 'public'))
  AND NOT (g.id = ANY($7::bigint[]))
  AND (NOT $8 OR {is_member_sql("g", "$2")})
  AND (NOT $9 OR (g.state = 'active' AND {readable_sql("g", "$2", "$3")}
                  AND ($13 OR {is_member_sql("g", "$2")})
                  AND (g.post_enabled OR $13 OR EXISTS (
                        SELECT 1 FROM group_memberships ga
                        WHERE ga.group_id = g.id AND ga.user_id = $2 AND ga.role = 'admin'))))
  AND (NOT $10 OR g.permission <> 'external_contributor')
  AND (NOT $11 OR g.group_type = 'standard')
ORDER BY is_member DESC, lower(g.name), g.id
LIMIT $12
"""


def like_prefix(text: str) -> str:
    """`text` as a lower-case LIKE prefix pattern, its wildcards escaped."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


async def users(
    conn: Conn,
    community_id: int,
    viewer_id: int,
    *,
    external: bool,
    tsquery: str,
    states: Sequence[str],
    exclude_ids: Sequence[int],
    roles: Sequence[str] | None,
    followed_set: bool,
    company_set: bool,
    limit: int,
    context_group_id: int | None,
    context_user_ids: Sequence[int] = (),
) -> list[asyncpg.Record]:
    """BASIC user rows plus `category` ('followed' or 'company'), ordered within each set."""
    return await conn.fetch(
        USERS, community_id, viewer_id, tsquery, list(states), list(exclude_ids),
        list(roles) if roles is not None else None, followed_set, company_set, limit,
        context_group_id, external, list(context_user_ids),
    )


async def groups(
    conn: Conn,
    community_id: int,
    viewer_id: int,
    *,
    external: bool,
    tsquery: str,
    groupname_prefix: str,
    visibility: str | None,
    exclude_ids: Sequence[int],
    member_only: bool,
    can_post_only: bool,
    exclude_external_facing: bool,
    exclude_provisioned: bool,
    limit: int,
    viewer_is_admin: bool,
) -> list[asyncpg.Record]:
    """Short group rows (the columns of the short group form) plus `is_member`."""
    return await conn.fetch(
        GROUPS, community_id, viewer_id, external, tsquery, like_prefix(groupname_prefix),
        visibility, list(exclude_ids), member_only, can_post_only, exclude_external_facing,
        exclude_provisioned, limit, viewer_is_admin,
    )
