"""The messages of a list page, each kept as its JSON under everything it is rendered from
(issue 13: a polled page renders the same 20 threads, 2,000 dicts, again and again), so that
a page whose messages are all kept reads no comment, like or user at all.

What a message's JSON is made of is its page row (every column, the viewer-dependent ones
included: the viewer's flag, group role, whether its group is listed to them) and what the row
does not hold: its comments, likes, recipients and tags, and the users, links and topics they
show. The page query answers, with each row, two versions that every change of those bumps in
its own transaction (migration 0021): its thread's (comments, likes, recipients, topics,
comment attachments) and its community's directory's (users' embedded columns, links, topic
names). So the key of a message is its row with both versions, the base URL, the viewer's role
and the page's limits (how many comments and likes it shows). The same key renders the same
JSON but for what app.access's may_* rules and the likes read of the viewer: whether the
viewer is one of the message's people (its author, the authors of the comments shown, the
users of the likes shown), and whether they like it or one of its comments (the row's
`viewer_liked`: their own like is shown first, even one beyond the likes others see, so no two
likers' forms are alike). So a kept message holds its people and one form for anyone else
plus one for each person or liker who read it.

A page's versions are read before its comments and likes (another statement, a later
snapshot), so a form is never older than the versions it is kept under, and all the forms of
one key are of one set of people (a form of other people replaces them): never stale, never
another viewer's flags.

Kept only where the key covers every input: not a message with attachments or media (its own
or its comments'), a poll, a shared message or extensions, nor one addressing a group other
than its own (whether a group is listed depends on the viewer's memberships), nor a row without
versions (a search's). Those are rendered every time.

Bounded: SIZE forms of at most MAX_FORM_BYTES of JSON each, emptied whenever full.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import orjson

from app.render.feed import FeedData
from app.render.messages import message
from app.responses import kept_json
from storage.rows import MessageRow

if TYPE_CHECKING:
    from app.context import Viewer

Row = Mapping[str, Any]
Form = dict[str, Any] | orjson.Fragment
Key = tuple[Any, ...]
Limits = tuple[int, int, int]  # comments, likes and comment likes shown (actions.Limits)

# About 9 KB a form with its key (tracemalloc, the bench's messages): some 5 MB when full. At
# most MAX_FORM_BYTES of JSON, and the key's texts (the same texts, up to 4 bytes a character
# as Python strings) at most 4 times that: 40 MB at worst.
SIZE = 512
MAX_FORM_BYTES = 16 * 1024


@dataclass(slots=True)
class _Kept:
    people: frozenset[int]
    forms: dict[int | None, orjson.Fragment]  # by person, None: anyone else


class Store:
    """Kept messages by key, and their count of forms (the bound)."""

    def __init__(self) -> None:
        self.entries: dict[Key, _Kept] = {}
        self.forms = 0

    def keep(self, key: Key, people: frozenset[int], who: int | None,
             form: orjson.Fragment) -> None:
        kept = self.entries.get(key)
        if kept is not None and kept.people != people:  # forms of a newer thread: its own
            self.forms -= len(kept.forms)
            del self.entries[key]
            kept = None
        if kept is None or who not in kept.forms:  # one form more
            if self.forms >= SIZE:
                self.entries.clear()
                self.forms = 0
                kept = None
            if kept is None:
                kept = self.entries[key] = _Kept(people, {})
            self.forms += 1
        kept.forms[who] = form


_KEPT = Store()


def kept_forms(
    rows: Sequence[MessageRow], viewer: Viewer, base: str, limits: Limits,
) -> list[orjson.Fragment | None]:
    """The kept JSON of each row for this viewer, None where there is none."""
    out: list[orjson.Fragment | None] = []
    for row in rows:
        key = _key(row, viewer, base, limits)
        kept = _KEPT.entries.get(key) if key is not None else None
        if kept is None:
            out.append(None)
        else:
            out.append(kept.forms.get(_who(row, viewer.id, kept.people)))
    return out


def render_and_keep(rows: Sequence[MessageRow], data: FeedData, limits: Limits) -> list[Form]:
    """`message(row, data)` of each row, kept as JSON where its key covers every input."""
    return [_render(row, data, limits) for row in rows]


def _render(row: MessageRow, data: FeedData, limits: Limits) -> Form:
    viewer = data.viewer
    key = _key(row, viewer, data.base, limits)
    people = _people(row, data) if key is not None else None
    if key is None or people is None:
        return message(row, data)
    if cast("Row", row)["viewer_liked"]:
        people = frozenset()  # every liker has a form of their own (_who), no one else's
    body = kept_json(message(row, data))
    form = orjson.Fragment(body)
    if len(body) <= MAX_FORM_BYTES:
        _KEPT.keep(key, people, _who(row, viewer.id, people), form)
    return form


def _who(row: MessageRow, viewer_id: int, people: frozenset[int]) -> int | None:
    """Whose form of the message the viewer gets: their own if they are one of its people or
    like it or one of its comments (their like is shown first, even one beyond the likes others
    see, storage.likes.TOP: likers differ from each other), else anyone else's (None)."""
    return viewer_id if viewer_id in people or cast("Row", row)["viewer_liked"] else None


def _key(row: MessageRow, viewer: Viewer, base: str, limits: Limits) -> Key | None:
    """The row's values with its versions, the base URL, the viewer's role and the limits;
    None for a row without versions, or with extensions (never kept, and its one json column:
    the only value that may not be hashable once arrays are tuples)."""
    if "thread_version" not in cast("Row", row) or row["extensions"]:  # a page row's column
        return None
    values = tuple(row.values())
    if list in map(type, values):
        values = tuple([tuple(v) if type(v) is list else v for v in values])
    return (base, viewer.role, limits, values)


def _people(row: MessageRow, data: FeedData) -> frozenset[int] | None:
    """Whose flags on this message differ from anyone else's (its author, the shown comments'
    authors, the shown likes' users), or None when the message shows what the key does not
    cover."""
    mid = row["id"]
    attachments, media = data.attachments, data.media_files
    if (row["shared_message_id"] or row["extensions"] or mid in data.polls
            or mid in data.extensions or ("message", mid) in attachments
            or ("message", mid) in media
            or _foreign_group(data.recipients.get(mid, ()), row["group_id"])):
        return None
    people = {row["user_id"]}
    people.update(like["user_id"] for like in data.likes.get((mid, None), ()))
    for c in data.comments.get(mid, ()):
        cid = c["id"]
        if (("comment", cid) in attachments or ("comment", cid) in media
                or _foreign_group(data.comment_recipients.get(cid, ()), row["group_id"])):
            return None
        people.add(c["user_id"])
        people.update(like["user_id"] for like in data.likes.get((mid, cid), ()))
    return frozenset(people)


def _foreign_group(recipients: Sequence[Row], own: int | None) -> bool:
    """Whether these recipients name a group other than the message's own."""
    return any(r["group_id"] is not None and r["group_id"] != own for r in recipients)
