"""Real clients of the original service, replayed as they send their requests: XML clients
(Socialcastr, ActiveResource in XML mode, a .NET wrapper), ActiveResource 4+ with unwrapped
JSON bodies, and path segments that must be ids."""

from __future__ import annotations

import io
from typing import Any
from urllib.parse import quote_plus
from xml.etree import ElementTree

import aiohttp
from PIL import Image
from yarl import URL

from tests.app.views.feed_support import post
from tests.app.xml_support import fixture, forms_by_path
from tests.support import PASSWORD, World

XML = {"Content-Type": "application/xml"}


def _png(color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (120, 120), color).save(out, format="PNG")
    return out.getvalue()


def _xml(text: str) -> ElementTree.Element:
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n'), text[:80]
    return ElementTree.fromstring(text.encode())


def _int(el: ElementTree.Element, path: str) -> int:
    found = el.find(path)
    assert found is not None and found.get("type") == "integer", path
    return int(found.text or "")


# --- XML ---------------------------------------------------------------------------------------


async def test_socialcastr_reads_messages_and_search_in_xml(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    first = await post(bob, "Coffee machine is fixed")
    await post(bob, "Lunch at noon")
    resp = await bob.api.get("/api/messages.xml")
    assert resp.status == 200, resp.text
    assert resp.headers["Content-Type"].startswith("application/xml")
    root = _xml(resp.text)
    assert root.tag == "messages" and root.get("type") == "array"
    assert [el.tag for el in root] == ["message", "message"]
    newest = root[0]
    json_list = (await bob.api.get("/api/messages.json")).json["messages"]
    # the very same object, dasherized, in the JSON key order
    assert [el.tag for el in newest] == [k.replace("_", "-") for k in json_list[0]]
    assert _int(newest, "id") == json_list[0]["id"]
    assert newest.find("created-at").get("type") == "datetime"  # type: ignore[union-attr]
    assert newest.find("likable").get("type") == "boolean"  # type: ignore[union-attr]
    assert newest.find("tags").get("type") == "array"  # type: ignore[union-attr]
    assert newest.find("user/name").text == json_list[0]["user"]["name"]  # type: ignore[union-attr]
    search = await bob.api.get("/api/messages/search.xml", params={"q": "coffee"})
    assert search.status == 200, search.text
    found = _xml(search.text)
    assert found.tag == "messages"
    assert [_int(m, "id") for m in found] == [first["id"]]


async def test_accept_header_chooses_xml_without_a_suffix(world: World) -> None:
    admin = await world.community()
    resp = await admin.api.get(f"/api/users/{admin.id}", headers={"Accept": "application/xml"})
    assert resp.status == 200
    user = _xml(resp.text)
    assert user.tag == "user" and _int(user, "id") == admin.id
    nil = [el for el in user.iter() if el.get("nil") == "true"]
    assert nil and all(not (el.text or "") and not list(el) for el in nil)
    as_json = await admin.api.get(f"/api/users/{admin.id}")
    assert as_json.headers["Content-Type"].startswith("application/json")
    # the .json suffix wins over Accept
    suffixed = await admin.api.get(f"/api/users/{admin.id}.json",
                                   headers={"Accept": "application/xml"})
    assert suffixed.json["user"]["id"] == admin.id


async def test_post_message_with_an_xml_body(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    body = b"<message><title>Hello</title><body>Posted from XML &amp; Ruby</body></message>"
    resp = await bob.api.post("/api/messages.xml", data=body, headers=XML)
    assert resp.status == 201, resp.text
    message = _xml(resp.text)
    assert message.tag == "message"
    assert message.find("body").text == "Posted from XML & Ruby"  # type: ignore[union-attr]
    assert message.find("title").text == "Hello"  # type: ignore[union-attr]
    stored = await bob.api.get(f"/api/messages/{_int(message, 'id')}")
    assert stored.json["message"]["body"] == "Posted from XML & Ruby"


async def test_authentication_in_xml(world: World) -> None:
    admin = await world.community("Acme")
    anon = admin.api.anonymous()
    resp = await anon.post("/api/authentication.xml",
                           data={"email": admin.email, "password": PASSWORD})
    assert resp.status == 200, resp.text
    root = _xml(resp.text)
    assert root.tag == "communities" and root.get("type") == "array"
    (community,) = list(root)
    assert community.tag == "community"
    assert community.find("domain").text == admin.community.domain  # type: ignore[union-attr]
    assert _int(community, "profile/id") == admin.id
    wrong = await anon.post("/api/authentication.xml",
                            data={"email": admin.email, "password": "wrong"})
    assert wrong.status == 401
    assert wrong.headers["WWW-Authenticate"].startswith("Basic realm=")
    errors = _xml(wrong.text)
    assert errors.tag == "errors" and [e.tag for e in errors] == ["error"]
    assert errors[0].text


async def test_xml_errors_and_unsafe_xml(world: World) -> None:
    admin = await world.community()
    missing = await admin.api.get("/api/messages/999999.xml")
    assert missing.status == 404 and _xml(missing.text).tag == "errors"
    blank = await admin.api.post("/api/messages.xml", data=b"<message><body/></message>",
                                 headers=XML)
    assert blank.status == 422 and _xml(blank.text)[0].text
    bomb = (b'<?xml version="1.0"?><!DOCTYPE m [<!ENTITY a "aaaaaaaaaa">'
            b'<!ENTITY b "&a;&a;&a;&a;&a;&a;">]><message><body>&b;</body></message>')
    refused = await admin.api.post("/api/messages.xml", data=bomb, headers=XML)
    assert refused.status == 400
    xxe = (b'<?xml version="1.0"?><!DOCTYPE m [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
           b"<message><body>&x;</body></message>")
    assert (await admin.api.post("/api/messages.json", data=xxe, headers=XML)).status == 400
    count = await world.pool.fetchval("SELECT count(*) FROM messages")
    assert count == 0


def _nil_exactly_where_null(value: Any, el: ElementTree.Element, path: str = "") -> int:
    """Our XML against the JSON it renders: null is `<x nil="true"></x>` and nothing else is
    nil. Returns how many nulls it saw."""
    here = f"{path}/{el.tag}"
    if value is None:
        assert el.attrib == {"nil": "true"} and not el.text and not list(el), here
        return 1
    assert el.get("nil") is None, here
    items = list(value.values()) if isinstance(value, dict) else value
    if not isinstance(items, list):
        return 0
    assert len(list(el)) == len(items), here
    return sum(_nil_exactly_where_null(v, child, here) for v, child in zip(items, el, strict=True))


def _compare_with_fixture(ours: ElementTree.Element,
                          theirs: list[ElementTree.Element]) -> tuple[int, int]:
    """Every element both documents have (by path) carries the same `type` where both hold a
    value, and arrays name their items alike. Returns the paths compared, and of them those
    both sides hold null at (written alike: _nil_exactly_where_null and the fixture test)."""
    mine, original = forms_by_path([ours]), forms_by_path(theirs)
    typed = nil = 0
    for path in sorted(set(mine) & set(original)):
        got, expected = mine[path] - {"nil"}, original[path] - {"nil"}
        if got and expected:  # of an array path (`[]`), the names of its items
            assert got == expected, (path, got, expected)
            typed += 1
        nil += "nil" in mine[path] and "nil" in original[path]
    return typed, nil


async def test_served_xml_matches_the_original_answers(world: World) -> None:
    """GET /api/messages/:id.xml and /api/users/:id.xml as served, against the original's
    answers (Socialcastr's fixtures): element names, `type` attributes and `nil="true"`."""
    admin = await world.community()
    bob = await world.user(admin, "Bob", title="Engineer")
    field = await admin.api.post("/api/custom_fields", json={"name": "Department"})
    profile = await admin.api.put(f"/api/users/{bob.id}", json={"user": {
        "manager_id": admin.id, "contact_info": {"location": "Lisbon", "cell_phone": "+351 1"},
        "custom_fields": {str(field.json["custom_field"]["id"]): "Sales"}}})
    assert profile.status == 200, profile.text
    group = await world.group(admin, "Readers", members=(bob,))
    upload = aiohttp.FormData()
    upload.add_field("attachment", b"minutes", filename="minutes.txt", content_type="text/plain")
    attached = await bob.api.post("/api/attachments", data=upload)
    assert attached.status == 201, attached.text
    message = await post(bob, f"Hello #xml @{admin.username}", title="Trying out the API",
                         group_id=group["id"], attachment_ids=[attached.json["attachment"]["id"]])
    url = f"/api/messages/{message['id']}"
    assert (await admin.api.post(f"{url}/likes")).status == 201
    reply = await admin.api.post(f"{url}/comments", json={"comment": {"text": "Seen"}})
    assert (await bob.api.post(f"{url}/comments/{reply.json['comment']['id']}/likes")
            ).status == 201
    for path, names, least in (
        (url, ("socialcastr_message.xml", "socialcastr_messages.xml"), (120, 10)),
        (f"/api/users/{bob.id}", ("socialcastr_user.xml",), (40, 1)),
    ):
        as_json = (await admin.api.get(path + ".json")).json
        served = await admin.api.get(path + ".xml")
        assert served.status == 200, served.text
        ours = _xml(served.text)
        assert _nil_exactly_where_null(next(iter(as_json.values())), ours) >= least[1]
        documents = [fixture(name) for name in names]
        theirs = [m for d in documents for m in (list(d) if d.get("type") == "array" else [d])]
        assert ours.tag == theirs[0].tag
        typed, nil = _compare_with_fixture(ours, theirs)
        assert typed >= least[0] and nil >= least[1], (path, typed, nil)


async def test_socialcastr_posts_semicolon_separated_forms(world: World) -> None:
    """Socialcastr (Net::HTTP `set_form_data(args, ';')`, Basic auth on every request, the
    `.xml` suffix on every path): its login, a new message, and its edit."""
    admin = await world.community("Acme")
    bob = await world.user(admin, "Bob")
    ruby = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "*/*",
            "User-Agent": "Ruby"}
    login = f"email={quote_plus(bob.email)};password={quote_plus(PASSWORD)}".encode()
    resp = await bob.api.post("/api/authentication.xml", data=login, headers=ruby)
    assert resp.status == 200, resp.text
    (community,) = list(_xml(resp.text))
    # Socialcastr keeps the community whose domain it was given, and reads its profile
    assert community.find("domain").text == admin.community.domain  # type: ignore[union-attr]
    assert _int(community, "profile/id") == bob.id
    form = (b"message%5Bbody%5D=Hello+from+Ruby%3B+with+a+semicolon;"
            b"message%5Btitle%5D=Greetings")
    created = await bob.api.post("/api/messages.xml", data=form, headers=ruby)
    assert created.status == 201, created.text
    message = _xml(created.text)
    message_id = _int(message, "id")
    assert message.find("body").text == "Hello from Ruby; with a semicolon"  # type: ignore[union-attr]
    assert message.find("title").text == "Greetings"  # type: ignore[union-attr]
    edited = await bob.api.put(f"/api/messages/{message_id}.xml",
                               data=b"message%5Bbody%5D=Edited;message%5Btitle%5D=Later",
                               headers=ruby)
    assert edited.status == 200, edited.text
    stored = (await bob.api.get(f"/api/messages/{message_id}.json")).json["message"]
    assert (stored["body"], stored["title"]) == ("Edited", "Later")


async def test_command_line_client_sync_photos(world: World) -> None:
    """`socialcast sync_photos` as the command-line client runs it: the community's default
    photo id from userinfo, one quoted `OR` search for a batch of e-mail addresses, then a
    multipart photo for each user whose avatar is still the system or community default."""
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    cy = await world.user(admin, "Cy")
    own = aiohttp.FormData()
    own.add_field("user[profile_photo][data]", _png((0, 90, 200)), filename="cy.png",
                  content_type="image/png")
    assert (await cy.api.put(f"/api/users/{cy.id}", data=own)).status == 200
    cy_avatar = (await admin.api.get(f"/api/users/{cy.id}")).json["user"]["avatars"]
    info = await admin.api.get("/api/userinfo.json", headers={"Accept": "*/*"})
    assert info.status == 200, info.text
    default_photo_id = info.json["user"]["community"]["default_profile_photo_id"]
    photos = {ann.email: _png((200, 40, 40)), cy.email: _png((40, 200, 40)),
              "nobody@elsewhere.example": _png((1, 2, 3))}
    query = " OR ".join(f'"{email}"' for email in photos)
    found = await admin.api.get("/api/users/search", params={"q": query, "per_page": "50"},
                                headers={"Accept": "application/json"})
    assert found.status == 200, found.text
    users = {u["contact_info"]["email"]: u for u in found.json["users"]}
    assert set(users) == {ann.email, cy.email}
    uploaded = []
    for email, user in users.items():
        avatars = user["avatars"]
        if not (avatars["is_system_default"] or avatars["id"] == default_photo_id):
            continue  # the client leaves a photo the user chose
        form = aiohttp.FormData()
        form.add_field("user[profile_photo][data]", photos[email],
                       filename="photo_upload20240101-1-abc.png", content_type="image/png")
        resp = await admin.api.put(f"/api/users/{user['id']}", data=form,
                                   headers={"Accept": "*/*"})
        assert resp.status == 200, resp.text
        uploaded.append(email)
    assert uploaded == [ann.email]
    after = (await admin.api.get(f"/api/users/{ann.id}")).json["user"]["avatars"]
    assert after["is_system_default"] is False and isinstance(after["id"], int)
    square = await admin.api.get(URL(after["square45"]).path)
    assert square.status == 200
    pixel = Image.open(io.BytesIO(square.raw)).convert("RGB").getpixel((22, 22))
    assert isinstance(pixel, tuple)  # Ann's own photo, not Cy's nor a default
    assert all(abs(got - want) <= 8 for got, want in zip(pixel, (200, 40, 40), strict=True))
    assert (await admin.api.get(f"/api/users/{cy.id}")).json["user"]["avatars"] == cy_avatar


# --- unwrapped JSON bodies (ActiveResource 4+) -------------------------------------------------


async def test_unwrapped_message_and_comment_bodies(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    resp = await bob.api.post("/api/messages.json", json={"body": "Unwrapped hello"})
    assert resp.status == 201, resp.text
    message = resp.json["message"]
    assert message["body"] == "Unwrapped hello"
    comment = await bob.api.post(f"/api/messages/{message['id']}/comments.json",
                                 json={"text": "Unwrapped reply"})
    assert comment.status == 201, comment.text
    assert comment.json["comment"]["text"] == "Unwrapped reply"


async def test_unwrapped_update_changes_the_message_and_unknown_fields_are_422(
    world: World,
) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    message = await post(bob, "Before")
    url = f"/api/messages/{message['id']}.json"
    resp = await bob.api.put(url, json={"body": "After"})
    assert resp.status == 200, resp.text
    assert resp.json["message"]["body"] == "After"
    assert (await bob.api.get(url)).json["message"]["body"] == "After"
    for kwargs in ({"json": {"bdoy": "typo"}}, {"json": {"message": {"bdoy": "typo"}}},
                   {"data": b"<message><bdoy>typo</bdoy></message>", "headers": XML}):
        nothing = await bob.api.put(url, **kwargs)
        assert nothing.status == 422, nothing.text
        assert nothing.json["fields"] == {"message": ["names no known field"]}
    assert (await bob.api.get(url)).json["message"]["body"] == "After"
    group = await bob.api.post("/api/groups.json", json={"name": "Unwrapped group"})
    assert group.status == 201, group.text
    assert group.json["group"]["name"] == "Unwrapped group"
    renamed = await bob.api.put(f"/api/groups/{group.json['group']['id']}.json",
                                json={"description": "Now described"})
    assert renamed.status == 200 and renamed.json["group"]["description"] == "Now described"


# --- a path segment where an id belongs ------------------------------------------------------


async def test_a_non_id_segment_is_a_404_not_a_405(world: World) -> None:
    admin = await world.community()
    for method, path in (
        ("PUT", "/api/users/someone"), ("DELETE", "/api/users/someone"),
        ("POST", "/api/messages/latest"), ("GET", "/api/groups/1x/members"),
    ):
        resp = await admin.api.request(method, path)
        assert resp.status == 404, (method, path, resp.text)
        assert resp.json["code"] == "not_found"
    slug = await admin.api.get(f"/api/users/{admin.id}-{admin.username}.xml")
    assert slug.status == 200 and _int(_xml(slug.text), "id") == admin.id


# --- login through the central host ----------------------------------------------------------


async def test_login_on_the_central_host_lists_every_matching_community(world: World) -> None:
    acme = await world.community("Acme")
    globex = await world.community("Globex")
    email = "pat@shared.example"
    in_acme = await world.user(acme, "Pat", email=email)
    in_globex = await world.user(globex, "Pat", email=email)
    await world.user(await world.community("Initech"), "Pat", email=email,
                     password="another password")
    central = acme.api.anonymous()
    central.host = "api.socialcast.com"  # the command-line client's default domain
    resp = await central.post("/api/authentication.json",
                              data={"email": email, "password": PASSWORD})
    assert resp.status == 200, resp.text
    found = resp.json["communities"]
    assert [c["domain"] for c in found] == [acme.community.domain, globex.community.domain]
    assert [c["profile"]["id"] for c in found] == [in_acme.id, in_globex.id]
    assert list(found[0]) == ["id", "name", "domain", "profile"]
    wrong = await central.post("/api/authentication", data={"email": email, "password": "x"})
    assert wrong.status == 401 and wrong.headers["WWW-Authenticate"].startswith("Basic realm=")
    nobody = await central.post("/api/authentication",
                                data={"email": "ghost@nowhere.example", "password": "x"})
    assert nobody.status == 401
    # other paths of the central host still serve nothing
    assert (await central.as_user(email).get("/api/userinfo")).status == 404
    # a community's own host answers only that community
    own = await in_acme.api.post("/api/authentication")
    assert [c["domain"] for c in own.json["communities"]] == [acme.community.domain]


async def test_a_server_without_the_provision_route_answers_404_for_it() -> None:
    from aiohttp import web
    from aiohttp.test_utils import make_mocked_request

    from app.routes import ROUTES, add_routes

    app = web.Application()
    add_routes(app, [r for r in ROUTES if r.path != "/api/users/provision"])
    for method in ("POST", "GET", "PUT"):
        match = await app.router.resolve(make_mocked_request(method, "/api/users/provision"))
        assert isinstance(match.http_exception, web.HTTPNotFound), method
    found = await app.router.resolve(make_mocked_request("PUT", "/api/users/12-pat.xml"))
    assert found.get("user_id") == "12-pat" and found.get("_ext") == ".xml"


async def test_a_download_named_xml_is_no_format_suffix(world: World) -> None:
    from aiohttp import web
    from aiohttp.test_utils import make_mocked_request

    from app.routes import add_routes

    app = web.Application()
    add_routes(app)
    match = await app.router.resolve(
        make_mocked_request("GET", "/api/attachments/3/original/report.xml"))
    assert match.get("filename") == "report.xml" and "_ext" not in match
    admin = await world.community()
    missing = await admin.api.get("/api/attachments/999/original/report.xml")
    assert missing.status == 404 and missing.json["code"] == "not_found"
    xml_404 = await admin.api.get("/api/nowhere.xml")
    assert xml_404.status == 404 and _xml(xml_404.text).tag == "errors"


async def test_activeresource_xml_update_and_comment(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    message = await post(bob, "Draft")
    url = f"/api/messages/{message['id']}.xml"
    resp = await bob.api.put(url, data=b'<?xml version="1.0" encoding="UTF-8"?>\n'
                             b"<message><body>Edited in XML</body></message>", headers=XML)
    assert resp.status == 200, resp.text
    assert _xml(resp.text).find("body").text == "Edited in XML"  # type: ignore[union-attr]
    comment = await bob.api.post(f"/api/messages/{message['id']}/comments.xml",
                                 data=b"<comment><text>From XML</text></comment>", headers=XML)
    assert comment.status == 201, comment.text
    root = _xml(comment.text)
    assert root.tag == "comment" and root.find("text").text == "From XML"  # type: ignore[union-attr]


async def test_every_parameterless_get_answers_well_formed_xml(world: World) -> None:
    """Every resource the admin can list, in XML: a well-formed document whose root is the
    JSON envelope's first key (or `errors`), never a 5xx."""
    from app.routes import ROUTES

    admin = await world.community()
    bob = await world.user(admin, "Bob")
    await post(bob, "Hello #xml")
    await world.group(admin, "Readers", members=(bob,))
    checked = 0
    for route in ROUTES:
        if route.method != "GET" or ":" in route.path or route.path == "/api/realtime":
            continue
        as_json = await admin.api.get(route.path + ".json")
        resp = await admin.api.get(route.path + ".xml")
        assert resp.status == as_json.status, (route.path, resp.text)
        if not resp.headers.get("Content-Type", "").startswith("application/xml"):
            continue  # not a JSON answer (the OpenAPI document is JSON either way)
        root = _xml(resp.text)
        if resp.status >= 400:
            assert root.tag == "errors", route.path
        elif isinstance(as_json.json, dict) and len(as_json.json) == 1:
            assert root.tag == next(iter(as_json.json)).replace("_", "-"), route.path
        checked += 1
    assert checked >= 20


# --- every create and update: a request naming no known field is a 422 -----------------------


async def _snapshot(world: World) -> dict[str, str]:
    """A digest of every table's rows: equal snapshots mean nothing changed."""
    tables = await world.pool.fetch(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
    out: dict[str, str] = {}
    async with world.pool.acquire() as conn:
        for row in tables:
            name = row["tablename"]
            out[name] = await conn.fetchval(
                f'SELECT md5(coalesce(string_agg(t::text, \'|\' ORDER BY t::text), \'\')) '
                f'FROM "{name}" t')
    return out


async def test_every_write_that_names_no_known_field_is_a_422(world: World) -> None:
    """Every route that declares a body root (each create and update), sent a body naming only
    an unknown field (wrapped in the root, unwrapped, in XML) or nothing at all: a 422 and no
    row changed anywhere. The same route sent a known field unwrapped does what it says."""
    from app.routes import ROUTES

    admin = await world.community()
    bob, cy, dee = [await world.user(admin, n) for n in ("Bob", "Cy", "Dee")]
    group = await world.group(admin, "Sweepers", members=(cy,), chat=True)
    gid = group["id"]
    memberships = (await admin.api.get(f"/api/groups/{gid}/memberships")).json
    cy_membership = next(m["id"] for m in memberships["group_memberships"]
                         if m["user_id"] == cy.id)
    message = await post(admin, "Swept")
    comment = await admin.api.post(f"/api/messages/{message['id']}/comments",
                                   json={"comment": {"text": "A comment"}})
    topic = await admin.api.post("/api/topics", json={"topic": {"name": "sweeping"}})
    conversation = await admin.api.post("/api/conversations", json={
        "conversation": {"members_emails": f"{bob.email} {cy.email}"},
        "remark": {"text": "Hi"}})
    system = await admin.api.post("/api/external_systems", json={
        "external_system": {"name": "Intranet", "url": "https://intranet.example"}})
    system_id = system.json["external_system"]["id"]
    extension = await admin.api.post("/api/reach_extensions", json={
        "reach_extension": {"name": "Sidebar", "external_system_id": system_id,
                            "button_type": "verb"}})
    made = (comment, topic, conversation, system, extension)
    assert all(r.status == 201 for r in made), [r.text for r in made]
    stream_id = await world.pool.fetchval(
        "SELECT id FROM streams WHERE group_id = $1 AND kind = 'group'", gid)
    ids = {
        "user_id": bob.id, "group_id": gid, "membership_id": cy_membership,
        "message_id": message["id"], "stream_id": stream_id, "id": 0,
        "topic_id": topic.json["topic"]["id"],
        "external_system_id": system_id,
        "reach_extension_id": extension.json["reach_extension"]["id"],
    }
    comment_id = comment.json["comment"]["id"]
    conversation_id = conversation.json["conversation"]["id"]
    # (method, path) -> (the id of `:id`, an unwrapped body naming a known field, its status)
    known: dict[tuple[str, str], tuple[int, dict[str, Any], int]] = {
        ("POST", "/api/users"): (0, {"email": "new@sweep.example"}, 201),
        ("PUT", "/api/users/:user_id"): (0, {"first_name": "Robert"}, 200),
        ("POST", "/api/groups"): (0, {"name": "Fresh"}, 201),
        ("PUT", "/api/groups/:group_id"): (0, {"description": "Tidy"}, 200),
        ("POST", "/api/groups/:group_id/memberships"): (0, {"user_id": dee.id}, 201),
        ("PUT", "/api/groups/:group_id/memberships/:membership_id"): (0, {"role": "admin"}, 200),
        ("POST", "/api/messages"): (0, {"body": "Posted"}, 201),
        ("PUT", "/api/messages/:message_id"): (0, {"body": "Edited"}, 200),
        ("POST", "/api/streams/:stream_id/messages"): (0, {"body": "In the stream"}, 201),
        ("POST", "/api/messages/:message_id/comments"): (0, {"text": "Reply"}, 201),
        ("PUT", "/api/messages/:message_id/comments/:id"): (comment_id, {"text": "Fixed"}, 200),
        ("POST", "/api/polls"): (0, {"question": "Lunch?", "poll_answers_attributes": [
            {"answer": "Now"}, {"answer": "Later"}]}, 201),
        ("POST", "/api/meetings"): (0, {"title": "Plan", "meeting_type": "video_call",
                                        "starts_at": "2030-05-01T10:00:00+02:00"}, 201),
        ("POST", "/api/thanks"): (0, {"body": "Great work", "recipients": [bob.id]}, 201),
        ("POST", "/api/topics"): (0, {"name": "brooms"}, 201),
        ("PUT", "/api/topics/:topic_id"): (0, {"description": "All about sweeping"}, 200),
        ("POST", "/api/conversations"): (0, {"members_emails": dee.email}, 201),
        ("PUT", "/api/conversations/:id"): (conversation_id, {"name": "Team"}, 200),
        ("POST", "/api/conversations/:conversation_id/remarks"): (0, {"text": "Hello"}, 201),
        ("POST", "/api/groups/:group_id/chat_messages"): (0, {"body": "Chat"}, 201),
        ("POST", "/api/external_systems"): (0, {"name": "Wiki", "url": "https://wiki.example"},
                                            201),
        ("PUT", "/api/external_systems/:external_system_id"): (
            0, {"name": "Portal", "url": "https://portal.example"}, 200),
        ("POST", "/api/external_systems/:external_system_id/messages"): (
            0, {"body": "From the intranet"}, 201),
        ("POST", "/api/reach_extensions"): (0, {"name": "Footer", "button_type": "verb",
                                                "external_system_id": system_id}, 201),
        ("PUT", "/api/reach_extensions/:reach_extension_id"): (0, {"name": "Header"}, 200),
        ("POST", "/api/groups/:group_id/webhooks"): (0, {"name": "CI"}, 201),
    }
    ids["conversation_id"] = conversation_id
    rooted = [r for r in ROUTES if r.root is not None]
    assert {(r.method, r.path) for r in rooted} == set(known)
    for route in rooted:
        assert route.root is not None
        the_id, fields, status = known[(route.method, route.path)]
        path = route.path
        for name, value in {**ids, "id": the_id}.items():
            path = path.replace(f":{name}", str(value))
        xml_root = route.root.replace("_", "-")
        before = await _snapshot(world)
        for kwargs in (
            {"json": {route.root: {"zz_unknown": "x"}}},
            {"json": {"zz_unknown": "x"}},
            {"json": {}},
            {"data": {"zz_unknown": "x"}},
            {"data": f"<{xml_root}><zz-unknown>x</zz-unknown></{xml_root}>".encode(),
             "headers": XML},
        ):
            resp = await admin.api.request(route.method, path + ".json", **kwargs)
            assert resp.status == 422, (route.method, route.path, kwargs, resp.text)
            assert resp.json["code"] == "validation_failed"
        assert await _snapshot(world) == before, (route.method, route.path)
        resp = await admin.api.request(route.method, path + ".json", json=fields)
        assert resp.status == status, (route.method, route.path, resp.text)
        assert await _snapshot(world) != before, (route.method, route.path)
