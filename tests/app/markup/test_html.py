from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.markup.html import (
    _ENV_KEY,
    _MD,
    MentionTarget,
    _context,
    _is_plain_paragraph,
    _markdown_blocks,
    _plain_paragraph,
    _render_markdown,
    render_html,
    slugify,
)

BASE = "https://commons.test"
ANN = MentionTarget(
    kind="user",
    id=5,
    name="AnnLee",
    url=f"{BASE}/users/5-annlee",
    tooltip_url="/api/users/5-annlee.json",
)
TEAM = MentionTarget(kind="group", id=3, name="Crew", url=f"{BASE}/groups/3-crew", tooltip_url=None)
MENTIONS = {"AnnLee": ANN, "crew": TEAM}

ANN_LINK = (
    '<a class="internal js-use-turbolink js-mention-user-5" data-mention-type="User"'
    ' data-mini-profile="true" data-tooltip-position="bottom_left"'
    ' data-tooltip-class="user_mini_profile" data-user-id="5"'
    ' data-tooltip-url="/api/users/5-annlee.json" href="https://commons.test/users/5-annlee"'
    ' title="https://commons.test/users/5-annlee">@{}</a>'
)
CREW_LINK = (
    '<a class="internal js-use-turbolink" href="https://commons.test/groups/3-crew"'
    ' title="https://commons.test/groups/3-crew">@{}</a>'
)


def tag_link(written: str, name: str) -> str:
    url = f"{BASE}/topics/{name}"
    return f'<a class="hashtag internal js-use-turbolink" href="{url}" title="{url}">#{written}</a>'


def render(text: str) -> str:
    return render_html(text, base_url=BASE, mentions=MENTIONS)


def body(inner: str) -> str:
    return f'<div class="markdown-body">{inner}</div>'


# --- exact output -------------------------------------------------------------------------


def test_empty_and_blank_text() -> None:
    assert render("") == '<div class="markdown-body"></div>'
    assert render("  \n\n ") == '<div class="markdown-body"></div>'


def test_single_paragraph_keeps_quotes_unescaped() -> None:
    assert render('It\'s "fine" & <ok>') == body('<p>It\'s "fine" &amp; &lt;ok&gt;</p>')


def test_single_newlines_become_br() -> None:
    assert render("one\ntwo\nthree") == body("<p>one<br>\ntwo<br>\nthree</p>")


def test_several_blocks_are_spaced_like_socialcast() -> None:
    assert render("Head:\n\nline a\nline b") == (
        '<div class="markdown-body">\n<p>Head:</p>\n\n<p>line a<br>\nline b</p>\n</div>'
    )


def test_markdown_formatting() -> None:
    assert render("*em* **strong** ~~gone~~ `code`") == body(
        "<p><em>em</em> <strong>strong</strong> <del>gone</del> <code>code</code></p>"
    )
    assert render("## Title\n\n- a\n- b\n\n> quoted") == (
        '<div class="markdown-body">\n<h2>Title</h2>\n\n<ul>\n<li>a</li>\n<li>b</li>\n</ul>'
        "\n\n<blockquote>\n<p>quoted</p>\n</blockquote>\n</div>"
    )


def test_user_and_group_mentions() -> None:
    assert render("@AnnLee meet @Crew.") == body(
        f"<p>{ANN_LINK.format('AnnLee')} meet {CREW_LINK.format('Crew')}.</p>"
    )


def test_mention_lookup_is_case_insensitive_and_keeps_written_form() -> None:
    assert render("hi @annlee") == body(f"<p>hi {ANN_LINK.format('annlee')}</p>")


def test_unknown_mention_and_email_stay_text() -> None:
    assert render("@nobody wrote to annlee@mail.test") == body(
        "<p>@nobody wrote to annlee@mail.test</p>"
    )


def test_hashtags_link_to_lowercase_topic() -> None:
    assert render("Done. #FYI #sales-q3") == body(
        f"<p>Done. {tag_link('FYI', 'fyi')} {tag_link('sales-q3', 'sales-q3')}</p>"
    )


