"""Conversations: creating (or reusing by member set), renaming, members joining and leaving,
read state and hiding; rendering pages of them in a fixed number of queries.

Rules (decisions, see also docs/conversations.md):
- Members are named by e-mail, resolved in the viewer's community only; an unknown or
  deactivated address is a 422 naming it. The creator is always a member.
- `private` always follows the membership: true exactly when the conversation has two
  members (decisions.md). Adding members to a one-to-one conversation makes it shared, and the
  newcomers see its activities only from their joining on; leaving a shared one down to two
  makes it private. Leaving a one-to-one conversation is a 422 (hide it instead).
- The same member set reuses the most recently active conversation that holds it, however it
  came to (storage/conversations.py member_set_key); its name is then left as it is, and the
  remark, if any, is appended.
- Hide and unhide apply to one-to-one conversations only (422 on a shared one); a new remark
  unhides a conversation for every member who hid it.
- Events are appended as the last statements of the transaction and published after commit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import asyncpg

from app.access import access_conversation
from app.actions.notifications import badge_changed
from app.actions.remarks import (
    Remark,
    Uploads,
    check_remark,
    post_in_transaction,
    render_activities,
    store_uploads,
)
from app.actions.work import work
from app.context import Viewer
from app.errors import Invalid, NotFound
from app.params import Page
from app.render.conversations import conversation, conversation_summary
from app.render.users import conversation_member
from realtime.channels import conversation_channel
from realtime.events import NewEvent, control_event
from realtime.hub import Hub
from storage import activities, conversations, users
from storage.db import Conn

MAX_NAME = 255
MAX_MEMBERS = 500
_EMAIL_SPLIT = re.compile(r"[\s,;]+")


def split_emails(raw: str | None) -> list[str]:
    """Space-separated addresses (commas and semicolons tolerated), deduplicated in order."""
    seen: dict[str, str] = {}
    for email in _EMAIL_SPLIT.split(raw or ""):
        if email:
            seen.setdefault(email.lower(), email)
    return list(seen.values())


async def resolve_members(
    conn: asyncpg.Connection, viewer: Viewer, emails: Sequence[str], param: str
) -> list[asyncpg.Record]:
    """Active users of the viewer's community with these e-mails; any other address is a 422."""
    if not emails:
        raise Invalid.field(param, "can't be blank")
    if len(emails) > MAX_MEMBERS:
        raise Invalid.field(param, f"names too many members (maximum is {MAX_MEMBERS})")
    rows = await users.by_emails(conn, viewer.community_id, emails)
    found = {r["email"].lower(): r for r in rows if r["state"] == "active"}
    unknown = [e for e in emails if e.lower() not in found]
    if unknown:
        raise Invalid(
            f"No active user with the e-mail address {', '.join(unknown)}",
            fields={param: [f"has unknown e-mail address {e}" for e in unknown]},
        )
    return [found[e.lower()] for e in emails]


def _clean_name(name: str | None) -> str | None:
    if name is None:
        return None
    name = name.strip()
    if len(name) > MAX_NAME:
        raise Invalid.field("conversation[name]",
                            f"is too long (maximum is {MAX_NAME} characters)")
    return name or None


async def render_conversations(
    conn: asyncpg.Connection | asyncpg.Pool,
    viewer: Viewer,
    rows: Sequence[asyncpg.Record],
    base: str,
) -> list[dict[str, Any]]:
    """Conversations (MEMBER_VIEW rows) for the viewer, with members and latest activities:
    the same number of queries for any page."""
    members = await conversations.members_of(conn, [r["id"] for r in rows])
    latest_ids = [r["latest_activity_id"] for r in rows if r["latest_activity_id"] is not None]
    latest_rows = await activities.by_ids(conn, latest_ids)
    ordered = [latest_rows[i] for i in latest_ids if i in latest_rows]
    rendered = {a["id"]: a for a in await render_activities(conn, viewer, ordered, base)}
    return [
        conversation(
            r, base, viewer_id=viewer.id, members=members[r["id"]],
            latest_activity=rendered.get(r["latest_activity_id"]),
        )
        for r in rows
    ]


async def render_one(
    conn: asyncpg.Connection | asyncpg.Pool, viewer: Viewer, conversation_id: int, base: str
) -> dict[str, Any]:
    row = await access_conversation(conn, viewer, conversation_id)
    return (await render_conversations(conn, viewer, [row], base))[0]


async def _summary_event(
    conn: asyncpg.Connection, viewer: Viewer, conversation_id: int, name: str, base: str
) -> NewEvent:
    row = await conversations.by_id(conn, viewer.community_id, conversation_id)
    assert row is not None
    members = (await conversations.members_of(conn, [conversation_id]))[conversation_id]
    return NewEvent(conversation_channel(conversation_id), name,
                    conversation_summary(row, base, members))


