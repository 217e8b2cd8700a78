"""Messages: posting (the one creation path for the API, thanks, webhooks and external
systems), editing, deleting, hiding from a group, and loading pages of them in a fixed number
of queries.

Rules:
- Posting into a group: its members (and community admins) may, while the group is active;
  when the group has posting turned off only its admins may. A group the poster may not read
  is a 422 on `message[group_id]`, like one that does not exist.
- Without a group: any internal user; an external contributor only posts into their groups.
- `message_type=broadcast_message` is an announcement: community admins only; it reaches
  every Home stream and, with `days_of_stickiness`, stays on top of Home and Company for
  that many days.
- Editing and deleting: the author, an admin of the message's group, or a community admin.
  Nothing is written in an archived group (editing is a 403); deleting stays possible.
- The body: `@username` / `@groupname` mentions become links and recipients, `#tags` topics,
  URLs external resources (nothing is fetched). message[url] is the `external_url` (and one
  more external resource).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import asyncpg

from app.access import access_message, may_comment, may_edit_message
from app.actions.attachments import claim_attachments, delete_blobs
from app.actions.content_filters import check_words
from app.actions.notifications import notify_message_mentions, notify_new_message
from app.actions.thanks_extensions import THANKS_MESSAGE_TYPE, thanks_extensions
from app.actions.work import Work, work
from app.context import Viewer
from app.errors import Forbidden, Invalid, NotFound
from app.markup.entities import extract_hashtags, extract_mentions, extract_urls
from app.markup.html import MentionTarget, render_html
from app.render.attachments import attachments_and_media_files
from app.render.feed import FeedData
from app.render.messages import created_message, is_shareable, message
from app.render.page_messages import Form, kept_forms, render_and_keep
from app.urls import group_url, user_url
from realtime.hub import Hub
from storage import attachments as attachment_storage
from storage import comments as comment_storage
from storage import likes as like_storage
from storage import messages as message_storage
from storage import polls as poll_storage
from storage import topics as topic_storage
from storage import users as user_storage
from storage.blobs import BlobStore
from storage.db import Conn, connection
from storage.messages import MessageQuery, Recipient
from storage.rows import MentionableUserRow, MessageExtrasRow, NewMessageRow, UserRow

# What `message[message_type]` may say through the API (thanks and the like are made by their
# own actions, which pass their type to create_message).
API_MESSAGE_TYPES = ("status_message", "question", "link", "poll", "broadcast_message")
ANNOUNCEMENT = "broadcast_message"
ACTIONS = {
    "status_message": "",
    "question": "asked a question",
    "link": "posted a link",
    "poll": "created a poll",
    ANNOUNCEMENT: "made an announcement",
}
MAX_STICKINESS_DAYS = 365

# Comments and likes a listed message carries unless the request says otherwise, and the most
# it may ask for.
DEFAULT_THREAD_LIMIT = 100
MAX_THREAD_LIMIT = 500


@dataclass(frozen=True)
class Limits:
    """comments_limit (latest comments per message), likes_limit (likes per message),
    comment_likes_limit (likes per comment)."""

    comments: int = DEFAULT_THREAD_LIMIT
    likes: int = DEFAULT_THREAD_LIMIT
    comment_likes: int = DEFAULT_THREAD_LIMIT


# --- loading and rendering pages -------------------------------------------------------------


Rendered = dict[tuple[str, int], list[dict[str, Any]]]


async def attachments_of(
    conn: Conn, base: str, subject_type: str, ids: Sequence[int]
) -> tuple[Rendered, Rendered]:
    """Rendered attachments and media files of subjects, in one query."""
    attachments: Rendered = {}
    media: Rendered = {}
    found = await attachment_storage.for_subjects(conn, subject_type, ids)
    for subject_id, rows in found.items():
        rendered, files = attachments_and_media_files(rows, base)
        attachments[(subject_type, subject_id)] = rendered
        media[(subject_type, subject_id)] = files
    return attachments, media


async def load_feed(
    conn: Conn,
    viewer: Viewer,
    rows: Sequence[asyncpg.Record],
    base: str,
    limits: Limits = Limits(),
) -> FeedData:
    """Everything the messages `rows` show, whatever their number: one query each for shared
    messages, comments (with their recipients, tags and whether they have attachments), likes
    (of messages and comments), the messages' extras (recipients, tags, poll ids, whether they
    have attachments; not for rows that carry them, as a page's do), users, groups, external
    resources, attachments (of messages and comments at once) and polls; then the thanks
    announcements among them (app.actions.thanks_extensions: four queries when there are
    thanks messages). The queries
    with nothing to read are not run (no shared message, no link, no group, no attachment, no
    poll, no thanks...)."""
    data = FeedData(base, viewer)
    if not rows:
        return data
    cid = viewer.community_id
    ids = [r["id"] for r in rows]
    shared_ids = list({r["shared_message_id"] for r in rows if r["shared_message_id"]})
    shared = await message_storage.readable_by_ids(
        conn, cid, viewer.id, viewer.is_external, shared_ids
    )
    every = [*rows, *shared]
    every_ids = list(dict.fromkeys(r["id"] for r in every))
    comments = (
        await comment_storage.latest_of_messages(conn, ids, limits.comments)
        if limits.comments > 0 else []
    )
    comment_ids = [c["id"] for c in comments]
    likes = await like_storage.top(
        conn, viewer.id, ids, comment_ids,
        per_message=limits.likes, per_comment=limits.comment_likes,
    )
    # a page's rows carry their extras (storage.messages.PAGE_EXTRAS); the others (shared
    # messages, a message read alone) are read here
    carried = {r["id"]: cast("MessageExtrasRow", r) for r in rows
               if message_storage.has_extras(r)}
    extras = [*carried.values(), *await message_storage.extras(
        conn, [i for i in every_ids if i not in carried])]

    user_ids = {r["user_id"] for r in every}
    user_ids.update(c["user_id"] for c in comments)
    user_ids.update(lk["user_id"] for lk in likes)
    group_ids = {r["group_id"] for r in every if r["group_id"] is not None}
    recipients, tags = _addressing(extras, user_ids, group_ids)
    comment_recipients, comment_tags = _addressing(comments, user_ids, group_ids)
    resource_ids = {i for r in every for i in r["external_resource_ids"] or ()}
    resource_ids.update(i for c in comments for i in c["external_resource_ids"] or ())

    users = await user_storage.embedded_by_ids(conn, cid, list(user_ids))
    # a page's rows carry their group (storage.messages.page_group): read only the others
    # (groups addressed elsewhere, shared messages' groups)
    groups: list[Any] = [message_storage.page_group(r) for r in rows
                         if r["group_id"] is not None and message_storage.has_extras(r)]
    carried_groups = {g["id"] for g in groups}
    groups += await message_storage.groups(conn, cid, viewer.id, viewer.is_external,
                                           [g for g in group_ids if g not in carried_groups])
    resources = await message_storage.resources(conn, cid, list(resource_ids))
    attachments: Rendered = {}
    media: Rendered = {}
    found = await attachment_storage.for_messages_and_comments(
        conn, [e["id"] for e in extras if e["has_attachments"]],
        [c["id"] for c in comments if c["has_attachments"]],
    )
    for subject, attachment_rows in found.items():
        attachments[subject], media[subject] = attachments_and_media_files(attachment_rows, base)
    poll_message_ids = [e["id"] for e in extras if e["poll_id"] is not None]
    polls = (await poll_storage.of_messages(conn, cid, viewer.id, poll_message_ids)
             if poll_message_ids else [])
    # only thanks messages have a thanks row (the thanks action posts them with this type)
    extensions = await thanks_extensions(
        conn, cid, [r["id"] for r in every if r["message_type"] == THANKS_MESSAGE_TYPE], base
    )

    data.users = {u["id"]: u for u in users}
    data.groups = {g["id"]: g for g in groups}
    data.recipients = recipients
    data.comment_recipients = comment_recipients
    data.comment_tags = comment_tags
    data.tags = tags
    data.resources = {r["id"]: r for r in resources}
    data.attachments = attachments
    data.media_files = media
    thread: dict[int, list[asyncpg.Record]] = {}
    for c in comments:
        thread.setdefault(c["message_id"], []).append(c)
    data.comments = thread
    top: dict[tuple[int, int | None], list[asyncpg.Record]] = {}
    for lk in likes:
        top.setdefault((lk["message_id"], lk["comment_id"]), []).append(lk)
    data.likes = top
    data.polls = {p["message_id"]: p for p in polls}
    data.shared = {s["id"]: s for s in shared}
    data.extensions = extensions
    return data


def _addressing(
    rows: Iterable[Mapping[str, Any]], all_users: set[int], all_groups: set[int],
) -> tuple[dict[int, list[dict[str, int | None]]], dict[int, list[str]]]:
    """Whom each message (its extras) or comment addresses, as (user_id, group_id) rows as
    render_recipients reads them, and its tags, by id; adds the users and groups they name to
    what the page reads."""
    recipients: dict[int, list[dict[str, int | None]]] = {}
    tags: dict[int, list[str]] = {}
    for r in rows:
        if r["recipient_user_ids"]:
            recipients[r["id"]] = _recipient_rows(
                r["recipient_user_ids"], r["recipient_group_ids"] or (), all_users, all_groups)
        if r["tag_names"]:
            tags[r["id"]] = r["tag_names"]
    return recipients, tags


def _recipient_rows(
    user_ids: Sequence[int | None], group_ids: Sequence[int | None],
    all_users: set[int], all_groups: set[int],
) -> list[dict[str, int | None]]:
    """Aligned recipient ids as rows of user_id and group_id; adds their users and groups to
    what the page reads."""
    out: list[dict[str, int | None]] = []
    for user_id, group_id in zip(user_ids, group_ids, strict=True):
        if user_id is not None:
            all_users.add(user_id)
        elif group_id is not None:
            all_groups.add(group_id)
        out.append({"user_id": user_id, "group_id": group_id})
    return out


async def render_messages(
    conn: Conn,
    viewer: Viewer,
    rows: Sequence[asyncpg.Record],
    base: str,
    limits: Limits = Limits(),
) -> list[dict[str, Any]]:
    data = await load_feed(conn, viewer, rows, base, limits)
    return [message(r, data) for r in rows]


async def render_message(
    conn: Conn, viewer: Viewer, message_id: int, base: str, limits: Limits = Limits()
) -> dict[str, Any]:
    """One message the viewer may read, rendered (404 otherwise)."""
    row = await access_message(conn, viewer, message_id)
    return (await render_messages(conn, viewer, [row], base, limits))[0]


async def render_created(
    conn: Conn, viewer: Viewer, message_id: int, base: str
) -> dict[str, Any]:
    """What POST /api/messages answers for the message just created (404 when not readable)."""
    row = await message_storage.by_id(
        conn, viewer.community_id, viewer.id, viewer.is_external, message_id
    )
    if row is None:
        raise NotFound("Message not found")
    return created_message(row, await load_feed(conn, viewer, [row], base))


@dataclass(frozen=True)
class MessagePage:
    messages: list[Form]  # dicts, or JSON kept by app.render.page_messages
    next_page: int | None


Opening = Callable[[asyncpg.Connection, Viewer], Awaitable[int | None]]
"""A step a list runs before its page, on the connection the page is read on (marking its
stream read: app.actions.message_lists.mark_home_read). It may answer the viewer's count of
groups, read by its own statement, which a Home page then does not read again."""


async def list_messages(
    pool: asyncpg.Pool,
    viewer: Viewer,
    base: str,
    query: MessageQuery,
    *,
    page: int,
    per_page: int,
    limits: Limits = Limits(),
    opening: Opening | None = None,
) -> MessagePage:
    """The message list loader: a page of what `query` selects among what the viewer may read,
    newest interaction first, rendered. Reads per_page + 1 rows to know whether a next page
    exists. `opening` runs first, on the same connection (one pool acquire per page)."""
    async with connection(pool) as conn:
        home_groups = None if opening is None else await opening(conn, viewer)
        rows = await message_storage.list_page(
            conn, viewer.community_id, viewer.id, viewer.is_external, query,
            offset=(page - 1) * per_page, limit=per_page + 1, home_groups=home_groups,
        )
        more = len(rows) > per_page
        rows = rows[:per_page]
        # the kept messages need no reading: only the others' threads are read and rendered
        shown = (limits.comments, limits.likes, limits.comment_likes)
        kept = kept_forms(rows, viewer, base, shown)
        missed = [row for row, form in zip(rows, kept, strict=True) if form is None]
        rendered = iter(render_and_keep(
            missed, await load_feed(conn, viewer, missed, base, limits), shown))
    forms: list[Form] = [form if form is not None else next(rendered) for form in kept]
    return MessagePage(forms, page + 1 if more else None)


# --- bodies: mentions, tags, links -----------------------------------------------------------


@dataclass
class Body:
    """A body's html and what it refers to."""

    html: str
    mentions: list[Recipient]
    tags: list[str]  # the #tags' topic names (storage.topics.distinct_names)
    topic_ids: list[int]  # empty when process_body was told not to write the topics
    resource_ids: list[int]
    users: list[MentionableUserRow]  # the users its @names may mean (BASIC rows)

    @property
    def mentioned_user_ids(self) -> list[int]:
        return [r.user_id for r in self.mentions if r.user_id is not None]