def test_hashtag_base_url_trailing_slash_is_ignored() -> None:
    out = render_html("#x", base_url=BASE + "/", mentions={})
    assert out == body(f"<p>{tag_link('x', 'x')}</p>")


def test_non_ascii_hashtag_is_percent_encoded_in_href() -> None:
    out = render("#Café")
    assert 'href="https://commons.test/topics/caf%C3%A9"' in out
    assert ">#Café</a>" in out


def test_bare_urls_are_linked() -> None:
    assert render("go to http://x.test/a?b=1&c=2, or www.y.test.") == body(
        '<p>go to <a href="http://x.test/a?b=1&amp;c=2" title="http://x.test/a?b=1&amp;c=2">'
        'http://x.test/a?b=1&amp;c=2</a>, or <a href="http://www.y.test" title="http://www.y.test">'
        "www.y.test</a>.</p>"
    )


def test_bare_domain_is_not_linked() -> None:
    assert render("try example.test") == body("<p>try example.test</p>")


def test_markdown_links_relative_and_mailto() -> None:
    assert render("[home](/messages/1) <mailto:a@b.test>") == body(
        '<p><a href="/messages/1">home</a> <a href="mailto:a@b.test">mailto:a@b.test</a></p>'
    )


# --- where entities are not processed ------------------------------------------------------


def test_no_entities_in_code_span() -> None:
    assert render("`@AnnLee #tag http://x.test`") == body(
        "<p><code>@AnnLee #tag http://x.test</code></p>"
    )


def test_no_entities_in_code_block() -> None:
    assert render("```\n@AnnLee #tag\n```") == body("<pre><code>@AnnLee #tag\n</code></pre>")
    assert render("    @AnnLee #tag") == body("<pre><code>@AnnLee #tag\n</code></pre>")


def test_no_entities_in_link_text_or_url() -> None:
    assert render("[@AnnLee #tag](https://x.test/#tag)") == body(
        '<p><a href="https://x.test/#tag">@AnnLee #tag</a></p>'
    )
    assert render("<https://x.test/@AnnLee>") == body(
        '<p><a href="https://x.test/@AnnLee">https://x.test/@AnnLee</a></p>'
    )


def test_no_hashtag_inside_bare_url_fragment() -> None:
    assert render("http://x.test/p#frag") == body(
        '<p><a href="http://x.test/p#frag" title="http://x.test/p#frag">http://x.test/p#frag</a></p>'
    )


def test_escaped_and_entity_markers_are_not_linked() -> None:
    assert render("\\#no \\@AnnLee &#35;no it&#39;s") == body("<p>#no @AnnLee #no it's</p>")


def test_entities_inside_emphasis_are_linked() -> None:
    assert render("**#big**") == body(f"<p><strong>{tag_link('big', 'big')}</strong></p>")


# --- safety ------------------------------------------------------------------------------

XSS_INPUTS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](  javascript:alert(1) )",
    "[x](java\tscript:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](data:text/html;base64,PHNjcmlwdD4=)",
    "[x](vbscript:msgbox(1))",
    "[ref]\n\n[ref]: javascript:alert(1)",
    "<javascript:alert(1)>",
    "![x](javascript:alert(1))",
    '![x](http://x.test/a.png" onerror="alert(1))',
    '[x](http://x.test "a\\" onmouseover=\\"alert(1)")',
    '#"onmouseover=alert(1)',
    "#x\"onmouseover='alert(1)'",
    '@AnnLee"onmouseover=alert(1)',
    'http://x.test/"onmouseover=alert(1)',
    "www.x.test/'onmouseover=alert(1)",
    "<svg/onload=alert(1)>",
    "<style>*{}</style><iframe src=x>",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "```\n</code><script>alert(1)</script>\n```",
    "`</code><script>alert(1)</script>`",
    "<!-- x --><div onclick=alert(1)>",
]


