"""Notifications: one row per recipient (migration 0009), created in bulk, listed per user.

Creating is always one `INSERT ... SELECT` over the users table, whatever the number of
recipients: the statement itself drops the sender, inactive users, users of another community
and, for anything about a message, every user who may not read that message (the same rule as
every message query, storage.messages.READABLE, applied per recipient).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast, get_args

import asyncpg

from storage import conversations as conversation_store
from storage import messages
from storage.db import Conn
from storage.rows import UserRow
from storage.users import BASIC_NAMES

# the eight kinds of notification (spec "Notifications"); request models validate with Filter
Filter = Literal[
    "thanks", "groups", "at_mentions", "broadcast", "replies", "projects", "followers",
    "town_halls",
]
FILTERS: tuple[str, ...] = get_args(Filter)

COLUMNS = """
n.id, n.community_id, n.user_id, n.sent_by_user_id, n.notifiable_type, n.notifiable_id,
n.notifiable_text, n.notifiable_url, n.filter, n.verb, n.read, n.created_at
"""
RETURNING = COLUMNS.replace("n.", "")


def _readable_by_recipient() -> str:
    """storage.messages.READABLE with its viewer ($2) and external flag ($3) bound to the
    candidate recipient `u`, for the message `$10`."""
    bound = {"2": "u.id", "3": "(u.role = 'external_contributor')"}

    def bind(match: re.Match[str]) -> str:
        return bound[match.group(1)]  # any other placeholder is a KeyError: the rule changed

    rule = re.sub(r"\$(\d+)\b", bind, messages.READABLE)
    return (
        "EXISTS (SELECT 1 FROM messages m LEFT JOIN groups g ON g.id = m.group_id "
        f"WHERE m.id = $10 AND m.community_id = $1 AND {rule})"
    )


READABLE_BY_RECIPIENT = _readable_by_recipient()

_INSERT_HEAD = """
INSERT INTO notifications AS n (community_id, user_id, sent_by_user_id, notifiable_type,
    notifiable_id, notifiable_text, notifiable_url, filter, verb, message_id, comment_id,
    group_id)
SELECT $1, u.id, $2, $4, $5, $6, $7, $8, $9, $10, $11, $12
FROM users u
"""

# What announcing new notifications needs once (app.actions.notifications): the community's
# base URL and name, and the sender's BASIC columns, prefixed `sender_` (null when no user sent
# them). The inserts below return it on their first row only (by user id), so that a broadcast
# to a whole community does not carry it 10,000 times, and need no second statement for it.
SENDER_PREFIX = "sender_"
_CONTEXT = f"""
SELECT c.base_url AS context_base_url, c.name AS context_community_name,
       {", ".join(f"u.{c} AS {SENDER_PREFIX}{c}" for c in BASIC_NAMES)}
FROM communities c LEFT JOIN users u ON u.community_id = c.id AND u.id = $2
WHERE c.id = $1
"""


def _inserting(where: str) -> str:
    """The notifications of the users `where` selects, returned by user id, the first row with
    _CONTEXT's columns."""
    return f"""
WITH n AS ({_INSERT_HEAD}
    {where}
    ORDER BY u.id
    RETURNING {RETURNING}
), context AS ({_CONTEXT})
SELECT n.*, context.* FROM n LEFT JOIN context ON n.user_id = (SELECT min(user_id) FROM n)
ORDER BY n.user_id
"""


# $3: the recipients' ids. $10 (message_id) null: not about a message, nothing to check.
INSERT_FOR_USERS = _inserting(f"""
WHERE u.community_id = $1 AND u.id = ANY($3::bigint[]) AND u.state = 'active'
  AND u.id IS DISTINCT FROM $2
  AND ($10::bigint IS NULL OR {READABLE_BY_RECIPIENT})
""")

# Everyone in the community who may read message $10, except the sender and the ids in $3.
INSERT_FOR_READERS = _inserting(f"""
WHERE u.community_id = $1 AND u.state = 'active' AND u.id IS DISTINCT FROM $2
  AND NOT (u.id = ANY($3::bigint[]))
  AND {READABLE_BY_RECIPIENT}
""")