async def process_body(
    conn: asyncpg.Connection,
    viewer: Viewer,
    base: str,
    text: str,
    extra_urls: Sequence[str] = (),
    *,
    checked: str | None = None,
    field: str = "message[body]",
    write_topics: bool = True,
) -> Body:
    """Refuse `checked` (the whole text posted, e.g. title and body) when it contains a
    blocked word (a 422 on `field`, as content_filters.check_text), resolve `@name` (a
    username, else a groupname whose content the author may read), upsert `#tags` as topics
    (unless `write_topics` is False: the caller's own statement does, from Body.tags) and URLs
    as external resources, and render the html. The blocked words are read with the mentions."""
    cid = viewer.community_id
    names = extract_mentions(text)
    found = await message_storage.mentionable(
        conn, cid, viewer.id, viewer.is_external, names, words=bool(checked)
    )
    if checked:
        check_words(found.words, checked, field=field)
    user_rows, group_rows = found.users, found.groups
    targets: dict[str, MentionTarget] = {}
    for g in group_rows:
        targets[g["name"].lower()] = MentionTarget(
            "group", g["id"], g["name"], group_url(base, g["id"], g["name"]), None
        )
    for u in user_rows:  # a username wins over a groupname
        targets[u["name"].lower()] = MentionTarget(
            "user", u["id"], u["name"], user_url(base, u["id"], u["name"]),
            f"/api/users/{u['id']}-{u['name'].lower()}.json",
        )
    mentions: list[Recipient] = []
    for name in names:
        target = targets.get(name.lower())
        if target is None:
            continue
        if target.kind == "user":
            mentions.append(Recipient(user_id=target.id, reason="mention"))
        else:
            mentions.append(Recipient(group_id=target.id, reason="mention"))
    html = render_html(text, base_url=base, mentions=targets)
    tags = topic_storage.distinct_names(extract_hashtags(text))
    topic_ids = await topic_storage.upsert(conn, cid, tags, viewer.id) if write_topics else []
    urls = [*extract_urls(text), *extra_urls]
    resource_ids = await message_storage.upsert_resources(conn, cid, urls)
    return Body(html, mentions, tags, topic_ids, resource_ids, user_rows)


