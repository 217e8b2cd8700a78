"""Group memberships (group admins add, invite, promote, demote and remove members) and
membership requests (members-to-be ask; group admins approve or reject).

Community admins count as admins of every group. A group never loses its last admin, and an
archived group takes no new members.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from app.access import access_group, is_group_admin
from app.actions.group_events import membership_events
from app.actions.groups import keep_an_admin, lock_membership
from app.actions.users import EMAIL_RE
from app.actions.work import work
from app.context import Viewer
from app.errors import Conflict, Forbidden, Invalid, NotFound
from app.params import Page
from realtime.hub import Hub
from storage import groups, memberships, users
from storage.db import Conn

ROLES = ("member", "admin")
MAX_ADD = 500


@dataclass(frozen=True)
class NewMember:
    """One entry of add_members: a user id, or an e-mail address (maybe to invite)."""

    user_id: int | None = None
    email: str | None = None
    invite: bool = False
    role: str = "member"


@dataclass(frozen=True)
class Added:
    """What add_members made of one entry: a membership, or a pending invitation."""

    membership_id: int | None
    user_id: int | None
    role: str
    user_role: str | None
    invite: str | None = None


def _archived() -> Forbidden:
    return Forbidden("This group is archived: it takes no new members")


def _check_joinable(group: asyncpg.Record, user: asyncpg.Record, field: str) -> None:
    if user["state"] != "active":
        raise Invalid.field(field, "is not an active user")
    if user["role"] == "external_contributor" and group["permission"] != "external_contributor":
        raise Invalid.field(
            field, "is an external contributor, and this group does not admit external "
            "contributors",
        )


async def add_member(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, user_id: int, role: str,
    hub: Hub | None = None,
) -> asyncpg.Record:
    """Group admin adds one user; answers the member row (FULL user + membership)."""
    field = "group_membership[user_id]"
    async with work(pool, hub, viewer.community_id) as w:
        group = await access_group(w.conn, viewer, group_id, admin=True)
        if group["state"] != "active":
            raise _archived()
        user = await users.by_id(w.conn, viewer.community_id, user_id)
        if user is None:
            raise Invalid.field(field, "is not a user of this community")
        _check_joinable(group, user, field)
        if await memberships.by_user(w.conn, group_id, user_id) is not None:
            raise Conflict("That user is already a member of this group",
                           fields={field: ["is already a member"]})
        await memberships.insert(w.conn, viewer.community_id, group_id, user_id, role)
        await memberships.delete_requests_of(w.conn, group_id, [user_id])
        row = await memberships.member(w.conn, viewer.community_id, viewer.id, group_id, user_id)
        assert row is not None
        await membership_events(w, viewer, group_id, joined=[user_id],
                                         notify=[user_id])
    return row


async def add_members(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, entries: Sequence[NewMember],
    hub: Hub | None = None,
) -> list[Added]:
    """Group admin adds users by id or e-mail, and invites e-mail addresses of non-users.

    Members who already belong keep their role. Answers one Added per entry, in order. The
    whole list is refused (422, naming the entry) when one entry is invalid.
    """
    if not entries:
        raise Invalid.field("group_memberships", "can't be blank")
    if len(entries) > MAX_ADD:
        raise Invalid.field("group_memberships", f"is too long (maximum is {MAX_ADD})")
    for i, entry in enumerate(entries):
        if entry.user_id is None and not entry.email:
            raise Invalid.field(f"group_memberships[{i}][user_id]", "can't be blank")
        if entry.user_id is None and entry.email and not EMAIL_RE.match(entry.email.strip()):
            raise Invalid.field(f"group_memberships[{i}][email]", "is not a valid e-mail address")
    async with work(pool, hub, viewer.community_id) as w:
        group = await access_group(w.conn, viewer, group_id, admin=True)
        if group["state"] != "active":
            raise _archived()
        by_id = {
            u["id"]: u for u in await users.by_ids(
                w.conn, viewer.community_id, [e.user_id for e in entries if e.user_id is not None]
            )
        }
        by_email = {
            u["email"].lower(): u for u in await users.by_emails(
                w.conn, viewer.community_id,
                [e.email.strip() for e in entries if e.user_id is None and e.email],
            )
        }
        # each entry becomes a user id to add, or an e-mail address to invite
        targets: list[int | str] = []
        new_members: dict[int, str] = {}
        invitations: dict[str, tuple[str, str]] = {}
        for i, entry in enumerate(entries):
            if entry.user_id is not None:
                field = f"group_memberships[{i}][user_id]"
                user = by_id.get(entry.user_id)
                if user is None:
                    raise Invalid.field(field, "is not a user of this community")
            else:
                field = f"group_memberships[{i}][email]"
                address = (entry.email or "").strip()
                user = by_email.get(address.lower())
                if user is None:
                    if not entry.invite:
                        raise Invalid.field(
                            field, "is not a user of this community (send invite: true to "
                            "invite them)",
                        )
                    invitations.setdefault(address.lower(), (address, entry.role))
                    targets.append(address)
                    continue
            _check_joinable(group, user, field)
            new_members.setdefault(user["id"], entry.role)
            targets.append(user["id"])
        inserted = await memberships.insert_many(
            w.conn, viewer.community_id, group_id, list(new_members.items())
        )
        await memberships.delete_requests_of(w.conn, group_id, list(new_members))
        await memberships.invite_many(
            w.conn, viewer.community_id, group_id, list(invitations.values()), viewer.id or None
        )
        current = await memberships.by_users(w.conn, group_id, list(new_members))
        await membership_events(w, viewer, group_id, joined=inserted, notify=inserted)
    out: list[Added] = []
    for target in targets:
        if isinstance(target, str):
            out.append(Added(None, None, invitations[target.lower()][1], None, invite=target))
        else:
            m = current[target]
            out.append(Added(m["id"], m["user_id"], m["role"], m["user_role"]))
    return out


async def update_membership(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, membership_id: int, role: str
) -> asyncpg.Record:
    """Group admin changes a member's role; demoting the last admin is refused (422)."""
    async with work(pool, None, viewer.community_id) as w:
        current = await lock_membership(w.conn, viewer, group_id, membership_id=membership_id)
        if current is None:
            raise NotFound("Membership not found")
        await keep_an_admin(w.conn, group_id, current, "group_membership[role]", role)
        await memberships.set_role(w.conn, group_id, membership_id, role)
        row = await memberships.member(
            w.conn, viewer.community_id, viewer.id, group_id, current["user_id"]
        )
        assert row is not None
        return row


