"""Find URLs, ``@mentions`` and ``#hashtags`` in plain message text (pure, no I/O)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

__all__ = ["Entity", "extract_hashtags", "extract_mentions", "extract_urls", "iter_entities"]

EntityKind = Literal["url", "www", "mention", "hashtag"]

# Characters a URL may run over; quotes, angle brackets and backticks end it.
_URL_CHAR = r"[^\s<>\"'`]"
_TRAILING_URL_PUNCT = ".,;:!?)"

# One left-to-right scanner, so that a `#` or `@` inside a URL is never a tag or mention.
# Every branch starts at an h, w, @ or #; the leading lookahead lets the scan pass over other
# characters without trying the branches' lookbehinds (4x faster on a long line).
_ENTITY_RE = re.compile(
    r"(?=[hw@#])"
    rf"(?:(?P<url>(?<![\w])https?://{_URL_CHAR}+)"
    rf"|(?P<www>(?<![\w./@-])www\.{_URL_CHAR}+)"
    # `@name` not preceded by something that makes it part of an e-mail address or a word;
    # the name may contain `.` and `-` but not end with them (sentence punctuation).
    r"|(?<![\w.+\-@])@(?P<mention>\w(?:[\w.\-]*\w)?)"
    # `#tag` not inside a word (C#), an HTML entity (&#39;) or a path fragment (/#x).
    r"|(?<![\w&#/])\#(?P<hashtag>\w(?:[\w\-]*\w)?))",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Entity:
    """One match: ``text[start:end]`` is exactly what was written (with `@`/`#`)."""

    kind: EntityKind
    start: int
    end: int
    value: str  # the URL, the mention name or the tag name (without `@`/`#`)


def _trim_url(url: str) -> str:
    """Drop trailing sentence punctuation; keep a `)` that closes a `(` inside the URL."""
    while url and url[-1] in _TRAILING_URL_PUNCT:
        if url[-1] == ")" and url.count("(") >= url.count(")"):
            break
        url = url[:-1]
    return url


def iter_entities(text: str) -> Iterator[Entity]:
    """Yield URLs (``url``: http/https, ``www``: bare ``www.`` hosts), mentions and hashtags
    in order of appearance, without overlaps."""
    pos = 0
    while (m := _ENTITY_RE.search(text, pos)) is not None:
        kind = m.lastgroup
        start = m.start()
        if kind in ("url", "www"):
            url = _trim_url(m.group())
            rest = url.split("://", 1)[1] if kind == "url" else url[4:]
            if not rest or (kind == "www" and "." not in rest.strip(".")):
                pos = start + 1
                continue
            pos = start + len(url)
            yield Entity("url" if kind == "url" else "www", start, pos, url)
        elif kind == "mention":
            pos = m.end()
            yield Entity("mention", start, pos, m.group("mention"))
        else:
            pos = m.end()
            tag = m.group("hashtag")
            if not tag.isdigit():  # "#1" or "issue #42" is not a topic
                yield Entity("hashtag", start, pos, tag)


def extract_mentions(text: str) -> list[str]:
    """Distinct ``@name`` names (as first written), deduplicated case-insensitively."""
    return _distinct(e.value for e in iter_entities(text) if e.kind == "mention")


def extract_hashtags(text: str) -> list[str]:
    """Distinct ``#tag`` names (as first written), deduplicated case-insensitively."""
    return _distinct(e.value for e in iter_entities(text) if e.kind == "hashtag")


def extract_urls(text: str) -> list[str]:
    """Distinct http(s) URLs, trailing ``.,;:!?)`` removed (a balanced ``)`` is kept)."""
    seen: dict[str, None] = {}
    for e in iter_entities(text):
        if e.kind == "url":
            seen.setdefault(e.value, None)
    return list(seen)


def _distinct(names: Iterable[str]) -> list[str]:
    seen: dict[str, str] = {}
    for name in names:
        seen.setdefault(name.casefold(), name)
    return list(seen.values())