# --- posting ---------------------------------------------------------------------------------


@dataclass
class NewMessage:
    """What a new message says. `message_type` None: `poll` when a poll is bound, `link` when a
    url is given, else `status_message`; `action` None: derived from the type (ACTIONS)."""

    body: str = ""
    title: str = ""
    url: str | None = None
    group_id: int | None = None
    message_type: str | None = None
    action: str | None = None
    verb: str | None = None
    attachment_ids: Sequence[int] = ()
    poll_id: int | None = None
    # message[recipients]: usernames or groupnames (a leading @ is ignored), and/or ids
    recipient_names: Sequence[str] = ()
    recipient_user_ids: Sequence[int] = ()
    recipient_group_ids: Sequence[int] = ()
    days_of_stickiness: int = 0
    source: str | None = "api"
    external_system_id: int | None = None
    client_provided_guid: str | None = None
    shared_message_id: int | None = None
    extensions: Sequence[Mapping[str, Any]] = ()
    # False: post into the group without being a member (incoming webhooks act for a group)
    require_membership: bool = True
    # Parameter names for 422s (views of other resources may name theirs differently).
    param_prefix: str = field(default="message")


def _param(new: NewMessage, name: str) -> str:
    return f"{new.param_prefix}[{name}]"


async def _check_group(
    conn: asyncpg.Connection, viewer: Viewer, new: NewMessage
) -> asyncpg.Record | None:
    if new.group_id is None:
        if viewer.is_external:
            raise Forbidden("External contributors can only post into their groups")
        return None
    group = await message_storage.group_for_posting(
        conn, viewer.community_id, viewer.id, viewer.is_external, new.group_id
    )
    if group is None or not group["readable"]:
        raise Invalid.field(_param(new, "group_id"), "is not a group you can post to")
    if group["state"] == "archived":
        raise Forbidden("This group is archived: nothing can be posted in it")
    is_admin = group["viewer_role"] == "admin" or viewer.is_admin
    if new.require_membership and group["viewer_role"] is None and not viewer.is_admin:
        raise Forbidden("Only members of the group can post in it")
    if not group["post_enabled"] and not is_admin and new.require_membership:
        raise Forbidden("Only the group's admins can post in it")
    return group