async def remove_member(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, user_id: int, hub: Hub | None = None
) -> None:
    """Group admin removes a member; removing the last admin is refused (422)."""
    async with work(pool, hub, viewer.community_id) as w:
        current = await lock_membership(w.conn, viewer, group_id, user_id=user_id)
        if current is None:
            raise NotFound("Membership not found")
        await keep_an_admin(w.conn, group_id, current, "user_id")
        await memberships.delete(w.conn, group_id, user_id)
        await membership_events(w, viewer, group_id, left=[user_id])


# --- membership requests -----------------------------------------------------------------


async def request_membership(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int
) -> asyncpg.Record:
    """Ask to join a private group that accepts requests; asking again changes nothing.
    Answers the request row (FULL user + request columns)."""
    async with work(pool, None, viewer.community_id) as w:
        group = await access_group(w.conn, viewer, group_id)
        if group["viewer_role"] is not None:
            raise Invalid("You are already a member of this group",
                          fields={"group_id": ["is a group you belong to"]})
        if group["state"] != "active":
            raise _archived()
        if group["permission"] == "public":
            raise Forbidden("This group is public: join it instead")
        if not group["allow_access_request"] or viewer.is_external:
            raise Forbidden("This group does not accept membership requests")
        await memberships.request(w.conn, viewer.community_id, group_id, viewer.id)
        row = await memberships.request_of(
            w.conn, viewer.community_id, viewer.id, group_id, viewer.id
        )
        assert row is not None
        return row


async def cancel_membership_request(pool: asyncpg.Pool, viewer: Viewer, group_id: int) -> None:
    """Withdraw your own pending request (404 when there is none)."""
    async with work(pool, None, viewer.community_id) as w:
        await access_group(w.conn, viewer, group_id)
        if not await memberships.cancel_request(w.conn, group_id, viewer.id):
            raise NotFound("No pending membership request")


async def approve_request(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, request_id: int, hub: Hub | None = None
) -> asyncpg.Record:
    """Group admin: the requester becomes a member; answers the member row."""
    async with work(pool, hub, viewer.community_id) as w:
        group = await access_group(w.conn, viewer, group_id, admin=True)
        request = await memberships.request_by_id(w.conn, group_id, request_id)
        if request is None:
            raise NotFound("Membership request not found")
        if group["state"] != "active":
            raise _archived()
        await memberships.insert(w.conn, viewer.community_id, group_id, request["user_id"],
                                 "member")
        await memberships.delete_request(w.conn, group_id, request_id)
        row = await memberships.member(
            w.conn, viewer.community_id, viewer.id, group_id, request["user_id"]
        )
        assert row is not None
        await membership_events(w, viewer, group_id, joined=[request["user_id"]],
                                notify=[request["user_id"]], approved=True)
    return row


async def reject_request(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, request_id: int
) -> None:
    """Group admin: the request is dropped."""
    async with work(pool, None, viewer.community_id) as w:
        await access_group(w.conn, viewer, group_id, admin=True)
        if not await memberships.delete_request(w.conn, group_id, request_id):
            raise NotFound("Membership request not found")


# --- reads -------------------------------------------------------------------------------


async def my_memberships(conn: Conn, viewer: Viewer, page: Page) -> list[asyncpg.Record]:
    """The viewer's groups, by name, with their role in each."""
    return await groups.of_viewer(conn, viewer.community_id, viewer.id, page.offset, page.limit)


async def list_members(
    conn: Conn, viewer: Viewer, group_ref: int | str, page: Page, *,
    admins_only: bool = False, admins_first: bool = False,
) -> list[asyncpg.Record]:
    """Members of a group (`group_ref`: an id or a groupname). Who its admins are is public to
    whoever sees the group; the other members only to those who may read it (and its admins)."""
    group = await access_group(conn, viewer, group_ref)
    if not admins_only and not (group["readable"] or is_group_admin(viewer, group)):
        raise Forbidden("Only members can list the members of this group")
    return await memberships.list_members(
        conn, viewer.community_id, viewer.id, group["id"], admins_only=admins_only,
        admins_first=admins_first, offset=page.offset, limit=page.limit,
    )


async def membership_requests(
    conn: Conn, viewer: Viewer, group_id: int, page: Page
) -> list[asyncpg.Record]:
    """Pending requests to join, oldest first: the group's admins only."""
    group = await access_group(conn, viewer, group_id, admin=True)
    return await memberships.list_requests(
        conn, viewer.community_id, viewer.id, group["id"], page.offset, page.limit
    )