async def _rekey(conn: asyncpg.Connection, conversation_id: int) -> None:
    """After the members changed: the member-set key, and `private` from their number."""
    ids = await conversations.member_ids(conn, conversation_id)
    private = len(ids) == 2
    key = conversations.member_set_key(private, ids) if ids else None
    await conversations.set_member_set(conn, conversation_id, key, private)


async def create_conversation(
    pool: asyncpg.Pool,
    hub: Hub,
    viewer: Viewer,
    base: str,
    *,
    members_emails: str | None,
    name: str | None,
    remark: Remark | None,
    uploads: Uploads | None = None,
) -> int:
    """POST /api/conversations: the id of the new or reused conversation."""
    emails = split_emails(members_emails)
    name = _clean_name(name)
    if remark is not None and remark.empty:
        remark = None  # an empty remark[text] is no remark
    if remark is not None:
        check_remark(remark)
        uploaded = await store_uploads(pool, uploads, viewer, remark.files)
        remark.attachment_ids = [*remark.attachment_ids, *uploaded]
    async with work(pool, hub, viewer.community_id) as w:
        found = await resolve_members(w.conn, viewer, emails, "conversation[members_emails]")
        member_ids = sorted({viewer.id, *(r["id"] for r in found)})
        if len(member_ids) < 2:
            raise Invalid.field("conversation[members_emails]",
                                "must name at least one other member")
        private = len(member_ids) == 2
        key = conversations.member_set_key(private, member_ids)
        # two requests for one new member set must not both create it
        await conversations.lock_member_set(w.conn, key)
        existing = await conversations.by_member_set_key(w.conn, viewer.community_id, key)
        created = None
        if existing is None:
            created = await conversations.insert(
                w.conn, viewer.community_id, name=name, private=private, key=key,
                creator_id=viewer.id,
            )
        if created is not None:
            conversation_id = int(created["id"])
            await conversations.add_members(w.conn, viewer.community_id, conversation_id,
                                            member_ids)
            # subscribe the members first, so that their sockets get what follows
            w.emit(*(
                control_event(uid, subscribe=[conversation_channel(conversation_id)])
                for uid in member_ids
            ))
            w.emit(
                await _summary_event(w.conn, viewer, conversation_id, "conversation.updated", base)
            )
        else:
            assert existing is not None
            conversation_id = int(existing["id"])
            # starting it again brings a conversation the viewer had hidden back
            await conversations.set_hidden(w.conn, conversation_id, viewer.id, False)
        if remark is not None:
            await post_in_transaction(w, viewer, conversation_id, remark, base)
    return conversation_id


async def rename_conversation(
    pool: asyncpg.Pool, hub: Hub, viewer: Viewer, conversation_id: int, name: str | None,
    base: str,
) -> None:
    """PUT /api/conversations/:id: conversation[name] (blank clears it; absent changes nothing)."""
    if name is None:
        await access_conversation(pool, viewer, conversation_id)
        return
    new_name = _clean_name(name)
    async with work(pool, hub, viewer.community_id) as w:
        row = await access_conversation(w.conn, viewer, conversation_id, lock=True)
        if row["name"] == new_name:
            return
        await conversations.rename(w.conn, conversation_id, new_name)
        await activities.insert(
            w.conn, viewer.community_id, conversation_id, viewer.id, "update", text=new_name
        )
        w.emit(await _summary_event(w.conn, viewer, conversation_id, "conversation.updated", base))


async def add_members(
    pool: asyncpg.Pool, hub: Hub, viewer: Viewer, conversation_id: int,
    members_emails: str | None, base: str,
) -> list[dict[str, Any]]:
    """POST /api/conversations/:id/members: every current member afterwards (compact)."""
    emails = split_emails(members_emails)
    async with work(pool, hub, viewer.community_id) as w:
        row = await access_conversation(w.conn, viewer, conversation_id, lock=True)
        found = await resolve_members(w.conn, viewer, emails, "members_emails")
        current = set(await conversations.member_ids(w.conn, conversation_id))
        if row["private"] and {r["id"] for r in found} - current:
            # it becomes shared: what the two said so far stays theirs
            await conversations.close_private_history(w.conn, conversation_id)
        added = await conversations.add_members(
            w.conn, viewer.community_id, conversation_id, [r["id"] for r in found]
        )
        if added:
            by_id = {r["id"]: r for r in found}
            for uid in added:
                await activities.insert(
                    w.conn, viewer.community_id, conversation_id, uid, "join"
                )
            await _rekey(w.conn, conversation_id)
            # subscribe first, so that the new members also receive what follows
            w.emit(*(
                control_event(uid, subscribe=[conversation_channel(conversation_id)])
                for uid in added
            ))
            w.emit(NewEvent(
                conversation_channel(conversation_id), "conversation.member_added",
                {"conversation_id": conversation_id,
                 "users": [conversation_member(by_id[uid], base) for uid in added]},
            ))
            if row["private"]:  # now shared
                w.emit(await _summary_event(
                    w.conn, viewer, conversation_id, "conversation.updated", base))
        members = (await conversations.members_of(w.conn, [conversation_id]))[conversation_id]
    return [conversation_member(m, base) for m in members]


