"""Groups: create, update, archive, destroy, join, leave, pin; and the group list filters.

Each action returns the group's FULL row (storage.groups) as it is after the change, read in
the same transaction, ready for app.render.groups.full_group.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import asyncpg

from app.access import access_group
from app.actions.group_events import membership_events
from app.actions.work import work
from app.context import Viewer
from app.errors import Conflict, Forbidden, Invalid
from app.params import Page
from realtime.hub import Hub
from storage import groups, memberships
from storage.db import Conn

PERMISSIONS = ("public", "private", "external_contributor")
GROUPNAME_MAX = 60
_GROUPNAME_DROP = re.compile(r"[^A-Za-z0-9_-]")
_WORD = re.compile(r"\w+")


@dataclass
class GroupFields:
    """Validated group parameters; None means "not given"."""

    name: str | None = None
    description: str | None = None
    permission: str | None = None
    allow_access_request: bool | None = None
    chat_enabled: bool | None = None


def name_tsquery(q: str) -> str | None:
    """Word-prefix tsquery text for a group name search (every word, ANDed); None if no word."""
    words = _WORD.findall(q.lower().replace("_", " "))
    return " & ".join(f"'{w}':*" for w in words) or None


def groupname_for(name: str) -> str:
    """`Monkey Puzzle` -> `MonkeyPuzzle`, `Café crew` -> `Cafecrew` (ASCII, mentionable)."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return _GROUPNAME_DROP.sub("", ascii_name)[:GROUPNAME_MAX] or "group"


def _name_conflict() -> Conflict:
    return Conflict("Name has already been taken",
                    fields={"group[name]": ["has already been taken"]})


def _checked_name(name: str) -> str:
    name = " ".join(name.split())
    if not name:
        raise Invalid.field("group[name]", "can't be blank")
    return name


def _archived() -> Forbidden:
    return Forbidden("This group is archived")


async def _reload(conn: asyncpg.Connection, viewer: Viewer, group_id: int) -> asyncpg.Record:
    row = await groups.by_id(conn, viewer.community_id, viewer.id, viewer.is_external, group_id)
    assert row is not None
    return row


async def create_group(
    pool: asyncpg.Pool, viewer: Viewer, fields: GroupFields, hub: Hub | None = None
) -> asyncpg.Record:
    """The creator becomes the group's admin; the group gets its stream (and chat stream)."""
    if viewer.is_external:
        raise Forbidden("External contributors can't create groups")
    if fields.name is None:
        raise Invalid.field("group[name]", "can't be blank")
    name = _checked_name(fields.name)
    try:
        async with work(pool, hub, viewer.community_id) as w:
            if await groups.name_taken(w.conn, viewer.community_id, name):
                raise _name_conflict()
            groupname = await groups.free_groupname(
                w.conn, viewer.community_id, groupname_for(name)
            )
            group_id = await groups.insert(
                w.conn, viewer.community_id, name=name, groupname=groupname,
                description=fields.description or None,
                permission=fields.permission or "public",
                allow_access_request=bool(fields.allow_access_request),
                chat_enabled=bool(fields.chat_enabled),
                creator_id=viewer.id or None,
            )
            if viewer.id:
                await memberships.insert(w.conn, viewer.community_id, group_id, viewer.id, "admin")
            row = await _reload(w.conn, viewer, group_id)
            await membership_events(w, viewer, group_id, joined=[viewer.id] if viewer.id else [])
    except asyncpg.UniqueViolationError:
        raise _name_conflict() from None
    return row


async def update_group(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, fields: GroupFields
) -> asyncpg.Record:
    """Group admin. The groupname (mentions, URLs) stays as it was made."""
    changes: dict[str, object] = {}
    if fields.name is not None:
        changes["name"] = _checked_name(fields.name)
    if fields.description is not None:
        changes["description"] = fields.description or None
    if fields.permission is not None:
        changes["permission"] = fields.permission
    if fields.allow_access_request is not None:
        changes["allow_access_request"] = fields.allow_access_request
    if fields.chat_enabled is not None:
        changes["chat_enabled"] = fields.chat_enabled
    try:
        async with work(pool, None, viewer.community_id) as w:
            group = await access_group(w.conn, viewer, group_id, admin=True)
            name = changes.get("name")
            if isinstance(name, str) and name != group["name"]:
                if await groups.name_taken(w.conn, viewer.community_id, name, group_id):
                    raise _name_conflict()
                await groups.rename_streams(w.conn, viewer.community_id, group_id, name)
            if (
                changes.get("permission", "external_contributor") != "external_contributor"
                and group["permission"] == "external_contributor"
                and await memberships.has_external_members(w.conn, group_id)
            ):
                raise Invalid.field(
                    "group[permission_mode]", "must stay external_contributor while external "
                    "contributors are members",
                )
            await groups.update(w.conn, viewer.community_id, group_id, changes)
            if changes.get("chat_enabled"):
                await groups.ensure_stream(
                    w.conn, viewer.community_id, group_id, "group_chat",
                    str(changes.get("name", group["name"])),
                )
            return await _reload(w.conn, viewer, group_id)
    except asyncpg.UniqueViolationError:
        raise _name_conflict() from None