async def _addressed(
    conn: asyncpg.Connection, viewer: Viewer, new: NewMessage
) -> list[Recipient]:
    """message[recipients]: names or ids of users of the community and of groups whose content
    the poster may read; anything else is a 422."""
    cid = viewer.community_id
    names = [n.strip().lstrip("@") for n in new.recipient_names if n.strip().lstrip("@")]
    named = await message_storage.mentionable(conn, cid, viewer.id, viewer.is_external, names)
    users = {u["name"].lower(): u["id"] for u in named.users}
    groups = {g["name"].lower(): g["id"] for g in named.groups}
    out: list[Recipient] = []
    unknown: list[str] = []
    for name in names:
        if name.lower() in users:
            out.append(Recipient(user_id=users[name.lower()], reason="addressed"))
        elif name.lower() in groups:
            out.append(Recipient(group_id=groups[name.lower()], reason="addressed"))
        else:
            unknown.append(name)
    if new.recipient_user_ids:
        found = {u["id"] for u in await user_storage.by_ids(conn, cid, new.recipient_user_ids)}
        unknown.extend(str(i) for i in new.recipient_user_ids if i not in found)
        out.extend(Recipient(user_id=i, reason="addressed")
                   for i in new.recipient_user_ids if i in found)
    for group_id in new.recipient_group_ids:
        group = await message_storage.group_for_posting(
            conn, cid, viewer.id, viewer.is_external, group_id
        )
        if group is None or not group["readable"]:
            unknown.append(str(group_id))
        else:
            out.append(Recipient(group_id=group_id, reason="addressed"))
    if unknown:
        raise Invalid.field(
            _param(new, "recipients"), f"names no user or group: {', '.join(unknown)}"
        )
    return out


