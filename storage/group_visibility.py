"""Who may see a group, and who may read what is posted in it: SQL predicates shared by every
query that touches groups or their content (groups, messages, search, streams, chat).

- Content of a group is readable by its members, and by every internal (non external
  contributor) user when the group is public. Archived groups stay readable.
- A group itself is listed where its content is readable, and also, to internal users, when it
  is private but accepts membership requests (its name and admins, not its content).
- External contributors see only the groups they belong to.

The functions return SQL text over a `groups` alias; `viewer` and `external` are the
placeholders ($n) of the viewer's id (bigint) and whether they are an external contributor
(boolean).
"""

from __future__ import annotations


def is_member_sql(alias: str, viewer: str) -> str:
    return (
        f"EXISTS (SELECT 1 FROM group_memberships gm_v "
        f"WHERE gm_v.group_id = {alias}.id AND gm_v.user_id = {viewer})"
    )


def readable_sql(alias: str, viewer: str, external: str) -> str:
    return (
        f"({is_member_sql(alias, viewer)} "
        f"OR (NOT {external} AND {alias}.permission = 'public'))"
    )


def listed_sql(alias: str, viewer: str, external: str) -> str:
    return (
        f"({readable_sql(alias, viewer, external)} "
        f"OR (NOT {external} AND {alias}.allow_access_request))"
    )
