"""Notifications: making them (for the actions that announce something), listing them and
marking them read; and the push jobs that go with them and with conversation remarks.

Making: the `notify_*` functions run inside the caller's transaction. Each inserts the rows in
one statement (storage/notifications.py: never the actor, only active users of the community,
and only users who may read the message it is about), enqueues the push jobs for the
recipients' `main` devices whose switches allow it (push/jobs.py, one statement, visible to
`commons worker` once the transaction commits), and returns the `notification.created` events,
one per recipient on `user:<id>` with the Notification JSON, for the caller's unit of work
(app/actions/work.py) to append last and publish after commit:

    async with work(pool, hub, viewer.community_id) as w:
        ...the change...
        w.emit(*await notifications.notify_follow(w.conn, viewer, followed_id))

So a notification and its push jobs are committed with what caused them, or not at all.

Which filter, verb and device switch:

| what happened                                   | filter      | verb      | device switch     |
|-------------------------------------------------|-------------|-----------|-------------------|
| @mention in a message or comment                | at_mentions | mentioned | push_mentions     |
| comment on your message / a thread you are in   | replies     | commented | push_replies      |
| announcement (broadcast_message)                | broadcast   | announced | push_announcements|
| someone follows you                             | followers   | followed  | push_enabled only |
| thanks received                                 | thanks      | thanked   | push_enabled only |
| added to a group                                | groups      | added     | push_enabled only |
| membership request approved                     | groups      | approved  | push_enabled only |

One event gives one notification per person: someone @mentioned in a comment gets at_mentions,
not also replies; someone @mentioned in an announcement gets at_mentions, not also broadcast;
the recipients of a thanks get thanks, not at_mentions for being addressed by its
announcement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from app.actions.work import Emitted, work
from app.context import Viewer
from app.errors import NotFound
from app.markup.entities import extract_mentions
from app.render.notifications import notification as render_notification
from app.render.users import display_name
from app.urls import comment_permalink, group_url, message_permalink, user_url
from push import jobs as push_jobs
from push.jobs import PushMessage
from realtime.channels import user_channel
from realtime.events import NewEvent
from realtime.hub import Hub
from storage import notifications as store
from storage import users as user_store
from storage.db import Conn
from storage.events import TailInsert
from storage.notifications import FILTERS, Subject
from storage.notifications import Filter as Filter  # the views validate with it

TEXT_LIMIT = 200
"""notifiable_text and push bodies: the first characters of the text, whitespace folded."""

SWITCH_OF_FILTER = {
    "at_mentions": "push_mentions",
    "broadcast": "push_announcements",
    "replies": "push_replies",
}
# "<sender name> <phrase>": the title of a notification's push
PUSH_PHRASES = {
    ("at_mentions", "mentioned"): "mentioned you",
    ("replies", "commented"): "commented on a conversation you are in",
    ("broadcast", "announced"): "made an announcement",
    ("followers", "followed"): "started following you",
    ("thanks", "thanked"): "thanked you",
    ("groups", "added"): "added you to a group",
    ("groups", "approved"): "approved your request to join a group",
}
NOTIFICATION_CREATED = "notification.created"
NOTIFICATION_READ = "notification.read"
THANKS_MESSAGE_TYPE = "thanks"


def excerpt(text: str | None, limit: int = TEXT_LIMIT) -> str | None:
    if not text:
        return None
    flat = " ".join(text.split())
    if not flat:
        return None
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "\u2026"


# --- making notifications (inside the caller's transaction) ----------------------------------


async def notify_users(
    conn: asyncpg.Connection,
    community_id: int,
    sender_id: int | None,
    user_ids: Sequence[int],
    subject: Subject,
) -> list[Emitted]:
    """Notify `user_ids` (minus the sender, inactive users, and, for a message, whoever may not
    read it) of `subject`; their `notification.created` events."""
    rows = await store.insert_for_users(conn, community_id, sender_id, user_ids, subject)
    return _announce(community_id, sender_id, subject, rows)


async def notify_readers(
    conn: asyncpg.Connection,
    community_id: int,
    sender_id: int | None,
    subject: Subject,
    exclude: Sequence[int] = (),
) -> list[Emitted]:
    """Notify everyone who may read the subject's message (one INSERT ... SELECT)."""
    rows = await store.insert_for_readers(conn, community_id, sender_id, subject, exclude)
    return _announce(community_id, sender_id, subject, rows)