async def _check_shared(
    conn: asyncpg.Connection, viewer: Viewer, new: NewMessage
) -> None:
    if new.shared_message_id is None:
        return
    row = await message_storage.by_id(
        conn, viewer.community_id, viewer.id, viewer.is_external, new.shared_message_id
    )
    if row is None or not row["readable"] or not is_shareable(row):
        raise Invalid.field(_param(new, "shared_message_id"), "is not a message you can share")


def _message_type(new: NewMessage) -> str:
    if new.message_type:
        return new.message_type
    if new.poll_id is not None:
        return "poll"
    if new.url:
        return "link"
    return "status_message"


@dataclass
class Posted:
    """A message just posted, and what its author's rendering needs of what the posting already
    knows (so that the 201 reads nothing again): its row, its recipients as `recipients` would
    read them, its tag names and its claimed attachments."""

    row: NewMessageRow
    recipients: list[dict[str, int | None]]
    tags: list[str]
    attachments: list[asyncpg.Record]
    users: list[MentionableUserRow]  # users the posting read (those its @names may mean)


async def insert_message(w: Work, viewer: Viewer, base: str, new: NewMessage) -> int:
    """Post a message in the caller's unit of work (for actions that write more in it, e.g.
    thanks), with its notifications (at_mentions, broadcast), their push jobs and events.
    Returns the message id."""
    return int((await _post(w, viewer, base, new)).row["id"])


