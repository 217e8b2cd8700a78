"""Messages: posting (JSON, bracket forms, multipart), the Message JSON, bodies (mentions, tags,
links), reading, editing, deleting, lists and their filters, search, hiding, sharing,
announcements, visibility and tenancy, and the fixed query count of the lists."""

from __future__ import annotations

import io
import itertools
from typing import Any

import aiohttp
import pytest
from PIL import Image

from app.actions.messages import NewMessage, create_message
from app.context import Viewer
from app.render import page_messages
from tests.app.views.feed_support import (
    CAPTURED_MESSAGE,
    comment,
    external,
    groupname_of,
    make_group,
    message_ids,
    post,
    set_interacted,
    stream_id,
)
from tests.conftest import QueryLog
from tests.shapes import EXTERNAL_RESOURCE_EXTRAS, USER_EXTRAS, captured_keys
from tests.support import Member, World

SOURCE_KEYS = ["name", "url", "formal_name", "id"]
TAG_KEYS = ["name", "url"]
RESOURCE_KEYS = [*captured_keys("External resource"), *EXTERNAL_RESOURCE_EXTRAS]


# --- the Message JSON ------------------------------------------------------------------------


async def test_create_message_answers_the_captured_shape(world: World) -> None:
    admin = await world.community("Acme")
    bob = await world.user(admin, "Bob")
    group_id = await make_group(world, bob, "MonkeyPuzzle")
    resp = await bob.api.post(
        "/api/messages.json", json={"message": {"group_id": group_id, "body": "Monkey puzzle!"}}
    )
    assert resp.status == 201, resp.text
    assert list(resp.json) == ["message"]
    message = resp.json["message"]
    # the same 57 keys in the same order, ending with in_origin_stream
    assert list(message) == list(CAPTURED_MESSAGE)
    assert list(message)[-1] == "in_origin_stream" and message["in_origin_stream"] is True
    for key, captured in CAPTURED_MESSAGE.items():
        if captured is not None and key != "user":
            assert type(message[key]) is type(captured), key
    assert list(message["user"]) == [*CAPTURED_MESSAGE["user"], *USER_EXTRAS]
    assert list(message["group"]) == list(CAPTURED_MESSAGE["group"])
    assert list(message["groups"][0]) == list(CAPTURED_MESSAGE["groups"][0])
    assert list(message["recipients"][0]) == list(CAPTURED_MESSAGE["recipients"][0])  # a group
    assert list(message["source"]) == list(CAPTURED_MESSAGE["source"]) == SOURCE_KEYS
    base = f"https://{admin.community.domain}"
    assert message["source"] == {"name": "API", "url": f"{base}/api", "formal_name": "API",
                                 "id": "api"}
    assert message["body"] == "Monkey puzzle!"
    assert message["html_body"] == '<div class="markdown-body"><p>Monkey puzzle!</p></div>'
    assert (message["title"], message["action"], message["message_type"]) == (
        "", "", "status_message"
    )
    assert message["url"] == f"{base}/api/messages/{message['id']}"
    assert message["permalink_url"] == f"{base}/messages/{message['id']}"
    assert message["group"]["id"] == group_id
    assert message["recipients"][0]["id"] == group_id
    assert message["recipients"][0]["mention_name"] == await groupname_of(world, group_id)
    # the author's own message: editable and deletable, not likable
    assert (message["editable"], message["deletable"], message["likable"]) == (True, True, False)
    assert (message["commentable"], message["shareable"]) == (True, True)
    assert message["created_at"].endswith("+00:00") and "." not in message["created_at"]
    assert isinstance(message["last_interacted_at"], int)
    # the same message read back has the same keys minus in_origin_stream
    shown = await bob.api.get(f"/api/messages/{message['id']}")
    assert shown.status == 200
    assert list(shown.json["message"]) == list(CAPTURED_MESSAGE)[:-1]


async def test_message_without_group_has_empty_group_and_groups(world: World) -> None:
    admin = await world.community()
    message = await post(admin, "Hello everyone")
    assert message["group"] == {} and message["groups"] == [] and message["recipients"] == []