def _announce(
    community_id: int,
    sender_id: int | None,
    subject: Subject,
    rows: Sequence[asyncpg.Record],
) -> list[Emitted]:
    """Events and push jobs for freshly inserted notification rows."""
    if not rows:
        return []
    context = store.context_of(rows)
    base, sender = context.base_url, context.sender
    name = display_name(sender) if sender is not None else context.community_name
    phrase = PUSH_PHRASES.get((subject.filter, subject.verb), subject.verb)
    if subject.filter == "groups" and subject.notifiable_text:
        phrase = phrase.replace("a group", subject.notifiable_text)
    title = f"{name} {phrase}"
    body = subject.notifiable_text or ""
    switch = SWITCH_OF_FILTER.get(subject.filter)
    events: list[Emitted] = []
    user_ids: list[int] = []
    payloads: list[Mapping[str, Any]] = []
    for row in rows:
        data = render_notification(row, sender, base)
        events.append(NewEvent(user_channel(row["user_id"]), NOTIFICATION_CREATED, data))
        message = PushMessage(
            title=title, body=body, thread=f"{subject.notifiable_type}:{subject.notifiable_id}",
            data={"type": "notification", "notification_id": str(row["id"]),
                  "filter": subject.filter, "url": data["notifiable_url"]},
        )
        check = {"switch": switch, "notification_id": row["id"]}
        user_ids.append(row["user_id"])
        payloads.append(push_jobs.payload(message, check))
    jobs = push_jobs.jobs(community_id, "notification", user_ids, payloads,
                          notification_type="main", switch=switch)
    if jobs is not None:
        events.append(jobs)
    return events


def _message_text(row: Mapping[str, Any]) -> str | None:
    return excerpt(row["title"]) or excerpt(row["body"])


async def notify_new_message(
    conn: asyncpg.Connection,
    community_id: int,
    message_id: int,
    author_id: int,
    mentioned_user_ids: Sequence[int],
    message: Mapping[str, Any] | None = None,
) -> list[Emitted]:
    """@mentions (and addressed recipients) of a new message get at_mentions; an announcement
    also notifies everyone else who may read it (broadcast). `message`: its row when the caller
    has it (MESSAGE_SUBJECT's columns at least), else it is read."""
    if message is None:
        message = await store.message_subject(conn, community_id, message_id)
    if message is None:
        return []
    mentioned = list(mentioned_user_ids)
    if message["message_type"] == THANKS_MESSAGE_TYPE and mentioned:
        thanked = set(await store.addressed_users(conn, message_id))  # notify_thanks does them
        mentioned = [u for u in mentioned if u not in thanked]
    path = message_permalink("", message_id, message["title"] or None)
    text = _message_text(message)
    events = await notify_users(conn, community_id, author_id, mentioned, Subject(
        "at_mentions", "mentioned", "Message", message_id, text, path, message_id=message_id,
    ))
    if message["is_announcement"]:
        events += await notify_readers(conn, community_id, author_id, Subject(
            "broadcast", "announced", "Message", message_id, text, path, message_id=message_id,
        ), exclude=mentioned)
    return events


async def notify_message_mentions(
    conn: asyncpg.Connection,
    community_id: int,
    message_id: int,
    user_ids: Sequence[int],
) -> list[Emitted]:
    """Users @mentioned by an edit who were not before (at_mentions, sent by the author)."""
    message = await store.message_subject(conn, community_id, message_id)
    if message is None or not user_ids:
        return []
    path = message_permalink("", message_id, message["title"] or None)
    return await notify_users(conn, community_id, message["user_id"], user_ids, Subject(
        "at_mentions", "mentioned", "Message", message_id, _message_text(message), path,
        message_id=message_id,
    ))