class _Elements(HTMLParser):
    """Collects (tag, attrs) of every start tag, with the values as a browser decodes them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.comments: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)


ALLOWED_ATTRS = {
    "div": {"class"},
    "a": set(
        "href title class data-user-id data-tooltip-url data-mention-type data-mini-profile"
        " data-tooltip-position data-tooltip-class".split()
    ),
}


def assert_safe(out: str) -> None:
    parser = _Elements()
    parser.feed(out)
    parser.close()
    assert parser.comments == []
    for tag, attrs in parser.elements:
        assert tag in {"div", "p", "a", "br", "code", "pre", "em", "strong", "del"}, tag
        assert set(attrs) <= ALLOWED_ATTRS.get(tag, set()), (tag, attrs)
        href = (attrs.get("href") or "").strip().lower()
        assert href == "" or href.startswith(("http://", "https://", "mailto:", "/")), href


@pytest.mark.parametrize("text", XSS_INPUTS)
def test_xss_battery(text: str) -> None:
    out = render(text)
    assert out.startswith('<div class="markdown-body">')
    assert out.endswith("</div>")
    assert "<script" not in out.lower()
    assert_safe(out)


def test_raw_html_is_escaped_not_dropped() -> None:
    assert render("<b onclick=x>hi</b>") == body("<p>&lt;b onclick=x&gt;hi&lt;/b&gt;</p>")


def test_javascript_link_is_left_as_text() -> None:
    assert render("[x](javascript:alert(1))") == body("<p>[x](javascript:alert(1))</p>")


def test_hostile_mention_target_cannot_inject() -> None:
    evil = MentionTarget(
        kind="user",
        id=9,
        name="evil",
        url="javascript:alert(1)",
        tooltip_url='/x" onclick="alert(1)',
    )
    quoting = MentionTarget(
        kind="group",
        id=1,
        name="q",
        url='https://x.test/"><script>alert(1)</script>',
        tooltip_url="javascript:alert(1)",
    )
    out = render_html("@evil @q", base_url=BASE, mentions={"evil": evil, "q": quoting})
    assert_safe(out)
    assert "<script" not in out.lower()
    assert "data-tooltip-url" not in out
    assert "@evil</a>" in out
    assert "@q</a>" in out


def test_no_rel_or_extra_attributes_added() -> None:
    out = render("http://x.test")
    assert "rel=" not in out
    assert out == body('<p><a href="http://x.test" title="http://x.test">http://x.test</a></p>')


# --- the plain-paragraph shortcut ------------------------------------------------------------
# render_html skips markdown-it for a one-line plain text; its answer must be markdown-it's.


def assert_same_as_markdown(
    text: str, base_url: str = BASE, mentions: dict[str, MentionTarget] = MENTIONS
) -> None:
    """The shortcut's html equals markdown-it's, before the sanitizer and after it."""
    out = render_html(text, base_url=base_url, mentions=mentions)
    assert out == _render_markdown(text, base_url=base_url, mentions=mentions)
    if _is_plain_paragraph(text):
        ctx = _context(base_url, mentions)
        assert _plain_paragraph(text, ctx) == _markdown_blocks(text, {_ENV_KEY: ctx})


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("Shipping the #release today, thanks @AnnLee!", True),
        ("#tag opens the line", True),
        ("##tag", True),
        ("# x", False),  # heading
        ("#", False),  # empty heading
        ("###### six", False),
        ("- x", False),  # bullet list
        ("-", False),
        ("---", False),  # thematic break
        ("-- note", False),  # a paragraph, but refused with the breaks
        ("-x", True),
        ("+ x", False),
        ("+1", True),
        ("1. first", False),  # ordered list
        ("2024) was long", False),
        ("1.", False),
        ("1.5 is fine", True),
        ("see http://x.test/a?b=1&c=2 and www.y.test/p?q=%20#frag", True),
        ("Q&A at noon", True),  # `&` is an entity only before a `;`
        ("&amp; then;", False),
        ("Q&A; again", False),
        ('He said "hi" and it\'s (mostly) fine!', True),
        ("@nobody and @AnnLee.", True),
        ("mail annlee@mail.test", True),
        ("Grüße an @crew — 中文 #Café, ok?", True),
        ("a | b = c {d} $e ^f 50% : ; / ,", True),
        ("a  b", True),  # inner runs of spaces stay text
        (" x", False),
        ("x ", False),
        ("a\tb", False),
        ("a\u00a0b", False),  # only the plain space
        ("a\u2028b", False),
        ("a\u200db", False),  # format characters (zero-width joiner) too
        ("a\nb", False),
        ("a\rb", False),
        ("a\x00b", False),
        ("", False),
        ("**x**", False),
        ("snake_case", False),
        ("a\\b", False),
        ("`x`", False),
        ("~~x~~", False),
        ("[x](y)", False),
        ("a <b> c", False),
        ("> q", False),
    ],
)
def test_plain_paragraph_examples(text: str, plain: bool) -> None:
    assert _is_plain_paragraph(text) is plain
    assert_same_as_markdown(text)


def test_plain_paragraph_exact_output() -> None:
    url = "http://x.test/a?b=1&amp;c=2"
    assert render('Q&A "now" at http://x.test/a?b=1&c=2, @AnnLee #Go') == body(
        f'<p>Q&amp;A "now" at <a href="{url}" title="{url}">{url}</a>,'
        f" {ANN_LINK.format('AnnLee')} {tag_link('Go', 'go')}</p>"
    )


def test_shortcut_rule_was_read_from_these_parser_rules() -> None:
    """_is_plain_paragraph was derived from exactly these rules: a rule enabled on _MD (say
    linkify, typographer or tables) needs the shortcut re-read before this list is updated."""
    assert _MD.core.ruler.get_active_rules() == [
        "normalize",
        "block",
        "inline",
        "commons_entities",
        "text_join",
    ]
    assert _MD.block.ruler.get_active_rules() == [
        "code",
        "fence",
        "blockquote",
        "hr",
        "list",
        "reference",
        "html_block",
        "heading",
        "lheading",
        "paragraph",
    ]
    assert _MD.inline.ruler.get_active_rules() == [
        "text",
        "newline",
        "escape",
        "backticks",
        "strikethrough",
        "emphasis",
        "link",
        "autolink",
        "html_inline",
        "entity",
    ]
    assert _MD.inline.ruler2.get_active_rules() == [
        "balance_pairs",
        "strikethrough",
        "emphasis",
        "fragments_join",
    ]
    assert not _MD.options["html"]
    assert not _MD.options["linkify"]
    assert not _MD.options["typographer"]


# Characters markdown, HTML or the entity scanner treat specially, with ordinary ones.
TRICKY = (
    "aZé中ß\u0130\u017f\u212a09 "  # letters (dotted I, long s and the Kelvin sign fold oddly)
    "#@.,:/-+!?()'=%;&\"|{}$^"
    "\\`*_[]<>~"
    "\t\n\r\x00\x0b\x0c\x1f\x85\u00a0\u2003\u2028\u3000\u200b\u200d\ufeff"
)
PLAIN_FRAGMENTS = [
    " ",
    "http://",
    "https://x.test/",
    "www.",
    "x.test",
    "?a=1&b=2",
    "#",
    "#tag",
    "@",
    "@ann",
    "@AnnLee",
    "@b.o-b",
    "1. ",
    "1) ",
    "- ",
    "+ ",
    "-",
    "---",
    "# ",
    "&amp;",
    "&#35;",
    "===",
]
# Without what the shortcut refuses anywhere in a text: half of these are near its edge.
NEAR_PLAIN = "aZé中ß\u0130\u017f\u212a09 #@.,:/-+!?()'=%;&\"|{}$^"
near_plain_texts = st.lists(
    st.one_of(st.sampled_from(PLAIN_FRAGMENTS), st.text(alphabet=NEAR_PLAIN, max_size=4)),
    max_size=10,
).map("".join)
# One piece of markup amid such text: the shortcut must see each of them.
MARKUP = [
    "_x_",
    "@ann_x",
    "*x*",
    "~~x~~",
    "`x`",
    "[x](y)",
    "<http://x.test>",
    "<b>",
    "\\#x",
    "&amp;",
    "\n",
    "\nx\n",
    "\n===",
    "\t",
    "    ",
    "\u00a0",
]
one_markup_texts = st.tuples(near_plain_texts, st.sampled_from(MARKUP), near_plain_texts).map(
    "".join
)
# Line starts on either side of what opens a block, before such text.
LINE_STARTS = [
    " x",
    "    x",
    "#",
    "# x",
    "## x",
    "####### x",
    "#x",
    "-",
    "- x",
    "--",
    "---",
    "- - -",
    "-x",
    "+",
    "+ x",
    "+1",
    "1.",
    "1. x",
    "12) x",
    "10.",
    "123456789) x",
    "1234567890. x",
    "1.5",
    "1x",
    "===",
]
line_start_texts = st.tuples(st.sampled_from(LINE_STARTS), near_plain_texts).map("".join)
texts = st.lists(
    st.one_of(
        st.sampled_from(PLAIN_FRAGMENTS + MARKUP),
        st.text(alphabet=NEAR_PLAIN, max_size=4),
        st.text(alphabet=TRICKY, max_size=4),
    ),
    max_size=10,
).map("".join)
targets = st.builds(
    MentionTarget,
    kind=st.sampled_from(["user", "group"]),
    id=st.integers(1, 10**6),
    name=st.just("n"),
    url=st.sampled_from([f"{BASE}/users/1-ann", "javascript:alert(1)", 'https://x.test/"a&b']),
    tooltip_url=st.sampled_from([None, "/api/users/1-ann.json", '/x" onclick="y']),
)
mention_maps = st.dictionaries(
    st.sampled_from(["ann", "AnnLee", "b.o-b", "ß", "İ", "tag"]), targets, max_size=3
)
base_urls = st.sampled_from([BASE, BASE + "/", "http://h.test/sub"])


@settings(max_examples=1000)
@given(
    text=texts | near_plain_texts | one_markup_texts | line_start_texts,
    mentions=mention_maps,
    base_url=base_urls,
)
def test_shortcut_answers_as_markdown_it_does(
    text: str, mentions: dict[str, MentionTarget], base_url: str
) -> None:
    assert_same_as_markdown(text, base_url, mentions)


# Everyday chat: words, entities and sentence punctuation, one space apart.
chat_words = st.one_of(
    st.text(alphabet="aZé中ß09'\"!?.,:()%=+-/", min_size=1, max_size=6).filter(
        lambda w: w[0] not in "-+0123456789"  # keeps the line start from opening a block
    ),
    st.sampled_from(["#tag", "#Café", "@AnnLee", "@crew", "@nobody", "Q&A"]),
    st.sampled_from(["http://x.test/a?b=1&c=2", "https://x.test/p#f", "www.x.test/(a)"]),
)
chat_lines = st.lists(chat_words, min_size=1, max_size=12).map(" ".join)


@given(text=chat_lines)
def test_chat_lines_take_the_shortcut(text: str) -> None:
    assert _is_plain_paragraph(text)
    assert_same_as_markdown(text)


# --- slugify ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Quarterly Plan Review", "quarterly-plan-review"),
        ("Acme Inc. Town Hall", "acme-inc-town-hall"),
        ("Build it (and ship it)", "build-it-and-ship-it"),
        ("Alpha | Beta", "alpha--beta"),
        ("Part one - Part two", "part-one---part-two"),
        ("Ready?  Set, go!", "ready-set-go"),
        ("http://x.test/watch?v=AbC", "httpxtestwatchvabc"),
        ("Mixed/Slash and 2024", "mixedslash-and-2024"),
        ("Café déjà vu", "caf-dj-vu"),
        ("  padded title  ", "padded-title"),
        ("", ""),
        ("!!!", ""),
    ],
)
def test_slugify(title: str, slug: str) -> None:
    assert slugify(title) == slug


def test_slugify_cuts_at_fifty_characters() -> None:
    title = "Can someone tell me where the spare keys for the storage room are kept?"
    assert slugify(title) == "can-someone-tell-me-where-the-spare-keys-for-the-s"
    assert len(slugify(title)) == 50
    assert slugify("word " * 9 + "x") == "word-word-word-word-word-word-word-word-word-x"
    assert not slugify("abcd " * 10 + "efgh").endswith("-")