async def delete_group(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, hub: Hub | None = None
) -> None:
    """Group admin or community admin; memberships, requests, streams and pins go with it."""
    async with work(pool, hub, viewer.community_id) as w:
        await access_group(w.conn, viewer, group_id, admin=True)
        members = await memberships.user_ids(w.conn, group_id)
        await groups.delete(w.conn, viewer.community_id, group_id)
        await membership_events(w, viewer, group_id, left=members)


async def archive_group(pool: asyncpg.Pool, viewer: Viewer, group_id: int) -> asyncpg.Record:
    """Group admin: state `archived` (readable; joining and posting are refused)."""
    async with work(pool, None, viewer.community_id) as w:
        await access_group(w.conn, viewer, group_id, admin=True)
        await groups.archive(w.conn, viewer.community_id, group_id)
        return await _reload(w.conn, viewer, group_id)


async def join_group(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, hub: Hub | None = None
) -> asyncpg.Record:
    """Join a public, active group; joining one you belong to changes nothing."""
    async with work(pool, hub, viewer.community_id) as w:
        group = await access_group(w.conn, viewer, group_id)
        if group["viewer_role"] is not None:
            return group
        if group["state"] != "active":
            raise _archived()
        if group["permission"] != "public" or viewer.is_external:
            raise Forbidden("This group is private: ask to join it with a membership request")
        await memberships.insert(w.conn, viewer.community_id, group_id, viewer.id, "member")
        await memberships.delete_requests_of(w.conn, group_id, [viewer.id])
        row = await _reload(w.conn, viewer, group_id)
        await membership_events(w, viewer, group_id, joined=[viewer.id])
    return row


async def lock_membership(
    conn: asyncpg.Connection, viewer: Viewer, group_id: int, *, user_id: int | None = None,
    membership_id: int | None = None, admin: bool = True,
) -> asyncpg.Record | None:
    """Before taking a membership away or demoting it: check the viewer's access to the group
    (as its admin unless admin=False), lock the group (changes of its admins go one at a time)
    and read the membership, by user or by id, as it is under the lock (None: there is none)."""
    await access_group(conn, viewer, group_id, admin=admin)
    await groups.lock(conn, viewer.community_id, group_id)
    if membership_id is not None:
        return await memberships.by_id(conn, group_id, membership_id)
    assert user_id is not None
    return await memberships.by_user(conn, group_id, user_id)


async def keep_an_admin(
    conn: asyncpg.Connection, group_id: int, current: asyncpg.Record, field: str,
    new_role: str | None = None,
) -> None:
    """Refuse to take away the last admin of a group: `current` (from lock_membership) leaves
    or, with `new_role`, gets that role."""
    if current["role"] != "admin" or new_role == "admin":
        return
    if await memberships.admin_count(conn, group_id) <= 1:
        raise Invalid("A group must keep at least one admin",
                      fields={field: ["is the last admin of the group"]})


async def leave_group(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, hub: Hub | None = None
) -> asyncpg.Record:
    """Leave a group you belong to, unless you are its last admin (422)."""
    async with work(pool, hub, viewer.community_id) as w:
        current = await lock_membership(w.conn, viewer, group_id, user_id=viewer.id,
                                        admin=False)
        if current is None:
            raise Invalid("You are not a member of this group",
                          fields={"group_id": ["is not a group you belong to"]})
        await keep_an_admin(w.conn, group_id, current, "group_id")
        await memberships.delete(w.conn, group_id, viewer.id)
        row = await _reload(w.conn, viewer, group_id)
        await membership_events(w, viewer, group_id, left=[viewer.id])
    return row


async def pin_group(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, pinned: bool
) -> asyncpg.Record:
    """Pin (or unpin) a group the viewer can see; both are idempotent."""
    async with work(pool, None, viewer.community_id) as w:
        group = await access_group(w.conn, viewer, group_id)
        if pinned:
            await groups.pin(w.conn, viewer.id, group_id)
        else:
            await groups.unpin(w.conn, viewer.id, group_id)
        return group


# --- reads -------------------------------------------------------------------------------


async def list_groups(
    conn: Conn,
    viewer: Viewer,
    page: Page,
    *,
    include_requestable: bool = False,
    can_join_only: bool = False,
    can_request_only: bool = False,
    tsquery: str | None = None,
    member_ids: list[int] | tuple[int, ...] = (),
) -> list[asyncpg.Record]:
    """Groups the viewer may read (or also see, with `include_requestable`), by name."""
    return await groups.list_groups(
        conn, viewer.community_id, viewer.id, viewer.is_external,
        include_requestable=include_requestable, can_join_only=can_join_only,
        can_request_only=can_request_only, tsquery=tsquery, member_ids=member_ids,
        offset=page.offset, limit=page.limit,
    )


async def pinned_groups(conn: Conn, viewer: Viewer, page: Page) -> list[asyncpg.Record]:
    return await groups.pinned(
        conn, viewer.community_id, viewer.id, viewer.is_external, page.offset, page.limit
    )