async def notify_new_comment(
    conn: asyncpg.Connection,
    community_id: int,
    message_id: int,
    comment_id: int,
    author_id: int,
    mentioned_user_ids: Sequence[int],
    *,
    text: str,
    message_title: str | None,
) -> list[Emitted]:
    """@mentions in the comment (`text`, on the message titled `message_title`) get
    at_mentions; the message's author and everyone else who commented on it get replies."""
    path = comment_permalink("", message_id, message_title or None, comment_id)
    excerpted = excerpt(text)
    mentioned = list(mentioned_user_ids)
    events = await notify_users(conn, community_id, author_id, mentioned, Subject(
        "at_mentions", "mentioned", "Comment", comment_id, excerpted, path,
        message_id=message_id, comment_id=comment_id,
    ))
    taken = set(mentioned)
    participants = [
        u for u in await store.thread_participants(conn, community_id, message_id)
        if u not in taken
    ]
    events += await notify_users(conn, community_id, author_id, participants, Subject(
        "replies", "commented", "Comment", comment_id, excerpted, path,
        message_id=message_id, comment_id=comment_id,
    ))
    return events


async def notify_follow(
    conn: asyncpg.Connection, viewer: Viewer, followed_id: int
) -> list[Emitted]:
    """`viewer` started following `followed_id` (followers; the notifiable is the follower)."""
    follower = viewer.row
    if follower is None or follower.get("username") is None:
        follower = await user_store.by_id(conn, viewer.community_id, viewer.id)
    if follower is None:
        return []
    path = user_url("", viewer.id, follower["username"])
    return await notify_users(conn, viewer.community_id, viewer.id, [followed_id], Subject(
        "followers", "followed", "User", viewer.id, None, path,
    ))


async def notify_thanks(
    conn: asyncpg.Connection,
    viewer: Viewer,
    thanks_id: int,
    recipient_ids: Sequence[int],
    body: str,
) -> list[Emitted]:
    """The recipients of a thanks (thanks; the notifiable is the Thanks)."""
    return await notify_users(conn, viewer.community_id, viewer.id, recipient_ids, Subject(
        "thanks", "thanked", "Thanks", thanks_id, excerpt(body), f"/thanks/{thanks_id}",
    ))


async def notify_group_membership(
    conn: asyncpg.Connection,
    viewer: Viewer,
    group_id: int,
    user_ids: Sequence[int],
    *,
    approved: bool = False,
) -> list[Emitted]:
    """`user_ids` were added to the group by `viewer` (verb added), or their membership request
    was approved (approved=True: verb approved). The notifiable is the Group; its text the
    group's name. Pass only users who were not members before."""
    group = await store.group_subject(conn, viewer.community_id, group_id)
    if group is None or not user_ids:
        return []
    path = group_url("", group_id, group["groupname"])
    return await notify_users(
        conn, viewer.community_id, viewer.id or None, user_ids,
        Subject("groups", "approved" if approved else "added", "Group", group_id,
                group["name"], path, group_id=group_id),
    )


# --- push for conversation remarks -----------------------------------------------------------


def remark_push(activity: Mapping[str, Any]) -> TailInsert | None:
    """For the remark's unit of work (`activity` as storage.activities.post_remark returns
    it, with its conversation's name):
    a push job for every other current member's `conversations` devices with
    push_conversation_activity on. The worker sends it only if the member has not acknowledged
    the remark by then. None when there is no other member."""
    members = list(activity["other_member_ids"])  # read by the insert (storage.activities)
    if not members:
        return None
    author = display_name({
        "first_name": activity["actor_first_name"], "last_name": activity["actor_last_name"],
        "username": activity["actor_username"],
    })
    text = excerpt(activity["text"])
    if text is None:
        text = "shared a message" if activity["shared_message_id"] else "sent an attachment"
        text = f"{author} {text}"
    conversation_id = activity["conversation_id"]
    title = activity["conversation_name"] or author
    body = text if title == author else f"{author}: {text}"
    message = PushMessage(
        title=title, body=body, thread=f"conversation:{conversation_id}",
        data={"type": "remark", "conversation_id": str(conversation_id),
              "activity_id": str(activity["id"])},
    )
    check = {"switch": "push_conversation_activity", "conversation_id": conversation_id,
             "activity_id": activity["id"]}
    payload = push_jobs.payload(message, check)
    return push_jobs.jobs(
        activity["community_id"], "remark", members, [payload],
        notification_type="conversations", switch="push_conversation_activity",
    )


# --- push for group chat messages ------------------------------------------------------------