async def _post(w: Work, viewer: Viewer, base: str, new: NewMessage) -> Posted:
    conn = w.conn
    body = new.body or ""
    title = (new.title or "").strip()
    url = (new.url or "").strip() or None
    if not (body.strip() or title or url or new.attachment_ids or new.poll_id is not None
            or new.shared_message_id is not None):
        raise Invalid.field(_param(new, "body"), "can't be blank")
    message_type = _message_type(new)
    announcement = message_type == ANNOUNCEMENT
    if announcement and not viewer.is_admin:
        raise Forbidden("Only a community admin can make an announcement")
    group = await _check_group(conn, viewer, new)
    if new.poll_id is not None and not await poll_storage.lock_unbound(
        conn, viewer.community_id, viewer.id, new.poll_id
    ):
        raise Invalid.field(_param(new, "poll_id"), "is not a poll of yours without a message")
    await _check_shared(conn, viewer, new)
    addressed = await _addressed(conn, viewer, new)
    processed = await process_body(conn, viewer, base, body, [url] if url else [],
                                   checked=f"{title}\n{body}", field=_param(new, "body"),
                                   write_topics=False)
    days = min(max(new.days_of_stickiness, 0), MAX_STICKINESS_DAYS) if announcement else 0
    recipients = [Recipient(group_id=group["id"], reason="group")] if group is not None else []
    recipients += [*processed.mentions, *addressed]
    # the message, its recipients and its topics (upserted) in one statement
    row = await message_storage.insert(
        conn, viewer.community_id, user_id=viewer.id,
        group_id=group["id"] if group is not None else None,
        external_system_id=new.external_system_id, title=title, body=body,
        html_body=processed.html,
        action=new.action if new.action is not None else ACTIONS.get(message_type, ""),
        verb=new.verb, message_type=message_type, external_url=url, source=new.source,
        is_announcement=announcement, days_of_stickiness=days,
        shared_message_id=new.shared_message_id,
        client_provided_guid=new.client_provided_guid,
        external_resource_ids=processed.resource_ids, extensions=list(new.extensions),
        recipients=recipients, topic_names=processed.tags,
    )
    message_id = row["id"]
    if new.poll_id is not None:
        await poll_storage.bind(conn, viewer.community_id, new.poll_id, message_id)
    attached: list[asyncpg.Record] = []
    if new.attachment_ids:
        attached = await claim_attachments(
            conn, viewer, new.attachment_ids, "message", message_id)
    mentioned = list(dict.fromkeys(
        [*processed.mentioned_user_ids, *(r.user_id for r in addressed if r.user_id)]
    ))
    w.emit(*await notify_new_message(
        conn, viewer.community_id, message_id, viewer.id, mentioned, message=row
    ))
    return Posted(
        row, message_storage.stored_recipients(recipients), list(row["tag_names"]),
        sorted(attached, key=lambda a: a["id"]), processed.users,
    )


