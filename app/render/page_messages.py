"""The messages of a list page, each kept as its JSON under everything it is rendered from
(issue 13: a polled page renders the same 20 threads, 2,000 dicts, again and again).

The key of a message is every input `app.render.messages.message` reads for it: its row, its
comments' and likes' rows, the rows of every user and group it shows (the forms' own keys),
its tags, recipients and links, the base URL, and what the viewer-dependent flags are made of
(the viewer's role, and the viewer's id only when the viewer wrote the message, one of its
comments or one of its likes; the viewer's group role is a column of the row). The same key
always renders the same JSON, so an entry can never be stale (an edit, a comment, a like, a
renamed user is another key) and never serves a form meant for another viewer; viewers whose
flags come out alike share it. Messages whose inputs the key does not
cover (attachments, media, a poll, a shared message, stored or thanks extensions, a link's
oEmbed, values that cannot be hashed) are rendered as before, every time.

Rows are keyed by their values in column order: each kind comes from one statement per shape
(a page's messages, the comments, the likes), and two shapes of one kind differ in length.

Bounded: SIZE entries of at most MAX_FORM_BYTES of JSON each, emptied whenever full.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from app.render.feed import USER_KEY, FeedData
from app.render.messages import message
from app.responses import kept_json
from storage.rows import MessageRow

Row = Mapping[str, Any]
Form = dict[str, Any] | orjson.Fragment

# About 9 KB an entry, JSON and key (tracemalloc, the bench's messages): some 5 MB when full.
# At most MAX_FORM_BYTES of JSON, and the key's texts (the same texts, up to 4 bytes a
# character as Python strings) at most 4 times that: 40 MB at worst.
SIZE = 512
MAX_FORM_BYTES = 16 * 1024
_FORMS: dict[tuple[Any, ...], orjson.Fragment] = {}


def page_messages(rows: Sequence[MessageRow], data: FeedData) -> list[Form]:
    """`message(row, data)` of each row, as kept JSON where the row's inputs allow it."""
    users = {user_id: USER_KEY(user) for user_id, user in data.users.items()}
    return [_form(row, data, users) for row in rows]


def _form(row: MessageRow, data: FeedData, users: Mapping[int, tuple[Any, ...]]) -> Form:
    key = _key(row, data, users)
    if key is None:
        return message(row, data)
    try:
        form = _FORMS.get(key)
    except TypeError:  # a value that cannot be hashed (a json column's object, say)
        return message(row, data)
    if form is None:
        body = kept_json(message(row, data))
        form = orjson.Fragment(body)
        if len(body) <= MAX_FORM_BYTES:
            if len(_FORMS) >= SIZE:
                _FORMS.clear()
            _FORMS[key] = form
    return form


def _values(row: Row) -> tuple[Any, ...]:
    """A row's values, arrays as tuples (most comments and likes have none: their tuple)."""
    values = tuple(row.values())
    if list in map(type, values):
        return tuple([tuple(v) if type(v) is list else v for v in values])
    return values


def _named(row: Row) -> tuple[Any, ...]:
    """A row's names and values: for the groups, which come in two shapes of one length (a
    page row's group, the groups statement's rows)."""
    return tuple([(k, tuple(v) if type(v) is list else v) for k, v in row.items()])


def _recipients(
    rows: Iterable[Row], data: FeedData, users: Mapping[int, tuple[Any, ...]],
) -> tuple[Any, ...]:
    out: list[Any] = []
    for r in rows:
        user_id = r["user_id"]
        if user_id is not None:
            out.append(("u", users.get(user_id, user_id)))
        else:
            group = data.groups.get(r["group_id"])
            out.append(("g", _named(group) if group is not None else r["group_id"]))
    return tuple(out)


def _resources(ids: Sequence[int] | None, data: FeedData) -> tuple[Any, ...] | None:
    """The rows of these links, or None for a link with an oEmbed: its JSON decodes to Python
    values that compare equal where their JSON differs (1, 1.0 and true)."""
    rows = [data.resources[i] for i in ids or () if i in data.resources]
    if any(r["oembed"] is not None for r in rows):
        return None
    return tuple(map(_values, rows))


def _likes(
    rows: Sequence[Row], users: Mapping[int, tuple[Any, ...]], people: set[int],
) -> tuple[Any, ...]:
    out = []
    for like in rows:
        user_id = like["user_id"]
        people.add(user_id)
        out.append((_values(like), users[user_id]))
    return tuple(out)


def _key(
    row: MessageRow, data: FeedData, users: Mapping[int, tuple[Any, ...]],
) -> tuple[Any, ...] | None:
    """Everything `message(row, data)` reads, or None when the row needs what this does not
    cover. `users`: the key of each user of the page (USER_KEY)."""
    mid = row["id"]
    attachments, media = data.attachments, data.media_files
    if (row["shared_message_id"] or row["extensions"] or mid in data.polls
            or mid in data.extensions or ("message", mid) in attachments
            or ("message", mid) in media):
        return None
    people = {row["user_id"]}
    comments = []
    for c in data.comments.get(mid, ()):
        cid = c["id"]
        if ("comment", cid) in attachments or ("comment", cid) in media:
            return None
        links = _resources(c["external_resource_ids"], data)
        if links is None:
            return None
        people.add(c["user_id"])
        comments.append((
            _values(c), users[c["user_id"]],
            _likes(data.likes.get((mid, cid), ()), users, people),
            tuple(data.comment_tags.get(cid, ())),
            _recipients(data.comment_recipients.get(cid, ()), data, users), links,
        ))
    links = _resources(row["external_resource_ids"], data)
    if links is None:
        return None
    likes = _likes(data.likes.get((mid, None), ()), users, people)
    group_id = row["group_id"]
    group = data.groups.get(group_id) if group_id is not None else None
    viewer = data.viewer
    return (
        data.base, viewer.role, viewer.id if viewer.id in people else None,
        _values(row), users[row["user_id"]],
        _named(group) if group is not None else None,
        tuple(data.tags.get(mid, ())), _recipients(data.recipients.get(mid, ()), data, users),
        links, tuple(comments), likes,
    )