async def enqueue_chat_push(
    conn: asyncpg.Connection,
    group: Mapping[str, Any],
    message: Mapping[str, Any],
    author: Mapping[str, Any],
) -> None:
    """Inside the chat message's transaction: ONE push job for the whole group, whatever its
    size (`commons worker` fans it out to the members' `main` devices whose settings allow
    it: push/jobs.py `fan_out`). `author` is the rendered embedded user."""
    name = author["name"]
    text = excerpt(message["body"])
    body = f"{name}: {text}" if text else f"{name} sent an attachment"
    push = PushMessage(
        title=group["name"], body=body, thread=f"group_chat:{group['id']}",
        data={"type": "chat_message", "group_id": str(group["id"]),
              "chat_message_id": str(message["id"])},
    )
    await push_jobs.enqueue_chat(
        conn, message["community_id"], group["id"], message["id"], message["user_id"],
        extract_mentions(message["body"]), push, f"{name} mentioned you in {group['name']}",
    )


# --- reading ---------------------------------------------------------------------------------


def check_filter(value: str | None) -> str | None:
    """A filter of the list; an unknown one names nothing (404)."""
    if value is None:
        return None
    if value not in FILTERS:
        raise NotFound("No such notification filter")
    return value


async def list_notifications(
    conn: Conn, viewer: Viewer, base: str, filter_: str | None, offset: int, limit: int
) -> dict[str, Any]:
    """GET /api/notifications(/:filter): counts and a page, most recent first (3 queries)."""
    total, unread = await store.counts(conn, viewer.community_id, viewer.id, filter_)
    rows = await store.page(conn, viewer.community_id, viewer.id, filter_, offset, limit)
    sender_ids = {r["sent_by_user_id"] for r in rows if r["sent_by_user_id"] is not None}
    senders = {
        u["id"]: u for u in await user_store.by_ids(conn, viewer.community_id, list(sender_ids))
    } if sender_ids else {}
    return {
        "notifications_count": total,
        "unread_notifications_count": unread,
        "notifications": [
            render_notification(r, senders.get(r["sent_by_user_id"]), base) for r in rows
        ],
    }


def _read_event(user_id: int, ids: Sequence[int], unread: int) -> NewEvent:
    return NewEvent(user_channel(user_id), NOTIFICATION_READ,
                    {"ids": list(ids), "unread_notifications_count": unread})


async def badge_changed(conn: asyncpg.Connection, community_id: int, user_id: int) -> None:
    """Inside a transaction that made something of the user's read: a silent badge update for
    each of their devices (coalesced by the worker to at most one per device per
    PUSH_BADGE_INTERVAL_SECONDS). The API does not say which device read, so the one that did
    gets it too, which shows the count it already has."""
    await push_jobs.enqueue_badges(conn, community_id, user_id)


async def mark_read(pool: asyncpg.Pool, hub: Hub | None, viewer: Viewer,
                    notification_id: int) -> None:
    """POST /api/notifications/:id/read: 404 unless it is the viewer's. Reading one already
    read changes nothing (and sends no event)."""
    async with work(pool, hub, viewer.community_id) as w:
        w.private_to(viewer.id)  # read state: the viewer's own
        was_read = await store.mark_read(w.conn, viewer.community_id, viewer.id,
                                         notification_id)
        if was_read is None:
            raise NotFound("Notification not found")
        if not was_read:
            unread = await store.unread_count(w.conn, viewer.community_id, viewer.id)
            w.emit(_read_event(viewer.id, [notification_id], unread))
            await badge_changed(w.conn, viewer.community_id, viewer.id)


async def mark_all_read(pool: asyncpg.Pool, hub: Hub | None, viewer: Viewer) -> None:
    """PUT /api/notifications/mark_all_read (one event listing what it changed, if anything)."""
    async with work(pool, hub, viewer.community_id) as w:
        w.private_to(viewer.id)
        ids = await store.mark_all_read(w.conn, viewer.community_id, viewer.id)
        if ids:
            unread = await store.unread_count(w.conn, viewer.community_id, viewer.id)
            w.emit(_read_event(viewer.id, sorted(ids), unread))
            await badge_changed(w.conn, viewer.community_id, viewer.id)
