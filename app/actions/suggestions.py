"""Autocomplete suggestions (GET /api/suggestions): users and groups ranked by
storage/suggestions.py, and the context (a group, a message) that ranks some of them first."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from app.context import Viewer
from storage import messages as message_storage
from storage import suggestions
from storage.db import Conn


async def context_of(
    conn: Conn, viewer: Viewer, context_type: str | None, context_id: int | None
) -> tuple[int | None, list[int]]:
    """(group whose members rank first, users who rank first) of the request's context."""
    if context_id is None:
        return None, []
    if context_type == "group":
        return context_id, []  # the users query ignores a group the viewer can't read
    if context_type == "message":
        row = await message_storage.by_id(
            conn, viewer.community_id, viewer.id, viewer.is_external, context_id
        )
        if row is not None and row["readable"]:
            return row["group_id"], [row["user_id"]]
    return None, []


async def suggest_users(
    conn: Conn, viewer: Viewer, *, tsquery: str, states: Sequence[str],
    exclude_ids: Sequence[int], roles: Sequence[str] | None, followed_set: bool,
    company_set: bool, limit: int, context_group_id: int | None,
    context_user_ids: Sequence[int] = (),
) -> list[asyncpg.Record]:
    return await suggestions.users(
        conn, viewer.community_id, viewer.id, external=viewer.is_external, tsquery=tsquery,
        states=states, exclude_ids=exclude_ids, roles=roles, followed_set=followed_set,
        company_set=company_set, limit=limit, context_group_id=context_group_id,
        context_user_ids=context_user_ids,
    )


async def suggest_groups(
    conn: Conn, viewer: Viewer, *, tsquery: str, groupname_prefix: str, visibility: str | None,
    exclude_ids: Sequence[int], member_only: bool, can_post_only: bool,
    exclude_external_facing: bool, exclude_provisioned: bool, limit: int,
) -> list[asyncpg.Record]:
    return await suggestions.groups(
        conn, viewer.community_id, viewer.id, external=viewer.is_external, tsquery=tsquery,
        groupname_prefix=groupname_prefix, visibility=visibility, exclude_ids=exclude_ids,
        member_only=member_only, can_post_only=can_post_only,
        exclude_external_facing=exclude_external_facing,
        exclude_provisioned=exclude_provisioned, limit=limit, viewer_is_admin=viewer.is_admin,
    )
