"""Thanks: thanking colleagues, with an optional badge, announced company-wide.

Rules:
- thanks[body] is required (the community's content filters apply); at least one recipient,
  at most MAX_RECIPIENTS, every one an active user of the community and none the sender
  (422 on thanks[recipients] otherwise); thanks[badge_id], when given, one of the community's
  badges (422 otherwise).
- Each thanks is announced by a message posted through the messages' creation action in the
  same transaction: message_type "thanks", no group (the whole company reads it), addressed
  to the recipients (their @Mentions and Home streams), action "thanked <names>", and one
  `extensions` entry {"extension_type": "thanks_announcement", "recipient", "recipients",
  "badge", "in_reference_to": null} with the users and badge rendered as the thanks shows them.
  External contributors cannot post outside their groups, so they cannot send thanks (403).
- Who sees a thanks: see storage/thanks.py (internal users all; external contributors theirs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from app.actions.content_filters import check_text
from app.actions.messages import NewMessage, insert_message, render_messages
from app.actions.notifications import notify_thanks
from app.actions.thanks_extensions import THANKS_MESSAGE_TYPE, announcement_extension
from app.actions.work import work
from app.context import Viewer
from app.errors import Invalid, NotFound
from app.params import Page
from app.render.thanks import thanks as render_thanks
from app.render.users import display_name
from realtime.hub import Hub
from storage import badges as badge_storage
from storage import messages as message_storage
from storage import thanks as thanks_storage
from storage import users as user_storage
from storage.db import Conn

MAX_BODY = 5_000
MAX_RECIPIENTS = 50
MESSAGE_TYPE = THANKS_MESSAGE_TYPE


@dataclass
class ThanksFields:
    body: str | None = None
    recipient_ids: list[int] = field(default_factory=list)
    badge_id: int | None = None


def _names(rows: Sequence[asyncpg.Record]) -> str:
    names = [display_name(r) for r in rows]
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


async def create_thanks(
    pool: asyncpg.Pool, viewer: Viewer, base: str, fields: ThanksFields, hub: Hub | None = None
) -> int:
    body = (fields.body or "").strip()
    if not body:
        raise Invalid.field("thanks[body]", "can't be blank")
    if len(body) > MAX_BODY:
        raise Invalid.field("thanks[body]", f"is too long (maximum is {MAX_BODY} characters)")
    ids = list(dict.fromkeys(fields.recipient_ids))
    if not ids:
        raise Invalid.field("thanks[recipients]", "can't be blank")
    if len(ids) > MAX_RECIPIENTS:
        raise Invalid.field("thanks[recipients]", f"has too many (maximum is {MAX_RECIPIENTS})")
    if viewer.id in ids:
        raise Invalid.field("thanks[recipients]", "can't include yourself",
                            "You can't thank yourself")
    cid = viewer.community_id
    async with work(pool, hub, cid) as w:
        conn = w.conn
        found = {u["id"]: u for u in await user_storage.by_ids(conn, cid, ids)}
        bad = [i for i in ids if i not in found or found[i]["state"] != "active"]
        if bad:
            raise Invalid.field(
                "thanks[recipients]",
                f"are not active users of this community: {', '.join(map(str, bad))}",
            )
        recipients = [found[i] for i in ids]
        badge = None
        if fields.badge_id is not None:
            badge = await badge_storage.by_id(conn, cid, fields.badge_id)
            if badge is None:
                raise Invalid.field("thanks[badge_id]", "is not a badge of this community")
        await check_text(conn, cid, body, field="thanks[body]")
        message_id = await insert_message(w, viewer, base, NewMessage(
            body=body, message_type=MESSAGE_TYPE, action=f"thanked {_names(recipients)}",
            recipient_user_ids=ids, extensions=[announcement_extension(recipients, badge, base)],
            source="api", param_prefix="thanks",
        ))
        row = await thanks_storage.insert(
            conn, cid, user_id=viewer.id, badge_id=badge["id"] if badge is not None else None,
            body=body, message_id=message_id, recipient_ids=ids,
        )
        w.emit(*await notify_thanks(conn, viewer, row["id"], ids, body))
    thanks_id: int = row["id"]
    return thanks_id


async def render_thanks_rows(
    conn: Conn, viewer: Viewer, rows: Sequence[asyncpg.Record], base: str
) -> list[dict[str, Any]]:
    """Thanks rows rendered with their users, badges and announcements, in a fixed number of
    queries whatever their number. An announcement the viewer may not read (or that was
    deleted) is null."""
    if not rows:
        return []
    cid = viewer.community_id
    recipients = await thanks_storage.recipients(conn, [r["id"] for r in rows])
    user_ids = {r["user_id"] for r in rows} | {u for ids in recipients.values() for u in ids}
    users = {u["id"]: u for u in await user_storage.by_ids(conn, cid, list(user_ids))}
    badges = await badge_storage.by_ids(
        conn, cid, [r["badge_id"] for r in rows if r["badge_id"] is not None]
    )
    message_ids = [r["message_id"] for r in rows if r["message_id"] is not None]
    message_rows = await message_storage.readable_by_ids(
        conn, cid, viewer.id, viewer.is_external, message_ids
    )
    rendered = await render_messages(conn, viewer, message_rows, base)
    announcements = {m["id"]: m for m in rendered}
    out: list[dict[str, Any]] = []
    for r in rows:
        people = [users[u] for u in recipients.get(r["id"], []) if u in users]
        badge = badges.get(r["badge_id"]) if r["badge_id"] is not None else None
        out.append(render_thanks(r, base, sender=users[r["user_id"]], recipients=people,
                                 badge=badge, announcement=announcements.get(r["message_id"])))
    return out


async def load_thanks(conn: Conn, viewer: Viewer, thanks_id: int, base: str) -> dict[str, Any]:
    row = await thanks_storage.visible_by_id(
        conn, viewer.community_id, viewer.id, viewer.is_external, thanks_id
    )
    if row is None:
        raise NotFound("Thanks not found")
    return (await render_thanks_rows(conn, viewer, [row], base))[0]


# --- reads -------------------------------------------------------------------------------


async def list_thanks(
    conn: Conn, viewer: Viewer, page: Page, *, recipient_id: int | None,
    since: datetime | None,
) -> list[asyncpg.Record]:
    return await thanks_storage.list_thanks(
        conn, viewer.community_id, viewer.id, viewer.is_external, recipient_id=recipient_id,
        since=since, offset=page.offset, limit=page.limit,
    )


async def badge_messages(
    conn: Conn, viewer: Viewer, badge_id: int, page: Page, *, recipient_id: int | None
) -> tuple[list[asyncpg.Record], bool]:
    """The page of messages that gave the badge (NotFound: no such badge here), and whether
    there are more."""
    badge = await badge_storage.by_id(conn, viewer.community_id, badge_id)
    if badge is None:
        raise NotFound("Badge not found")
    rows = await thanks_storage.badge_messages(
        conn, viewer.community_id, viewer.id, viewer.is_external, badge_id=badge["id"],
        recipient_id=recipient_id, offset=page.offset, limit=page.per_page + 1,
    )
    return rows[:page.per_page], len(rows) > page.per_page