COUNTS = """
SELECT count(*)::int AS total, count(*) FILTER (WHERE NOT read)::int AS unread
FROM notifications WHERE user_id = $1 AND community_id = $2
"""
COUNTS_OF_FILTER = """
SELECT count(*)::int AS total, count(*) FILTER (WHERE NOT read)::int AS unread
FROM notifications WHERE user_id = $1 AND community_id = $2 AND filter = $3
"""
PAGE = f"""
SELECT {COLUMNS} FROM notifications n
WHERE n.user_id = $1 AND n.community_id = $2
ORDER BY n.id DESC OFFSET $3 LIMIT $4
"""
PAGE_OF_FILTER = f"""
SELECT {COLUMNS} FROM notifications n
WHERE n.user_id = $1 AND n.community_id = $2 AND n.filter = $5
ORDER BY n.id DESC OFFSET $3 LIMIT $4
"""

# (was_read) of the user's notification, made read; no row: not theirs (or no such id).
MARK_READ = """
WITH target AS (
    SELECT id, read FROM notifications
    WHERE community_id = $1 AND user_id = $2 AND id = $3
    FOR UPDATE
), changed AS (
    UPDATE notifications n SET read = true FROM target
    WHERE n.id = target.id AND NOT target.read
)
SELECT read AS was_read FROM target
"""
MARK_ALL_READ = """
UPDATE notifications SET read = true
WHERE community_id = $1 AND user_id = $2 AND NOT read
RETURNING id
"""


def unread_of(community: str, user: str) -> str:
    """The user's unread notifications, as an SQL expression over two SQL expressions (a
    parameter or a column): the one count behind unread_notifications_count and push badges."""
    return (f"(SELECT count(*) FROM notifications un WHERE un.community_id = {community}"
            f" AND un.user_id = {user} AND NOT un.read)::int")


def badge_of(community: str, user: str) -> str:
    """A push badge, as an SQL expression: the user's unread notifications plus their unread
    conversation remarks (what REST reports as unread_notifications_count and the sum of their
    conversations' unread_count), counted when the push is built, never stored."""
    remarks = conversation_store.unread_remarks_of(community, user)
    return f"({unread_of(community, user)} + {remarks})"


UNREAD_COUNT = f"SELECT {unread_of('$1', '$2')}"
BADGE = f"SELECT {badge_of('$1', '$2')}"

# What notifications about a message or a comment need of it (re-read after commit).
MESSAGE_SUBJECT = """
SELECT id, user_id, group_id, title, body, message_type, is_announcement
FROM messages WHERE community_id = $1 AND id = $2
"""
# Who a new comment is a reply to: the message's author and everyone who commented on it.
THREAD_PARTICIPANTS = """
SELECT user_id FROM messages WHERE community_id = $1 AND id = $2
UNION
SELECT user_id FROM comments WHERE community_id = $1 AND message_id = $2
"""
ADDRESSED_USERS = """
SELECT user_id FROM message_recipients
WHERE message_id = $1 AND comment_id IS NULL AND reason = 'addressed' AND user_id IS NOT NULL
"""
GROUP_SUBJECT = "SELECT id, name, groupname FROM groups WHERE community_id = $1 AND id = $2"


@dataclass(frozen=True, slots=True)
class Subject:
    """What a notification is about: the API's notifiable_* fields, plus the message, comment
    or group it belongs to (deleting that deletes the notification), and the message whose
    readability decides who may be notified."""

    filter: str
    verb: str
    notifiable_type: str
    notifiable_id: int
    notifiable_text: str | None
    notifiable_path: str
    message_id: int | None = None
    comment_id: int | None = None
    group_id: int | None = None


def _args(subject: Subject) -> tuple[object, ...]:
    return (
        subject.notifiable_type, subject.notifiable_id, subject.notifiable_text,
        subject.notifiable_path, subject.filter, subject.verb, subject.message_id,
        subject.comment_id, subject.group_id,
    )


