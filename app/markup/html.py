"""Message/comment bodies: Markdown to the safe ``html_body`` Socialcast returned (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType

from app.markup.entities import Entity, iter_entities

__all__ = ["MentionTarget", "render_html", "slugify"]


@dataclass(frozen=True, slots=True)
class MentionTarget:
    """What an ``@name`` links to. ``url`` is absolute (``{base}/users/<id>-<username>``);
    ``tooltip_url`` is e.g. ``/api/users/<id>-<username>.json`` (users) or None."""

    kind: Literal["user", "group"]
    id: int
    name: str
    url: str
    tooltip_url: str | None


_ENV_KEY = "commons_markup"


@dataclass(frozen=True, slots=True)
class _Context:
    base_url: str
    mentions: Mapping[str, MentionTarget]  # keys casefolded


def _attrs_for(entity: Entity, ctx: _Context) -> dict[str, str | int | float] | None:
    """Attributes of the link for an entity, or None to leave it as text."""
    if entity.kind == "url" or entity.kind == "www":
        href = _MD.normalizeLink(entity.value if entity.kind == "url" else "http://" + entity.value)
        return {"href": href, "title": href}
    if entity.kind == "hashtag":
        href = f"{ctx.base_url}/topics/{quote(entity.value.lower(), safe='-_')}"
        return {"class": "hashtag internal js-use-turbolink", "href": href, "title": href}
    target = ctx.mentions.get(entity.value.casefold())
    if target is None:
        return None
    attrs: dict[str, str | int | float] = {"class": "internal js-use-turbolink"}
    if target.kind == "user":
        attrs["class"] = f"internal js-use-turbolink js-mention-user-{target.id}"
        attrs["data-mention-type"] = "User"
        attrs["data-mini-profile"] = "true"
        attrs["data-tooltip-position"] = "bottom_left"
        attrs["data-tooltip-class"] = "user_mini_profile"
        attrs["data-user-id"] = str(target.id)
    if target.tooltip_url is not None:
        attrs["data-tooltip-url"] = target.tooltip_url
    attrs["href"] = target.url
    attrs["title"] = target.url
    return attrs


def _split_text(tok: Token, ctx: _Context) -> list[Token]:
    text = tok.content
    out: list[Token] = []
    pos = 0
    for entity in iter_entities(text):
        attrs = _attrs_for(entity, ctx)
        if attrs is None:
            continue
        if entity.start > pos:
            out.append(Token("text", "", 0, level=tok.level, content=text[pos : entity.start]))
        out.append(Token("link_open", "a", 1, attrs=attrs, level=tok.level, markup="linkify"))
        out.append(
            Token("text", "", 0, level=tok.level + 1, content=text[entity.start : entity.end])
        )
        out.append(Token("link_close", "a", -1, level=tok.level, markup="linkify"))
        pos = entity.end
    if not out:
        return [tok]
    if pos < len(text):
        out.append(Token("text", "", 0, level=tok.level, content=text[pos:]))
    return out


def _link_entities(state: StateCore) -> None:
    """Core rule: turn URLs, #tags and known @mentions in plain text into links (and
    strikethrough into ``<del>``).

    Runs before ``text_join``, so backslash escapes and entities (``\\#x``, ``&#35;x``) are
    still separate tokens and are not linked; code spans are ``code_inline`` tokens and
    link texts are skipped, so neither is touched."""
    ctx = state.env.get(_ENV_KEY)
    if not isinstance(ctx, _Context):
        return
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        in_link = 0
        for tok in block.children:
            if tok.type in ("s_open", "s_close"):
                tok.tag = "del"  # ~~x~~: markdown-it says <s>, GitHub-style Markdown says <del>
            elif tok.type == "link_open":
                in_link += 1
            elif tok.type == "link_close":
                in_link -= 1
            elif tok.type == "text" and in_link == 0:
                children.extend(_split_text(tok, ctx))
                continue
            children.append(tok)
        block.children = children


_MD = MarkdownIt(
    "commonmark",
    {"html": False, "breaks": True, "xhtmlOut": False, "linkify": False, "typographer": False},
)
_MD.enable("strikethrough")
_MD.disable("image")  # `![alt](src)` renders as `!` + a link; images are attachments here
_MD.core.ruler.before("text_join", "commons_entities", _link_entities)

_ALLOWED_CLASSES = {
    "a": frozenset({"hashtag", "internal", "js-use-turbolink"}),
    "div": frozenset({"markdown-body"}),
}
_MENTION_CLASS_RE = re.compile(r"js-mention-user-\d+")
_TOOLTIP_URL_RE = re.compile(r"(?:/(?!/)|https?://)[^\s\"'<>]*", re.IGNORECASE)


def _filter_attribute(tag: str, attr: str, value: str) -> str | None:
    if attr == "class":
        allowed = _ALLOWED_CLASSES.get(tag, frozenset())
        kept = [
            c
            for c in value.split()
            if c in allowed or (tag == "a" and _MENTION_CLASS_RE.fullmatch(c))
        ]
        return " ".join(kept) or None
    if attr == "data-user-id":
        return value if value.isdecimal() else None
    if attr == "data-tooltip-url":
        return value if _TOOLTIP_URL_RE.fullmatch(value) else None
    return value


_ALLOWED_TAGS = frozenset(
    "a p br em strong code pre blockquote ul ol li h1 h2 h3 h4 h5 h6 hr del div".split()
)
_ALLOWED_ATTRIBUTES = {
    "a": frozenset(
        "href title class rel data-user-id data-tooltip-url data-mention-type"
        " data-mini-profile data-tooltip-position data-tooltip-class".split()
    ),
    "div": frozenset({"class"}),
    "ol": frozenset({"start"}),
}
_CLEANER = nh3.Cleaner(
    tags=_ALLOWED_TAGS,
    clean_content_tags={"script", "style"},
    attributes=_ALLOWED_ATTRIBUTES,
    attribute_filter=_filter_attribute,
    strip_comments=True,
    link_rel=None,  # no rel is added: the links must look like the captured ones
    url_schemes={"http", "https", "mailto"},  # relative URLs pass through
)


def _top_level_blocks(tokens: Sequence[Token], env: EnvType) -> list[str]:
    blocks: list[str] = []
    start = depth = 0
    for i, tok in enumerate(tokens):
        depth += tok.nesting
        if depth == 0:
            html = _MD.renderer.render(tokens[start : i + 1], _MD.options, env).strip("\n")
            if html:
                blocks.append(html)
            start = i + 1
    return blocks


# A text markdown-it reads as one paragraph holding one text token (its block rules in the
# commonmark preset, the inline rules _MD enables). Refused: a character an inline rule acts
# on (escape, backticks, emphasis, strikethrough, link, autolink, html); a space at either
# end (indented code, or trimmed away); a line start that opens a block (ATX heading, bullet
# list or thematic break, ordered list). Newlines, tabs, every space but U+0020, NUL,
# surrogates and format characters fail str.isprintable. `&` starts an entity only before
# a `;`, so Q&A stays cheap.
_MARKUP_CHAR_RE = re.compile(r"[\\`*_~\[\]<>]")
_BLOCK_START_RE = re.compile(r" |#+(?: |\Z)|[-+](?:[ -]|\Z)|[0-9]+[.)](?: |\Z)")


def _is_plain_paragraph(text: str) -> bool:
    return (
        text.isprintable()
        and text != ""
        and not text.endswith(" ")
        and _BLOCK_START_RE.match(text) is None
        and _MARKUP_CHAR_RE.search(text) is None
        and not ("&" in text and ";" in text)
    )


def _plain_paragraph(text: str, ctx: _Context) -> str:
    """What markdown-it renders for a text _is_plain_paragraph accepts, without parsing it:
    the paragraph of its one text token after _link_entities, escaped and with the links'
    attributes written as markdown-it's renderer writes them (the keys need no escaping)."""
    out = ["<p>"]
    pos = 0
    for entity in iter_entities(text):
        attrs = _attrs_for(entity, ctx)
        if attrs is None:
            continue
        out.append(escapeHtml(text[pos : entity.start]))
        out.append("<a")
        out.extend(f' {key}="{escapeHtml(str(value))}"' for key, value in attrs.items())
        out.append(">")
        out.append(escapeHtml(text[entity.start : entity.end]))
        out.append("</a>")
        pos = entity.end
    out.append(escapeHtml(text[pos:]))
    out.append("</p>")
    return "".join(out)


def _markdown_blocks(text: str, env: EnvType) -> str:
    blocks = _top_level_blocks(_MD.parse(text, env), env)
    if not blocks:
        return ""
    if len(blocks) == 1:
        return blocks[0]
    return "\n" + "\n\n".join(blocks) + "\n"


def _context(base_url: str, mentions: Mapping[str, MentionTarget]) -> _Context:
    return _Context(base_url.rstrip("/"), {k.casefold(): v for k, v in mentions.items()})


def render_html(text: str, *, base_url: str, mentions: Mapping[str, MentionTarget]) -> str:
    """Render a body/comment to the ``html_body`` form.

    One block gives ``<div class="markdown-body"><p>…</p></div>``; several are laid out as
    ``<div class="markdown-body">\\n<p>…</p>\\n\\n<p>…</p>\\n</div>`` (as Socialcast did).
    ``mentions`` maps names (any case) to targets; other ``@names`` stay plain text."""
    ctx = _context(base_url, mentions)
    # Most chat lines and remarks are one plain line; parsing them is most of the cost.
    if _is_plain_paragraph(text):
        inner = _plain_paragraph(text, ctx)
    else:
        inner = _markdown_blocks(text, {_ENV_KEY: ctx})
    return _CLEANER.clean(f'<div class="markdown-body">{inner}</div>')


def _render_markdown(text: str, *, base_url: str, mentions: Mapping[str, MentionTarget]) -> str:
    """render_html without the plain-paragraph shortcut: what the tests hold it to."""
    env: EnvType = {_ENV_KEY: _context(base_url, mentions)}
    return _CLEANER.clean(f'<div class="markdown-body">{_markdown_blocks(text, env)}</div>')


def slugify(title: str) -> str:
    """The ``<id>-<slug>`` part of message URLs: whitespace runs become ``-``, then everything
    but ``a-z0-9-`` is dropped (so ``"a | b"`` gives ``a--b``), cut at 50 characters.
    May be empty (then URLs carry no slug)."""
    slug = re.sub(r"[^a-z0-9-]", "", re.sub(r"\s+", "-", title.strip().lower()))
    return slug[:50].strip("-")