async def leave_conversation(
    pool: asyncpg.Pool, hub: Hub, viewer: Viewer, conversation_id: int, base: str
) -> None:
    """DELETE /api/conversations/:id/members/me."""
    async with work(pool, hub, viewer.community_id) as w:
        row = await access_conversation(w.conn, viewer, conversation_id, lock=True)
        if row["private"]:
            raise Invalid(
                "You can't leave a one-to-one conversation: hide it instead",
                fields={"conversation": ["is a one-to-one conversation"]},
            )
        me = await users.by_id(w.conn, viewer.community_id, viewer.id)
        assert me is not None
        await activities.insert(
            w.conn, viewer.community_id, conversation_id, viewer.id, "leave"
        )
        await conversations.remove_member(w.conn, conversation_id, viewer.id)
        await _rekey(w.conn, conversation_id)
        w.emit(NewEvent(conversation_channel(conversation_id), "conversation.member_removed",
                        {"conversation_id": conversation_id,
                         "users": [conversation_member(me, base)]}))
        after = await conversations.by_id(w.conn, viewer.community_id, conversation_id)
        if after is not None and after["private"]:  # down to two: now one-to-one
            w.emit(await _summary_event(
                w.conn, viewer, conversation_id, "conversation.updated", base))
        # unsubscribe last, so that the leaver still sees their own removal
        w.emit(control_event(viewer.id, unsubscribe=[conversation_channel(conversation_id)]))


async def acknowledge(pool: asyncpg.Pool, viewer: Viewer, conversation_id: int) -> None:
    async with work(pool, None, viewer.community_id) as w:
        w.private_to(viewer.id)  # the viewer's read state, seen by no other member
        await access_conversation(w.conn, viewer, conversation_id)
        if await conversations.acknowledge(w.conn, conversation_id, viewer.id):
            await badge_changed(w.conn, viewer.community_id, viewer.id)


async def acknowledge_all(pool: asyncpg.Pool, viewer: Viewer) -> None:
    async with work(pool, None, viewer.community_id) as w:
        w.private_to(viewer.id)
        if await conversations.acknowledge_all(w.conn, viewer.community_id, viewer.id):
            await badge_changed(w.conn, viewer.community_id, viewer.id)


async def set_hidden(
    pool: asyncpg.Pool, viewer: Viewer, conversation_id: int, hidden: bool
) -> None:
    """PUT .../hide and .../unhide: one-to-one conversations only."""
    async with work(pool, None, viewer.community_id) as w:
        w.private_to(viewer.id)  # hidden for the viewer only
        row = await access_conversation(w.conn, viewer, conversation_id)
        if not row["private"]:
            raise Invalid(
                "Only a one-to-one conversation can be hidden or unhidden",
                fields={"conversation": ["is a shared conversation"]},
            )
        await conversations.set_hidden(w.conn, conversation_id, viewer.id, hidden)


# --- reads -------------------------------------------------------------------------------


async def list_conversations(
    conn: Conn, viewer: Viewer, page: Page, *, unread_only: bool, hidden: bool
) -> list[asyncpg.Record]:
    return await conversations.list_for_user(
        conn, viewer.community_id, viewer.id, unread_only=unread_only, hidden=hidden,
        offset=page.offset, limit=page.limit,
    )


async def list_members(
    conn: Conn, viewer: Viewer, conversation_id: int, page: Page
) -> list[asyncpg.Record]:
    row = await access_conversation(conn, viewer, conversation_id)
    return await conversations.list_members(conn, row["id"], page.offset, page.limit)


async def list_activities(
    conn: Conn, viewer: Viewer, conversation_id: int, page: Page
) -> list[asyncpg.Record]:
    """Newest first; what the viewer may see of the conversation only."""
    row = await access_conversation(conn, viewer, conversation_id)
    return await activities.page(conn, row["id"], page.offset, page.limit,
                                 row["visible_from_activity_id"])


async def activity(
    conn: Conn, viewer: Viewer, conversation_id: int, activity_id: int
) -> asyncpg.Record:
    conversation = await access_conversation(conn, viewer, conversation_id)
    row = await activities.by_id(conn, conversation["id"], activity_id)
    # one added to a one-to-one conversation does not see what the two said before
    if row is None or row["id"] < conversation["visible_from_activity_id"]:
        raise NotFound("Activity not found")
    return row