async def insert_for_users(
    conn: asyncpg.Connection,
    community_id: int,
    sender_id: int | None,
    user_ids: Sequence[int],
    subject: Subject,
) -> list[asyncpg.Record]:
    """One notification for each of `user_ids` who is an active user of the community, not the
    sender and, when the subject is a message, may read it. The rows made, by user id (their
    Context: context_of)."""
    if not user_ids:
        return []
    return await conn.fetch(
        INSERT_FOR_USERS, community_id, sender_id, list(dict.fromkeys(user_ids)), *_args(subject)
    )


async def insert_for_readers(
    conn: asyncpg.Connection,
    community_id: int,
    sender_id: int | None,
    subject: Subject,
    exclude: Sequence[int] = (),
) -> list[asyncpg.Record]:
    """One notification for every active user who may read the subject's message (an
    announcement), except the sender and `exclude`: one statement for the whole community.
    The rows made, by user id (their Context: context_of)."""
    assert subject.message_id is not None
    return await conn.fetch(
        INSERT_FOR_READERS, community_id, sender_id, list(exclude), *_args(subject)
    )


async def counts(
    conn: Conn, community_id: int, user_id: int, filter_: str | None
) -> tuple[int, int]:
    """(all, unread) of the user's notifications (of one filter)."""
    if filter_ is None:
        row = await conn.fetchrow(COUNTS, user_id, community_id)
    else:
        row = await conn.fetchrow(COUNTS_OF_FILTER, user_id, community_id, filter_)
    assert row is not None
    return row["total"], row["unread"]


async def page(
    conn: Conn, community_id: int, user_id: int, filter_: str | None, offset: int, limit: int
) -> list[asyncpg.Record]:
    """The user's notifications, most recent first."""
    if filter_ is None:
        return await conn.fetch(PAGE, user_id, community_id, offset, limit)
    return await conn.fetch(PAGE_OF_FILTER, user_id, community_id, offset, limit, filter_)


async def mark_read(
    conn: asyncpg.Connection, community_id: int, user_id: int, notification_id: int
) -> bool | None:
    """Make the user's notification read: None when they have no such notification, else
    whether it was read already."""
    row = await conn.fetchrow(MARK_READ, community_id, user_id, notification_id)
    return None if row is None else bool(row["was_read"])


async def mark_all_read(conn: asyncpg.Connection, community_id: int, user_id: int) -> list[int]:
    """Ids of the notifications this made read."""
    return [r["id"] for r in await conn.fetch(MARK_ALL_READ, community_id, user_id)]


async def unread_count(conn: Conn, community_id: int, user_id: int) -> int:
    return int(await conn.fetchval(UNREAD_COUNT, community_id, user_id))


async def badge(conn: Conn, community_id: int, user_id: int) -> int:
    """What a push to this user would carry as its badge now."""
    return int(await conn.fetchval(BADGE, community_id, user_id))


@dataclass(frozen=True, slots=True)
class Context:
    """What the first row of an insert carries (_CONTEXT)."""

    base_url: str
    community_name: str
    sender: UserRow | None  # the sender's BASIC columns; None: no user sent them


def context_of(rows: Sequence[asyncpg.Record]) -> Context:
    """The Context of insert_for_users' or insert_for_readers' rows (at least one)."""
    first = rows[0]
    sender: UserRow | None = None
    if first[f"{SENDER_PREFIX}id"] is not None:
        sender = cast("UserRow", {c: first[f"{SENDER_PREFIX}{c}"] for c in BASIC_NAMES})
    return Context(first["context_base_url"], first["context_community_name"], sender)


async def message_subject(
    conn: Conn, community_id: int, message_id: int
) -> asyncpg.Record | None:
    return await conn.fetchrow(MESSAGE_SUBJECT, community_id, message_id)


async def thread_participants(conn: Conn, community_id: int, message_id: int) -> list[int]:
    return [r["user_id"] for r in await conn.fetch(THREAD_PARTICIPANTS, community_id, message_id)]


async def addressed_users(conn: Conn, message_id: int) -> list[int]:
    """Users a message was addressed to (message[recipients], thanks recipients)."""
    return [r["user_id"] for r in await conn.fetch(ADDRESSED_USERS, message_id)]


async def group_subject(conn: Conn, community_id: int, group_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(GROUP_SUBJECT, community_id, group_id)
