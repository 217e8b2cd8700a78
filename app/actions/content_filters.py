"""Content filters: words a community admin blocks; posts containing them are refused.

Every member may read the list (clients use it to warn before posting); only community admins
add or remove words. A word (or phrase) matches as a whole word, in any letter case, anywhere
in a text: "darn" blocks "Darn it" and "DARN!", not "darning".

`check_text(conn, community_id, text)` is what the posting paths call (messages, comments,
thanks) inside their transaction: it raises a 422 naming the field when the text contains a
blocked word, and runs one query. Bodies with @mentions and #tags (messages, comments) read the
words with their mentions instead (app.actions.messages.process_body, `check_words`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import asyncpg

from app.access import require_admin
from app.actions.work import work
from app.context import Viewer
from app.errors import Conflict, Invalid, NotFound
from app.params import Page
from storage import content_filters
from storage.db import Conn

MAX_WORD = 100


def _pattern(word: str) -> str:
    parts = [re.escape(p) for p in word.split()]
    return r"(?<!\w)" + r"\s+".join(parts) + r"(?!\w)"


def blocked_words(words: Iterable[str], text: str) -> list[str]:
    """The blocked words that occur in `text`, in the order given."""
    return [w for w in words if w.split() and re.search(_pattern(w), text, re.IGNORECASE)]


async def check_text(
    conn: Conn, community_id: int, text: str | None, *, field: str = "message[body]"
) -> None:
    """Refuse (422 on `field`) a text containing a word the community blocks."""
    if not text:
        return
    check_words(await content_filters.words(conn, community_id), text, field=field)


def check_words(words: Iterable[str], text: str, *, field: str) -> None:
    """check_text with the community's blocked words already read."""
    found = blocked_words(words, text)
    if found:
        quoted = ", ".join(f'"{w}"' for w in found)
        raise Invalid.field(
            field, f"contains blocked words: {quoted}",
            message=f"{_label(field)} contains words this community does not allow: {quoted}",
        )


def _label(field: str) -> str:
    return field.rstrip("]").split("[")[-1].replace("_", " ").capitalize()


def normalize_word(word: str | None) -> str:
    value = " ".join((word or "").split())
    if not value:
        raise Invalid.field("content_filter[word]", "can't be blank")
    if len(value) > MAX_WORD:
        raise Invalid.field("content_filter[word]", f"is too long (maximum is {MAX_WORD})")
    if not re.search(r"\w", value):
        raise Invalid.field("content_filter[word]", "must contain a letter or digit")
    return value


async def create_filter(
    pool: asyncpg.Pool, viewer: Viewer, word: str | None
) -> asyncpg.Record:
    require_admin(viewer)
    value = normalize_word(word)
    try:
        async with work(pool, None, viewer.community_id) as w:
            return await content_filters.insert(
                w.conn, viewer.community_id, value, viewer.id or None
            )
    except asyncpg.UniqueViolationError:
        raise Conflict("That word is already filtered",
                       fields={"content_filter[word]": ["has already been taken"]}) from None


async def delete_filter(pool: asyncpg.Pool, viewer: Viewer, filter_id: int) -> None:
    require_admin(viewer)
    async with work(pool, None, viewer.community_id) as w:
        if not await content_filters.delete(w.conn, viewer.community_id, filter_id):
            raise NotFound("Content filter not found")


async def list_filters(conn: Conn, viewer: Viewer, page: Page) -> list[asyncpg.Record]:
    return await content_filters.list_filters(conn, viewer.community_id, page.offset, page.limit)