async def create_message(
    pool: asyncpg.Pool, viewer: Viewer, base: str, new: NewMessage, hub: Hub | None = None
) -> int:
    """Post a message in its own unit of work (its events published with `hub`); its id."""
    async with work(pool, hub, viewer.community_id) as w:
        return await insert_message(w, viewer, base, new)


async def create_and_render(
    pool: asyncpg.Pool, viewer: Viewer, base: str, new: NewMessage, hub: Hub | None = None
) -> dict[str, Any]:
    """POST /api/messages: post the message in its own unit of work and answer it rendered
    for its author (`created_message`), from what the posting wrote and read: only what the
    posting did not read is read, after the commit (rendering inside the transaction would
    hold its row locks, a hot #tag's topic row among them, for longer)."""
    async with work(pool, hub, viewer.community_id) as w:
        posted = await _post(w, viewer, base, new)
    return created_message(posted.row, await _posted_feed(pool, viewer, posted, base))


async def posted_users(
    conn: Conn, viewer: Viewer, mentioned: Sequence[UserRow],
    recipients: Sequence[Mapping[str, int | None]],
) -> dict[int, UserRow]:
    """The users a message or comment just posted shows, by id: its author (the viewer's row,
    read by the authentication; system viewers carry none) and the users it addresses, from
    the rows its mentions' resolution read (`mentioned`), reading only the others."""
    users = {u["id"]: u for u in mentioned}
    if viewer.row is not None:
        users[viewer.id] = viewer.row
    wanted = {r["user_id"] for r in recipients if r["user_id"] is not None} | {viewer.id}
    missing = wanted - users.keys()
    if missing:
        users.update((u["id"], u) for u in await user_storage.by_ids(
            conn, viewer.community_id, list(missing)))
    return users


async def _posted_feed(conn: Conn, viewer: Viewer, posted: Posted, base: str) -> FeedData:
    """load_feed of a message just posted, reading only what the posting does not know: the
    recipients' users and groups, external resources, the poll, and (for a share or a thanks
    message) everything, as load_feed does. Its comments and likes are left out: made after
    the commit, they are not part of what the posting answers."""
    row = posted.row
    if row["shared_message_id"] is not None or row["message_type"] == THANKS_MESSAGE_TYPE:
        return await load_feed(conn, viewer, [row], base)
    cid = viewer.community_id
    mid = row["id"]
    data = FeedData(base, viewer)
    data.users = await posted_users(conn, viewer, posted.users, posted.recipients)
    group_ids = {r["group_id"] for r in posted.recipients if r["group_id"] is not None}
    if row["group_id"] is not None:
        group_ids.add(row["group_id"])
    groups = await message_storage.groups(conn, cid, viewer.id, viewer.is_external,
                                          list(group_ids))
    resources = await message_storage.resources(conn, cid, row["external_resource_ids"] or [])
    polls = (await poll_storage.of_messages(conn, cid, viewer.id, [mid])
             if row["message_type"] == "poll" else [])
    data.groups = {g["id"]: g for g in groups}
    data.recipients = {mid: list(posted.recipients)}
    data.tags = {mid: posted.tags} if posted.tags else {}
    data.resources = {r["id"]: r for r in resources}
    if posted.attachments:
        rendered, files = attachments_and_media_files(posted.attachments, base)
        data.attachments = {("message", mid): rendered}
        data.media_files = {("message", mid): files}
    data.polls = {p["message_id"]: p for p in polls}
    return data


# --- editing, deleting, hiding ---------------------------------------------------------------