async def test_create_accepts_bracket_forms_and_multipart(world: World) -> None:
    admin = await world.community()
    group_id = await make_group(world, admin)
    form = await admin.api.post("/api/messages", data={
        "message[body]": "From a form", "message[title]": "A title", "message[group_id]": "",
    })
    assert form.status == 201, form.text
    assert form.json["message"]["group"] == {}
    assert form.json["message"]["title"] == "A title"
    semicolons = await admin.api.post(
        "/api/messages", data=f"message[body]=semi;message[group_id]={group_id}",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert semicolons.status == 201, semicolons.text
    assert semicolons.json["message"]["group"]["id"] == group_id
    multipart = aiohttp.FormData()
    multipart.add_field("message[body]", "From multipart")
    multipart.add_field("message[group_id]", str(group_id))
    resp = await admin.api.post("/api/messages", data=multipart)
    assert resp.status == 201, resp.text
    assert resp.json["message"]["body"] == "From multipart"
    assert resp.json["message"]["group"]["id"] == group_id


async def test_message_attachments_are_claimed_rendered_and_deleted_with_it(
    world: World,
) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    image = io.BytesIO()
    Image.new("RGB", (64, 48), (1, 2, 3)).save(image, "PNG")
    ids = []
    for data, name in ((image.getvalue(), "napkin.png"), (b"%PDF-1.4", "design.pdf")):
        form = aiohttp.FormData()
        form.add_field("attachment", data, filename=name, content_type="application/octet-stream")
        uploaded = await bob.api.post("/api/attachments", data=form)
        assert uploaded.status == 201, uploaded.text
        ids.append(uploaded.json["attachment"]["id"])
    stolen = await admin.api.post("/api/messages", json={
        "message": {"body": "not mine", "attachment_ids": ids}})
    assert stolen.status == 422
    message = await post(bob, "See attached", attachment_ids=ids)
    assert [a["id"] for a in message["attachments"]] == ids
    assert [a["filename"] for a in message["attachments"]] == [
        f"{ids[0]}-napkin.png", f"{ids[1]}-design.pdf"
    ]
    (media,) = message["media_files"]
    assert media["attachment_id"] == ids[0] and media["content_type"] == "image/png"
    listed = (await admin.api.get(f"/api/users/{bob.id}/messages")).json["messages"][0]
    assert listed["attachments"] == message["attachments"]
    form = aiohttp.FormData()
    form.add_field("attachment", b"just a file", filename="notes.txt")
    third = (await bob.api.post("/api/attachments", data=form)).json["attachment"]["id"]
    only_file = await post(bob, "", attachment_ids=[third])  # a file alone is a message
    assert only_file["body"] == "" and [a["id"] for a in only_file["attachments"]] == [third]
    assert (await bob.api.delete(f"/api/messages/{message['id']}")).status == 204
    left = await world.pool.fetchval("SELECT count(*) FROM attachments WHERE id = ANY($1)", ids)
    assert left == 0


async def test_titled_message_urls_carry_the_slug_and_the_slug_is_accepted(world: World) -> None:
    admin = await world.community()
    message = await post(admin, "See this", title="Web Conferencing | GoToMeeting")
    slug = f"{message['id']}-web-conferencing--gotomeeting"
    assert message["url"].endswith(f"/api/messages/{slug}")
    assert message["permalink_url"].endswith(f"/messages/{slug}")
    by_slug = await admin.api.get(f"/api/messages/{slug}.json")
    assert by_slug.status == 200 and by_slug.json["message"]["id"] == message["id"]
    assert (await admin.api.get("/api/messages/999999")).status == 404
    assert (await admin.api.get("/api/messages/abc")).status == 404


async def test_body_mentions_tags_and_links(world: World) -> None:
    admin = await world.community("Acme")
    paul = await world.user(admin, "Paul")
    team = await make_group(world, admin, "Team")
    secret = await make_group(world, paul, "Secret", permission="private")
    team_name = await groupname_of(world, team)
    secret_name = await groupname_of(world, secret)
    body = (f"Lunch with @{paul.username} and @{team_name} and @{secret_name} and @nobody "
            "#Sales #meetings see https://example.com/page.")
    message = await post(admin, body)
    base = f"https://{admin.community.domain}"
    html = message["html_body"]
    assert f'data-user-id="{paul.id}"' in html
    assert f'data-tooltip-url="/api/users/{paul.id}-{paul.username.lower()}.json"' in html
    assert f'href="{base}/groups/{team}-{team_name.lower()}"' in html
    assert f"@{secret_name}</a>" not in html  # a group the author can't read is not linked
    assert "@nobody</a>" not in html and "@nobody" in html
    assert f'href="{base}/topics/sales"' in html
    assert 'href="https://example.com/page"' in html
    assert message["body"] == body  # the raw text is kept
    recipients = [(r["type"], r["id"]) for r in message["recipients"]]
    assert recipients == [("User", paul.id), ("Group", team)]
    assert message["recipients"][0]["mention_name"] == paul.username
    # tags: lower-case, by name
    assert message["tags"] == [
        {"name": "meetings", "url": f"{base}/topics/meetings"},
        {"name": "sales", "url": f"{base}/topics/sales"},
    ]
    assert all(list(t) == TAG_KEYS for t in message["tags"])
    (resource,) = message["external_resources"]
    assert list(resource) == RESOURCE_KEYS
    assert resource["url"] == resource["title"] == "https://example.com/page"
    assert (resource["oembed"], resource["media_files"], resource["tags"]) == (None, [], [])
    # a second message with the same link shares its external resource
    again = await post(admin, "again https://example.com/page")
    assert again["external_resources"][0]["id"] == resource["id"]


async def test_message_url_makes_a_link(world: World) -> None:
    admin = await world.community()
    message = await post(admin, "Our meeting tool", url="http://www.gotomeeting.com/fec/")
    assert message["external_url"] == "http://www.gotomeeting.com/fec/"
    assert (message["message_type"], message["action"]) == ("link", "posted a link")
    assert [r["url"] for r in message["external_resources"]] == [
        "http://www.gotomeeting.com/fec/"
    ]


async def test_invalid_messages_are_422(world: World) -> None:
    admin = await world.community()
    blank = await admin.api.post("/api/messages", json={"message": {"body": "  "}})
    assert blank.status == 422
    assert blank.json["fields"] == {"message[body]": ["can't be blank"]}
    assert blank.json["errors"] == ["Body can't be blank"]
    missing = await admin.api.post("/api/messages", json={})
    assert missing.status == 422
    bad_type = await admin.api.post(
        "/api/messages", json={"message": {"body": "x", "message_type": "thanks"}}
    )
    assert bad_type.status == 422 and "message[message_type]" in bad_type.json["fields"]
    nobody = await admin.api.post(
        "/api/messages", json={"message": {"body": "x", "recipients": "ghost"}}
    )
    assert nobody.status == 422 and "message[recipients]" in nobody.json["fields"]
    listed = await admin.api.get("/api/messages", params={"stream_id": "", "per_page": 50})
    assert message_ids(listed) == []  # nothing was created by the refused requests


# --- posting into groups ---------------------------------------------------------------------


async def test_posting_into_groups_follows_membership_and_state(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    public = await make_group(world, bob, "Public", members=[carol])
    private = await make_group(world, bob, "Private", permission="private")
    archived = await make_group(world, bob, "Old", members=[carol], state="archived")
    quiet = await make_group(world, bob, "Quiet", members=[carol], post_enabled=False)
    dave = await world.user(admin, "Dave")

    async def attempt(member: Any, group_id: int) -> int:
        resp = await member.api.post(
            "/api/messages", json={"message": {"body": "hi", "group_id": group_id}}
        )
        return resp.status

    assert await attempt(carol, public) == 201
    assert await attempt(dave, public) == 403  # readable, but not a member
    assert await attempt(dave, private) == 422  # invisible: like a group that does not exist
    assert await attempt(dave, 999999) == 422
    assert await attempt(carol, archived) == 403
    assert await attempt(carol, quiet) == 403
    assert await attempt(bob, quiet) == 201  # the group's admin still posts
    assert await attempt(admin, public) == 201  # community admins post anywhere they read
    other = await world.community("Other")
    assert await attempt(other, public) == 422


async def test_post_into_a_group_stream(world: World) -> None:
    admin = await world.community()
    group_id = await make_group(world, admin, "Team")
    stream_id = await world.pool.fetchval(
        "SELECT id FROM streams WHERE group_id = $1 AND kind = 'group'", group_id
    )
    resp = await admin.api.post(f"/api/streams/{stream_id}/messages",
                                json={"message": {"body": "in the stream"}})
    assert resp.status == 201, resp.text
    assert resp.json["message"]["group"]["id"] == group_id
    listed = await admin.api.get(f"/api/groups/{group_id}/messages")
    assert message_ids(listed) == [resp.json["message"]["id"]]
    other = await world.community("Other")
    assert (await other.api.post(f"/api/streams/{stream_id}/messages",
                                 json={"message": {"body": "x"}})).status == 404


# --- visibility and tenancy ------------------------------------------------------------------


async def test_private_group_messages_never_leak(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    eve = await world.user(admin, "Eve")
    private = await make_group(world, bob, "Private", permission="private")
    secret = await post(bob, "secret plans #plans", group_id=private)
    await comment(bob, secret["id"], "more secrets")
    visible = await post(bob, "public news #plans")
    mid = secret["id"]
    for path in (f"/api/messages/{mid}", f"/api/messages/{mid}/comments",
                 f"/api/messages/{mid}/likes", f"/api/messages/{mid}/poll",
                 f"/api/groups/{private}/messages"):
        assert (await eve.api.get(path)).status == 404, path
    assert (await eve.api.post(f"/api/messages/{mid}/likes")).status == 404
    assert (await eve.api.post(f"/api/messages/{mid}/flags")).status == 404
    assert (await eve.api.post(f"/api/messages/{mid}/comments",
                               json={"comment": {"text": "hi"}})).status == 404
    assert (await eve.api.put(f"/api/messages/{mid}",
                              json={"message": {"body": "x"}})).status == 404
    assert (await eve.api.delete(f"/api/messages/{mid}")).status == 404
    for path, params in (
        ("/api/messages", {}),
        ("/api/messages", {"stream_id": await stream_id(eve, "Company")}),
        ("/api/messages", {"tag": "plans"}),
        (f"/api/users/{bob.id}/messages", {}),
        ("/api/messages/search", {"q": "plans"}),
    ):
        listed = message_ids(await eve.api.get(path, params=params))
        assert mid not in listed, path
    assert message_ids(await eve.api.get("/api/messages", params={"tag": "plans"})) == [
        visible["id"]
    ]
    # a member reads it
    assert (await bob.api.get(f"/api/messages/{mid}")).status == 200
    # even a community admin who is not a member does not
    assert (await admin.api.get(f"/api/messages/{mid}")).status == 404


async def test_another_communitys_message_is_404_everywhere(world: World) -> None:
    admin = await world.community("Acme")
    group_id = await make_group(world, admin, "Open")
    message = await post(admin, "Acme only")
    c = await comment(admin, message["id"])
    other = await world.community("Other")
    mid = message["id"]
    for path in (f"/api/messages/{mid}", f"/api/messages/{mid}/comments",
                 f"/api/messages/{mid}/comments/{c['id']}", f"/api/messages/{mid}/likes",
                 f"/api/messages/{mid}/poll", f"/api/users/{admin.id}/messages",
                 f"/api/groups/{group_id}/messages"):
        assert (await other.api.get(path)).status == 404, path
    assert (await other.api.put(f"/api/messages/{mid}",
                                json={"message": {"body": "mine"}})).status == 404
    assert (await other.api.delete(f"/api/messages/{mid}")).status == 404
    assert (await other.api.post(f"/api/messages/{mid}/likes")).status == 404
    assert message_ids(await other.api.get("/api/messages/search", params={"q": "Acme"})) == []
    other_company = await stream_id(other, "Company")
    assert message_ids(await other.api.get(f"/api/streams/{other_company}/messages")) == []
    assert (await admin.api.get(f"/api/messages/{mid}")).json["message"]["body"] == "Acme only"


async def test_external_contributors_read_their_groups_and_what_is_addressed_to_them(
    world: World,
) -> None:
    admin = await world.community()
    ext = await external(world, admin)
    shared_group = await make_group(world, admin, "Partners", permission="external_contributor",
                                    members=[ext])
    public = await make_group(world, admin, "Public")
    company = await post(admin, "company-wide news")
    in_public = await post(admin, "public group news", group_id=public)
    in_partners = await post(admin, "partner news", group_id=shared_group)
    addressed = await post(admin, "hello partner", recipients=[ext.username])
    assert (await ext.api.get(f"/api/messages/{company['id']}")).status == 404
    assert (await ext.api.get(f"/api/messages/{in_public['id']}")).status == 404
    assert (await ext.api.get(f"/api/messages/{in_partners['id']}")).status == 200
    assert (await ext.api.get(f"/api/messages/{addressed['id']}")).status == 200
    search = message_ids(await ext.api.get("/api/messages/search", params={"q": "news"}))
    assert search == [in_partners["id"]]
    # an external contributor posts only into their groups
    assert (await ext.api.post("/api/messages",
                               json={"message": {"body": "x"}})).status == 403
    mine = await post(ext, "from outside", group_id=shared_group)
    assert mine["group"]["external_contributor"] is True


# --- editing and deleting --------------------------------------------------------------------


async def test_edit_by_author_group_admin_or_community_admin(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    member = await world.user(admin, "Member")
    paul = await world.user(admin, "Paul")
    group_id = await make_group(world, owner, members=[member])
    message = await post(member, "first #old", group_id=group_id)
    mid = message["id"]
    denied = await paul.api.put(f"/api/messages/{mid}", json={"message": {"body": "hacked"}})
    assert denied.status == 403
    edited = await member.api.put(
        f"/api/messages/{mid}", json={"message": {"body": f"second @{paul.username} #new"}}
    )
    assert edited.status == 200, edited.text
    assert edited.json["message"]["body"] == f"second @{paul.username} #new"
    assert [t["name"] for t in edited.json["message"]["tags"]] == ["new"]
    assert [(r["type"], r["id"]) for r in edited.json["message"]["recipients"]] == [
        ("Group", group_id), ("User", paul.id)
    ]
    by_group_admin = await owner.api.put(f"/api/messages/{mid}",
                                         data={"message[title]": "Titled"})
    assert by_group_admin.status == 200
    by_admin = await admin.api.put(f"/api/messages/{mid}", json={"message": {"body": "third"}})
    assert by_admin.status == 200
    shown = (await paul.api.get(f"/api/messages/{mid}")).json["message"]
    assert (shown["title"], shown["body"]) == ("Titled", "third")
    assert [r["id"] for r in shown["recipients"]] == [group_id]  # the edit dropped @paul
    assert (shown["editable"], shown["likable"]) == (False, True)
    blank = await member.api.put(f"/api/messages/{mid}",
                                 json={"message": {"body": "", "title": ""}})
    assert blank.status == 422


async def test_delete_message_is_204_and_takes_the_thread(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    member = await world.user(admin, "Member")
    other = await world.user(admin, "Other")
    group_id = await make_group(world, owner, members=[member, other])
    message = await post(member, "to delete", group_id=group_id)
    mid = message["id"]
    await comment(other, mid)
    assert (await other.api.post(f"/api/messages/{mid}/likes")).status == 201
    assert (await other.api.delete(f"/api/messages/{mid}")).status == 403
    deleted = await owner.api.delete(f"/api/messages/{mid}")  # the group's admin
    assert deleted.status == 204 and deleted.text == ""
    assert (await member.api.get(f"/api/messages/{mid}")).status == 404
    left = await world.pool.fetchval(
        "SELECT (SELECT count(*) FROM comments WHERE message_id = $1) "
        "+ (SELECT count(*) FROM likes WHERE message_id = $1)", mid
    )
    assert left == 0
    own = await post(member, "mine")
    assert (await member.api.delete(f"/api/messages/{own['id']}")).status == 204
    assert (await member.api.delete(f"/api/messages/{own['id']}")).status == 404


async def test_archived_group_is_readable_but_not_writable(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    group_id = await make_group(world, bob, members=[admin])
    message = await post(bob, "before archiving", group_id=group_id)
    await world.pool.execute("UPDATE groups SET state = 'archived' WHERE id = $1", group_id)
    shown = await admin.api.get(f"/api/messages/{message['id']}")
    assert shown.status == 200 and shown.json["message"]["commentable"] is False
    assert shown.json["message"]["likable"] is False
    assert (await admin.api.post(f"/api/messages/{message['id']}/comments",
                                 json={"comment": {"text": "late"}})).status == 403
    assert (await bob.api.put(f"/api/messages/{message['id']}",
                              json={"message": {"body": "x"}})).status == 403
    assert message_ids(await admin.api.get(f"/api/groups/{group_id}/messages")) == [
        message["id"]
    ]


# --- announcements ---------------------------------------------------------------------------


async def test_announcements_are_for_community_admins_and_stick_to_home(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    refused = await bob.api.post("/api/messages", json={
        "message": {"body": "hear ye", "message_type": "broadcast_message"}})
    assert refused.status == 403
    announcement = await post(admin, "Office closed Friday", message_type="broadcast_message",
                              days_of_stickiness=3)
    assert announcement["message_type"] == "broadcast_message"
    assert announcement["days_of_stickiness"] == 3
    assert announcement["sticky_for_current_user"] is True
    assert announcement["action"] == "made an announcement"
    newer = await post(carol, "newer chatter")
    await world.pool.execute(
        "INSERT INTO follows (community_id, follower_id, followed_id) VALUES ($1, $2, $3)",
        admin.community.id, bob.id, carol.id,
    )
    # in bob's Home although he follows nobody who posted it; sticky: first, before newer ones
    home = message_ids(await bob.api.get("/api/messages"))
    assert home == [announcement["id"], newer["id"]]
    plain = await post(admin, "not sticky", message_type="broadcast_message")
    assert plain["days_of_stickiness"] == 0 and plain["sticky_for_current_user"] is False


# --- lists -----------------------------------------------------------------------------------


async def test_lists_page_by_last_interaction_with_next_page(world: World) -> None:
    admin = await world.community()
    posted = [await post(admin, f"message {i}") for i in range(5)]
    for i, m in enumerate(posted):
        await set_interacted(world, m["id"], 1_600_000_000 + i * 100)
    ids = [m["id"] for m in posted]
    first = await admin.api.get("/api/messages", params={"per_page": 2})
    assert list(first.json) == ["messages", "messages_next_page"]
    assert message_ids(first) == [ids[4], ids[3]] and first.json["messages_next_page"] == 2
    second = await admin.api.get("/api/messages", params={"per_page": 2, "page": 2})
    assert message_ids(second) == [ids[2], ids[1]] and second.json["messages_next_page"] == 3
    last = await admin.api.get("/api/messages", params={"per_page": 2, "page": 3})
    assert message_ids(last) == [ids[0]] and last.json["messages_next_page"] is None
    past = await admin.api.get("/api/messages", params={"per_page": 2, "page": 9})
    assert past.json == {"messages": [], "messages_next_page": None}
    exact = await admin.api.get("/api/messages", params={"per_page": 5})
    assert exact.json["messages_next_page"] is None
    # a comment brings the oldest thread to the top
    await comment(admin, ids[0])
    assert message_ids(await admin.api.get("/api/messages", params={"per_page": 1})) == [ids[0]]
    # since: interacted with after that moment
    since = await admin.api.get("/api/messages", params={"since": 1_600_000_250})
    assert message_ids(since) == [ids[0], ids[4], ids[3]]
    for bad in ({"per_page": "abc"}, {"page": "0"}, {"since": "yesterday"},
                {"comments_limit": "-1"}):
        assert (await admin.api.get("/api/messages", params=bad)).status == 400, bad


async def test_tag_user_and_external_system_filters(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    tagged = await post(bob, "about #Widgets")
    plain = await post(bob, "about nothing")
    mine = await post(admin, "admin's #widgets")
    tags = message_ids(await admin.api.get("/api/messages", params={"tag": "WIDGETS"}))
    assert tags == [mine["id"], tagged["id"]]
    tagged_comment = await post(bob, "tag comes later")
    await comment(admin, tagged_comment["id"], "adding #widgets")
    tags = message_ids(await admin.api.get("/api/messages", params={"tag": "widgets"}))
    assert tags[0] == tagged_comment["id"] and len(tags) == 3
    by_bob = message_ids(await admin.api.get(f"/api/users/{bob.id}/messages"))
    assert by_bob == [tagged_comment["id"], plain["id"], tagged["id"]]
    by_bob_param = message_ids(await admin.api.get("/api/messages",
                                                   params={"user_id": bob.id}))
    assert by_bob_param == by_bob
    system = await _external_system(admin)
    quiet = await _external_system(admin)
    await world.pool.execute("UPDATE messages SET external_system_id = $2 WHERE id = $1",
                             plain["id"], system)
    from_system = message_ids(await admin.api.get(f"/api/external_systems/{system}/messages"))
    assert from_system == [plain["id"]]
    assert message_ids(await admin.api.get(f"/api/external_systems/{quiet}/messages")) == []
    # an id that is no system of this community is a 404, not an empty list
    other = await world.community("Other")
    assert (await other.api.get(f"/api/external_systems/{system}/messages")).status == 404
    assert (await admin.api.get("/api/external_systems/999999/messages")).status == 404
    assert (await admin.api.get("/api/users/999999/messages")).status == 404


async def test_search_is_ranked_paged_and_visibility_filtered(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    private = await make_group(world, admin, "Board", permission="private")
    weak = await post(bob, "the quarterly report is late")
    strong = await post(bob, "Quarterly report: the quarterly numbers", title="Quarterly report")
    hidden = await post(admin, "quarterly report for the board", group_id=private)
    await post(bob, "nothing relevant")
    found = message_ids(await bob.api.get("/api/messages/search", params={"q": "quarterly"}))
    assert found == [strong["id"], weak["id"]]
    assert hidden["id"] in message_ids(
        await admin.api.get("/api/messages/search", params={"q": "quarterly report"})
    )
    paged = await bob.api.get("/api/messages/search", params={"q": "report", "per_page": 1})
    assert message_ids(paged) == [strong["id"]] and paged.json["messages_next_page"] == 2
    nothing = await bob.api.get("/api/messages/search", params={"q": "  "})
    assert nothing.json == {"messages": [], "messages_next_page": None}
    phrase = await bob.api.get("/api/messages/search", params={"q": '"is late"'})
    assert message_ids(phrase) == [weak["id"]]


async def test_comments_and_likes_limits(world: World) -> None:
    admin = await world.community()
    people = await world.many_users(admin, 4)
    message = await post(admin, "popular")
    for i, person in enumerate(people):
        await comment(person, message["id"], f"comment {i}")
        assert (await person.api.post(f"/api/messages/{message['id']}/likes")).status == 201
    full = (await admin.api.get("/api/messages")).json["messages"][0]
    assert full["comments_count"] == 4 and len(full["comments"]) == 4
    assert [c["text"] for c in full["comments"]] == [f"comment {i}" for i in range(4)]
    assert full["likes_count"] == 4 and len(full["likes"]) == 4
    limited = (await admin.api.get("/api/messages", params={
        "comments_limit": 2, "likes_limit": 1})).json["messages"][0]
    # the latest comments, oldest first; counts stay whole
    assert [c["text"] for c in limited["comments"]] == ["comment 2", "comment 3"]
    assert limited["comments_count"] == 4
    assert len(limited["likes"]) == 1 and limited["likes_count"] == 4
    none = (await admin.api.get("/api/messages", params={
        "comments_limit": 0, "likes_limit": 0})).json["messages"][0]
    assert (none["comments"], none["likes"]) == ([], [])
    one = (await admin.api.get(f"/api/messages/{message['id']}", params={
        "comments_limit": 1})).json["message"]
    assert [c["text"] for c in one["comments"]] == ["comment 3"] and len(one["likes"]) == 4
    # the viewer's own like is the most relevant one, whoever liked last
    for person in people:
        company = await stream_id(person, "Company")
        listed = await person.api.get(f"/api/streams/{company}/messages",
                                      params={"likes_limit": 1})
        (like,) = listed.json["messages"][0]["likes"]
        assert like["user"]["id"] == person.id and like["unlikable"] is True


async def test_hide_message_takes_it_out_of_the_group_stream(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    member = await world.user(admin, "Member")
    group_id = await make_group(world, owner, members=[member])
    other_group = await make_group(world, owner)
    message = await post(member, "off topic", group_id=group_id)
    kept = await post(member, "on topic", group_id=group_id)
    elsewhere = await post(owner, "elsewhere", group_id=other_group)
    mid = message["id"]
    denied = await member.api.post(f"/api/groups/{group_id}/hide_message",
                                   json={"message_id": mid})
    assert denied.status == 403
    wrong = await owner.api.post(f"/api/groups/{group_id}/hide_message",
                                 json={"message_id": elsewhere["id"]})
    assert wrong.status == 422
    hidden = await owner.api.post(f"/api/groups/{group_id}/hide_message",
                                  data={"message_id": str(mid)})
    assert hidden.status == 200, hidden.text
    assert hidden.json["message"]["hidden"] is True
    assert message_ids(await member.api.get(f"/api/groups/{group_id}/messages")) == [kept["id"]]
    # still readable by id and in the company stream
    assert (await member.api.get(f"/api/messages/{mid}")).status == 200
    company = await stream_id(member, "Company")
    assert mid in message_ids(await member.api.get(f"/api/streams/{company}/messages"))
    assert mid in message_ids(await member.api.get("/api/messages"))  # Home: a group of hers
    other = await world.community("Other")
    assert (await other.api.post(f"/api/groups/{group_id}/hide_message",
                                 json={"message_id": mid})).status == 404


async def test_shared_messages(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    private = await make_group(world, admin, "Board", permission="private", members=[bob])
    original = await post(admin, "worth sharing")
    await comment(admin, original["id"])
    sharing = await post(bob, "look at this", shared_message_id=original["id"])
    shared = sharing["shared_message"]
    assert shared["id"] == original["id"]
    assert "comments" not in shared and "likes" not in shared and "shared_message" not in shared
    assert list(shared) == [k for k in CAPTURED_MESSAGE
                            if k not in ("comments", "likes", "shared_message",
                                         "in_origin_stream")]
    assert shared["comments_count"] == 1
    again = (await admin.api.get(f"/api/messages/{original['id']}")).json["message"]
    assert again["share_count"] == 1
    secret = await post(admin, "board only", group_id=private)
    assert secret["shareable"] is False
    refused = await bob.api.post("/api/messages", json={
        "message": {"body": "leak", "shared_message_id": secret["id"]}})
    assert refused.status == 422
    assert (await admin.api.delete(f"/api/messages/{original['id']}")).status == 204
    after = (await bob.api.get(f"/api/messages/{sharing['id']}")).json["message"]
    assert after["shared_message"] is None


async def test_list_query_count_does_not_grow_with_the_page(
    world: World, query_log: QueryLog, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every page rendered afresh (a kept message reads nothing: app.render.page_messages)
    monkeypatch.setattr(page_messages.Store, "keep", lambda *args: None)
    admin = await world.community()
    people = await world.many_users(admin, 3)
    group_id = await make_group(world, admin, "Team", members=people)
    for i in range(12):
        author = people[i % 3]
        message = await post(author, f"message {i} #tag{i % 2} @{admin.username} "
                                     f"https://example.com/{i}", group_id=group_id)
        for person in people:
            if person is not author:
                c = await comment(person, message["id"], f"reply #x @{author.username}")
                assert (await person.api.post(
                    f"/api/messages/{message['id']}/likes")).status == 201
                assert (await author.api.post(
                    f"/api/messages/{message['id']}/comments/{c['id']}/likes")).status == 201
        sharing = await post(admin, f"sharing {i}", shared_message_id=message["id"])
        await comment(author, sharing["id"], "thanks for sharing")
        await admin.api.post(f"/api/messages/{message['id']}/flags")
    await admin.api.get("/api/messages")  # warm the credentials cache
    query_log.reset()
    one = await admin.api.get("/api/messages", params={"per_page": 1})
    small = len(query_log)
    query_log.reset()
    many = await admin.api.get("/api/messages", params={
        "per_page": 500, "comments_limit": 5, "likes_limit": 5})
    # two fewer for the whole page: a page's rows carry their extras and their group, and every
    # shared message is on it (page 1 shows a share whose message is not: its extras and its
    # group are read)
    assert len(query_log) == small - 2
    assert len(one.json["messages"]) == 1 and len(many.json["messages"]) == 24
    assert sum(len(m["comments"]) for m in many.json["messages"]) == 36
    for path in (f"/api/groups/{group_id}/messages", f"/api/users/{people[0].id}/messages",
                 "/api/messages/search"):
        params = {"q": "message"} if "search" in path else {}
        query_log.reset()
        await admin.api.get(path, params={**params, "per_page": 1})
        small = len(query_log)
        query_log.reset()
        await admin.api.get(path, params={**params, "per_page": 500})
        assert len(query_log) == small, path


async def test_create_message_action_for_other_code(world: World) -> None:
    """What thanks, webhooks and external systems call: their type, action, source, external
    system, extensions (kept as given, key order included) and posting without membership."""
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    group_id = await make_group(world, admin, "Announcements")
    system = await _external_system(admin)
    viewer = Viewer(id=bob.id, community_id=admin.community.id, role="member")
    base = f"https://{admin.community.domain}"
    message_id = await create_message(world.pool, viewer, base, NewMessage(
        body="Build passed", message_type="external_event", action="reported a build",
        source="external_system", external_system_id=system, group_id=group_id,
        require_membership=False,
        extensions=[{"extension_type": "build", "zeta": 1, "alpha": {"b": 2, "a": 1}}],
    ))
    shown = (await admin.api.get(f"/api/messages/{message_id}")).json["message"]
    assert (shown["message_type"], shown["action"]) == ("external_event", "reported a build")
    assert shown["source"] == {"name": "External System", "url": f"{base}/api",
                               "formal_name": "External System", "id": "external_system"}
    (extension,) = shown["extensions"]
    assert list(extension) == ["extension_type", "zeta", "alpha"]
    assert list(extension["alpha"]) == ["b", "a"]
    assert message_ids(
        await admin.api.get(f"/api/external_systems/{system}/messages")) == [message_id]
    refused = await bob.api.post("/api/messages", json={
        "message": {"body": "x", "group_id": group_id}})
    assert refused.status == 403  # through the API bob must be a member


_systems = itertools.count(1)


async def _external_system(admin: Member) -> int:
    resp = await admin.api.post("/api/external_systems", json={"external_system": {
        "name": f"CI {next(_systems)}", "url": "https://ci.example.com"}})
    assert resp.status == 201, resp.text
    return int(resp.json["external_system"]["id"])


async def test_a_page_shows_what_its_items_own_reads_show(world: World) -> None:
    """A page reads its messages' recipients, tags, polls and attachments, and its comments'
    recipients, tags and attachments, in fewer statements than the single reads do (issue 13):
    each shows the same as those reads, and a poll bound to a message of another type shows."""
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    group_id = await make_group(world, admin, "Team", members=[bob])

    async def upload(member: Member, name: str) -> int:
        form = aiohttp.FormData()
        form.add_field("attachment", b"some text", filename=name,
                       content_type="application/octet-stream")
        resp = await member.api.post("/api/attachments", data=form)
        assert resp.status == 201, resp.text
        return int(resp.json["attachment"]["id"])

    made = await bob.api.post("/api/polls", data={
        "poll[question]": "Which?", "poll[poll_answers_attributes][0][answer]": "This",
        "poll[poll_answers_attributes][1][answer]": "That"})
    assert made.status == 201, made.text
    poll = made.json["poll"]
    posted = await post(bob, f"#plan #beta for @{admin.username}", group_id=group_id,
                        message_type="question", poll_id=poll["id"],
                        attachment_ids=[await upload(bob, "a.txt")])
    plain = await post(admin, "nothing attached")
    resp = await admin.api.post(f"/api/messages/{posted['id']}/comments", json={"comment": {
        "text": f"#zeta #alpha thanks @{bob.username}",
        "attachment_ids": [await upload(admin, "c.txt")]}})
    assert resp.status == 201, resp.text
    await comment(bob, posted["id"], "no extras")
    await comment(bob, plain["id"], "plain")
    # a group only addressed (no message of the page is in it): read apart from the page's own
    crew = await make_group(world, admin, "Crew")
    groupname = (await admin.api.get(f"/api/groups/{crew}")).json["group"]["groupname"]
    addressed = await post(admin, f"ping @{groupname}")

    listed = {m["id"]: m for m in (await admin.api.get("/api/messages")).json["messages"]}
    one = (await admin.api.get(f"/api/messages/{posted['id']}")).json["message"]
    assert listed[posted["id"]] == one
    assert listed[addressed["id"]] == (
        await admin.api.get(f"/api/messages/{addressed['id']}")).json["message"]
    assert [r["id"] for r in listed[addressed["id"]]["recipients"]] == [crew]
    message = listed[posted["id"]]
    assert message["poll"]["id"] == poll["id"] and message["embed"] == f"/polls/{poll['id']}"
    assert [t["name"] for t in message["tags"]] == ["beta", "plan"]
    assert [r["id"] for r in message["recipients"]] == [group_id, admin.id]
    assert message["attachments"] == posted["attachments"] and len(message["attachments"]) == 1
    assert listed[plain["id"]]["poll"] is None and listed[plain["id"]]["attachments"] == []
    # the comments as the thread's own list renders them (its own reads)
    for mid in (posted["id"], plain["id"]):
        thread = (await admin.api.get(f"/api/messages/{mid}/comments")).json["comments"]
        assert listed[mid]["comments"] == thread
    first = message["comments"][0]
    assert [t["name"] for t in first["tags"]] == ["alpha", "zeta"]
    assert [r["id"] for r in first["recipients"]] == [bob.id]
    assert len(first["attachments"]) == 1
    assert message["comments"][1]["tags"] == message["comments"][1]["recipients"] == []


async def test_a_renamed_author_shows_renamed_on_the_next_page(world: World) -> None:
    """The forms of a user are shared across pages by value (app.render.feed.user_form): a
    rename shows at once, in every form."""
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    mine = await post(admin, "hello")
    await comment(bob, mine["id"])
    assert (await bob.api.post(f"/api/messages/{mine['id']}/likes")).status == 201
    await post(bob, f"hi @{admin.username}")
    before = (await admin.api.get("/api/messages")).json["messages"]
    assert before[0]["user"]["first_name"] == "Bob"
    renamed = await bob.api.put(f"/api/users/{bob.id}", json={"user": {"first_name": "Rob"}})
    assert renamed.status == 200, renamed.text
    after = (await admin.api.get("/api/messages")).json["messages"]
    assert after[0]["user"]["first_name"] == "Rob" and after[0]["user"]["name"].startswith("Rob ")
    assert after[1]["comments"][0]["user"] == after[0]["user"]
    assert after[1]["likes"][0]["user"]["name"] == after[0]["user"]["name"]


async def test_the_201_renders_mentioned_and_addressed_users_as_a_read_does(
    world: World,
) -> None:
    """The 201 of a post renders the users it mentions or addresses (by name or by id) from
    the rows the posting read to resolve them, not read again: the same JSON as a read."""
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    dan = await world.user(admin, "Dan")
    group_id = await make_group(world, admin, "Team", members=[bob])
    team = await groupname_of(world, group_id)
    resp = await bob.api.post("/api/messages", json={"message": {
        "body": f"hi @{admin.username} and @{bob.username} and @{team}",
        "recipients": [carol.username, {"type": "User", "id": dan.id}]}})
    assert resp.status == 201, resp.text
    message = resp.json["message"]
    assert [r["id"] for r in message["recipients"]] == [admin.id, bob.id, group_id, carol.id,
                                                        dan.id]
    shown = (await bob.api.get(f"/api/messages/{message['id']}")).json["message"]
    assert message["recipients"] == shown["recipients"]
    assert message["user"] == shown["user"]
