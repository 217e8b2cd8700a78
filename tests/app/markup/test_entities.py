from app.markup.entities import extract_hashtags, extract_mentions, extract_urls, iter_entities


def test_mentions_in_order_distinct_case_insensitive() -> None:
    text = "@carol and @dave.smith, then @Carol again; ping @x-y_z."
    assert extract_mentions(text) == ["carol", "dave.smith", "x-y_z"]


def test_mentions_strip_trailing_punctuation() -> None:
    assert extract_mentions("thanks @ann. (@ben) @cy- @di!") == ["ann", "ben", "cy", "di"]


def test_mentions_ignore_email_addresses_and_urls() -> None:
    text = "mail ann@example.com or ann.b@x.org, see https://host.test/@ann, @@not, @"
    assert extract_mentions(text) == []


def test_mentions_at_line_start_and_after_brackets() -> None:
    assert extract_mentions("@first\n(@second) [@third] **@fourth**") == [
        "first",
        "second",
        "third",
        "fourth",
    ]


def test_hashtags_in_order_keep_first_case() -> None:
    assert extract_hashtags("#Launch day! #launch #beta-2 #under_score") == [
        "Launch",
        "beta-2",
        "under_score",
    ]


def test_hashtags_ignore_entities_fragments_words_and_numbers() -> None:
    text = "it&#39;s &#x27;q&#x27; C# abc#def http://h.test/page#frag /#path #42 issue#7 ##x"
    assert extract_hashtags(text) == []


def test_hashtags_strip_trailing_dash_and_stop_at_punctuation() -> None:
    assert extract_hashtags("#one- #two. #three,#four #2go") == [
        "one",
        "two",
        "three",
        "four",
        "2go",
    ]


def test_hashtag_cannot_carry_quotes_or_markup() -> None:
    assert extract_hashtags('#"onmouseover=alert(1) #<b> #x"y') == ["x"]


def test_urls_distinct_with_trailing_punctuation_stripped() -> None:
    text = (
        "See http://a.test/x, https://b.test/p?q=1&r=2. (https://c.test/y) "
        "again http://a.test/x! and https://d.test/wiki/Foo_(bar)."
    )
    assert extract_urls(text) == [
        "http://a.test/x",
        "https://b.test/p?q=1&r=2",
        "https://c.test/y",
        "https://d.test/wiki/Foo_(bar)",
    ]


def test_urls_only_http_and_https() -> None:
    text = 'ftp://f.test javascript:alert(1) www.w.test http:// "https://q.test/a"'
    assert extract_urls(text) == ["https://q.test/a"]


def test_url_fragment_and_at_sign_are_not_entities() -> None:
    kinds = [(e.kind, e.value) for e in iter_entities("https://h.test/#tag/@user #real")]
    assert kinds == [("url", "https://h.test/#tag/@user"), ("hashtag", "real")]


def test_iter_entities_positions_cover_written_text() -> None:
    text = "hi @ann: #topic www.site.test."
    found = [(e.kind, text[e.start : e.end], e.value) for e in iter_entities(text)]
    assert found == [
        ("mention", "@ann", "ann"),
        ("hashtag", "#topic", "topic"),
        ("www", "www.site.test", "www.site.test"),
    ]


def test_empty_text() -> None:
    assert extract_mentions("") == []
    assert extract_hashtags("") == []
    assert extract_urls("") == []