@dataclass
class MessageChanges:
    """PUT /api/messages/:id: None leaves a field as it is."""

    body: str | None = None
    title: str | None = None
    url: str | None = None


async def update_message(
    pool: asyncpg.Pool, viewer: Viewer, base: str, message_id: int, changes: MessageChanges,
    hub: Hub | None = None,
) -> None:
    async with work(pool, hub, viewer.community_id) as w:
        conn = w.conn
        row = await access_message(conn, viewer, message_id)
        if not may_edit_message(viewer, row):
            raise Forbidden("Only the author, a group admin or a community admin can edit it")
        if not may_comment(viewer, row):
            raise Forbidden("This group is archived: its messages can't be changed")
        body = changes.body if changes.body is not None else row["body"]
        title = (changes.title if changes.title is not None else row["title"]).strip()
        url = (changes.url.strip() or None) if changes.url is not None else row["external_url"]
        if not (body.strip() or title or url):
            raise Invalid.field("message[body]", "can't be blank")
        before = {r["user_id"] for r in await message_storage.recipients(conn, [message_id])}
        processed = await process_body(conn, viewer, base, body, [url] if url else [],
                                       checked=f"{title}\n{body}")
        await message_storage.update_content(
            conn, viewer.community_id, message_id, title=title, body=body,
            html_body=processed.html, external_url=url,
            external_resource_ids=processed.resource_ids,
        )
        await message_storage.clear_message_mentions(conn, message_id)
        await message_storage.add_recipients(
            conn, viewer.community_id, message_id, processed.mentions
        )
        await topic_storage.set_message_topics(conn, viewer.community_id, message_id,
                                               processed.topic_ids)
        new_ids = [i for i in processed.mentioned_user_ids if i not in before]
        w.emit(*await notify_message_mentions(conn, viewer.community_id, message_id, new_ids))


async def delete_message(
    pool: asyncpg.Pool, viewer: Viewer, message_id: int, blobs: BlobStore | None = None
) -> None:
    """Delete a message with its comments, likes, flags, poll and attachments (their blobs are
    removed after commit when a blob store is given). The notifications about it and its
    comments go with it (foreign keys, migration 0009); their pending pushes are skipped by the
    worker's re-check."""
    async with work(pool, None, viewer.community_id) as w:
        conn = w.conn
        row = await access_message(conn, viewer, message_id)
        if not may_edit_message(viewer, row):
            raise Forbidden("Only the author, a group admin or a community admin can delete it")
        comment_ids = await comment_storage.ids_of_message(conn, message_id)
        files = await attachment_storage.delete_for_subjects(
            conn, viewer.community_id, "message", [message_id]
        )
        files += await attachment_storage.delete_for_subjects(
            conn, viewer.community_id, "comment", comment_ids
        )
        if not await message_storage.delete(conn, viewer.community_id, message_id):
            raise NotFound("Message not found")
        if blobs is not None and files:
            store = blobs
            w.after(lambda: delete_blobs(store, files))


async def hide_message(
    pool: asyncpg.Pool, viewer: Viewer, group_id: int, message_id: int
) -> None:
    """A group admin (or community admin) takes a message out of the group's stream. The
    message stays readable by id and in the other streams."""
    async with work(pool, None, viewer.community_id) as w:
        conn = w.conn
        group = await message_storage.group_for_posting(
            conn, viewer.community_id, viewer.id, viewer.is_external, group_id
        )
        if group is None or not group["readable"]:
            raise NotFound("Group not found")
        if group["viewer_role"] != "admin" and not viewer.is_admin:
            raise Forbidden("Only a group admin can hide messages")
        row = await message_storage.by_id(
            conn, viewer.community_id, viewer.id, viewer.is_external, message_id
        )
        if row is None or not row["readable"] or row["group_id"] != group_id:
            raise Invalid.field("message_id", "is not a message of this group")
        await message_storage.hide(conn, viewer.community_id, group_id, message_id, viewer.id)
