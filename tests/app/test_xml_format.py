"""The Rails to_xml form of JSON bodies, and XML bodies parsed back, against the XML the
original service answered (tests/fixtures/socialcast/xml)."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from aiohttp.web_urldispatcher import UrlMappingMatchInfo

from app.errors import BadRequest
from app.responses import json_response
from app.xml_format import WANTS_XML, _prefers_xml, negotiation_middleware, parse_xml, to_xml
from tests.app.xml_support import FIXTURES, fixture, form


def test_one_object_is_its_envelope_element_with_dashed_typed_children() -> None:
    text = to_xml({"message": {
        "id": 42, "created_at": "2011-04-25T14:34:57+00:00", "likable": True, "title": "",
        "rating": None, "tags": [], "group": {}, "media_files": [{"id": 1}],
        "admin_ids": [3, 4], "body": "a < b & \"c\"",
    }})
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<message>\n')
    assert '  <id type="integer">42</id>\n' in text
    assert '  <created-at type="datetime">2011-04-25T14:34:57+00:00</created-at>\n' in text
    assert '  <likable type="boolean">true</likable>\n' in text
    assert "  <title></title>\n" in text
    assert '  <rating nil="true"></rating>\n' in text
    assert '  <tags type="array"/>\n' in text
    assert "  <group>\n  </group>\n" in text
    assert '  <media-files type="array">\n    <media-file>\n      <id type="integer">1</id>' in text
    assert '<admin-id type="integer">3</admin-id>' in text
    assert "<body>a &lt; b &amp; &quot;c&quot;</body>" in text
    root = ElementTree.fromstring(text.encode())
    # element order is the JSON key order
    assert [el.tag for el in root] == [
        "id", "created-at", "likable", "title", "rating", "tags", "group", "media-files",
        "admin-ids", "body",
    ]


def test_a_list_envelope_is_a_typed_array_root_with_paging_as_attributes() -> None:
    text = to_xml({"messages": [{"id": 1}, {"id": 2}], "messages_next_page": 2})
    root = ElementTree.fromstring(text.encode())
    assert root.tag == "messages" and root.get("type") == "array"
    assert root.get("messages-next-page") == "2"
    assert [el.tag for el in root] == ["message", "message"]
    last = ElementTree.fromstring(
        to_xml({"messages": [], "messages_next_page": None}).encode()
    )
    assert last.tag == "messages" and "messages-next-page" not in last.attrib


def test_errors_are_rails_errors_xml() -> None:
    text = to_xml({"errors": ["Body can't be blank"], "code": "validation_failed"})
    assert text.endswith("<errors>\n  <error>Body can't be blank</error>\n</errors>\n")


def test_text_never_makes_invalid_xml() -> None:
    text = to_xml({"user": {"name": "bell\x07", "weird key!": 1, "12": "x"}})
    root = ElementTree.fromstring(text.encode())
    assert root.find("name").text == "bell\ufffd"  # type: ignore[union-attr]
    assert [el.get("key") for el in root.iter("item")] == ["weird key!", "12"]


def _same_form(theirs: ElementTree.Element, ours: ElementTree.Element, path: str = "") -> int:
    """Ours element by element against theirs: the same names in the same places, the same
    `type` and `nil` (form() says which two differences are decided). Elements compared."""
    here = f"{path}/{theirs.tag}"
    assert ours.tag == theirs.tag, here
    assert form(ours) == form(theirs), (here, ours.attrib, theirs.attrib)
    assert [c.tag for c in ours] == [c.tag for c in theirs], here
    return 1 + sum(_same_form(t, o, here) for t, o in zip(theirs, ours, strict=True))


@pytest.mark.parametrize("name", ["socialcastr_message.xml", "socialcastr_user.xml",
                                  "socialcastr_messages.xml"])
def test_output_uses_the_fixture_conventions_for_the_same_elements(name: str) -> None:
    """The original's answer, read and written again: every element comes back with the same
    name, `type` and `nil="true"`, both ways (an attribute we lose or add fails)."""
    theirs = fixture(name)
    ours = ElementTree.fromstring(to_xml(parse_xml((FIXTURES / name).read_bytes())).encode())
    assert _same_form(theirs, ours) > 40
    nil = [el for el in ours.iter() if el.get("nil") == "true"]
    assert nil and all(el.attrib == {"nil": "true"} and not el.text and not list(el)
                       for el in nil)
    timestamps = [el for el in ours.iter() if el.tag in ("created-at", "updated-at")]
    assert timestamps and all(el.get("type") == "datetime" for el in timestamps)


def test_fixture_parses_into_the_json_shape() -> None:
    data = parse_xml((FIXTURES / "socialcastr_user.xml").read_bytes())
    user: dict[str, Any] = data["user"]
    assert user["id"] == 25 and user["terminated"] is False and user["contact_id"] is None
    assert user["contact_info"]["office_phone"] == "949 555 6685"
    assert [f["id"] for f in user["custom_fields"]][:2] == ["resume", "passions"]
    assert user["status_message"]["media_files"] == []
    assert user["status_message"]["group"] == {}  # `<group>\n</group>`, an empty object
    messages = parse_xml((FIXTURES / "socialcastr_messages.xml").read_bytes())["messages"]
    assert len(messages) == 20 and all(isinstance(m["id"], int) for m in messages)


def test_xml_bodies_refuse_entities_and_dtds() -> None:
    bomb = (b'<?xml version="1.0"?><!DOCTYPE m [<!ENTITY a "aaaaaaaaaa">'
            b'<!ENTITY b "&a;&a;&a;&a;">]><message><body>&b;</body></message>')
    with pytest.raises(BadRequest):
        parse_xml(bomb)
    external = (b'<?xml version="1.0"?><!DOCTYPE m [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                b"<message><body>&x;</body></message>")
    with pytest.raises(BadRequest):
        parse_xml(external)
    with pytest.raises(BadRequest):
        parse_xml(b"<message><body>")


def test_xml_body_decodes_like_json() -> None:
    body = (b'<message><body>Hi</body><group-id type="integer">3</group-id>'
            b'<attachment-ids type="array"><attachment-id>1</attachment-id></attachment-ids>'
            b'<title nil="true"/></message>')
    assert parse_xml(body) == {
        "message": {"body": "Hi", "group_id": 3, "attachment_ids": ["1"], "title": None}
    }


def test_accept_prefers_json_on_ties() -> None:
    assert _prefers_xml("application/xml")
    assert _prefers_xml("text/xml, application/json;q=0.5")
    assert not _prefers_xml("application/json, application/xml")
    assert not _prefers_xml("*/*")
    assert not _prefers_xml("")


async def test_negotiation_wraps_only_a_request_that_wants_xml() -> None:
    """A JSON request gets the handler's own awaitable back (no frame of the layer); an XML
    one is answered in XML."""
    async def handler(request: web.Request) -> web.StreamResponse:
        return json_response({"user": {"id": 1}})

    def request(ext: str, accept: str = "*/*") -> web.Request:
        req = make_mocked_request("GET", f"/api/userinfo{ext}", headers={"Accept": accept})
        info = {"_ext": ext} if ext else {}
        req._match_info = UrlMappingMatchInfo(info, handler)  # type: ignore[arg-type]
        return req

    as_json = request(".json")
    own = handler(as_json)
    assert negotiation_middleware(as_json, lambda r: own) is own
    assert as_json[WANTS_XML] is False
    await own
    as_xml = request(".xml")
    response = await negotiation_middleware(as_xml, handler)
    assert as_xml[WANTS_XML] is True
    assert isinstance(response, web.Response)
    assert response.content_type == "application/xml"
    assert isinstance(response.body, bytes)
    assert b'<id type="integer">1</id>' in response.body
    # no suffix: the Accept header decides, in any case
    for accept, xml in (("*/*", False), ("Application/XML", True), ("text/xml;q=0.2, */*", True),
                        ("application/json, text/xml;q=0.5", False)):
        by_accept = request("", accept)
        answer = await negotiation_middleware(by_accept, handler)
        assert by_accept[WANTS_XML] is xml, accept
        assert isinstance(answer, web.Response)
        assert answer.content_type == ("application/xml" if xml else "application/json")
