"""Comments: create (JSON, forms, attachments), the Comment JSON, thread recipients and tags,
lists, show, edit (author only), delete (author, group admin, community admin), archived
groups, tenancy, and the fixed query count of the list."""

from __future__ import annotations

import io

import aiohttp
from PIL import Image

from tests.app.views.feed_support import comment, make_group, message_ids, post, set_interacted
from tests.conftest import QueryLog
from tests.shapes import USER_EXTRAS, captured_keys
from tests.support import World

COMMENT_KEYS = [
    "id", "url", "user", "text", "html_body", "created_at", "updated_at", "attachments",
    "media_files", "permalink_url", "editable", "deletable", "likable", "external_resources",
    "likes", "likes_count", "thumbnail_url", "recipients", "watchable", "watch", "tags",
]
EMBEDDED_USER_KEYS = [*captured_keys("User — embedded"), *USER_EXTRAS]


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), (10, 20, 30)).save(out, "PNG")
    return out.getvalue()


async def test_create_comment_answers_only_the_comment_with_its_recipients_and_tags(
    world: World,
) -> None:
    admin = await world.community("Acme")
    bob = await world.user(admin, "Bob")
    paul = await world.user(admin, "Paul")
    message = await post(admin, f"Plans #roadmap @{bob.username}", title="Big Plans")
    resp = await bob.api.post(f"/api/messages/{message['id']}/comments",
                              json={"comment": {"text": f"Agreed @{paul.username} #q3"}})
    assert resp.status == 201, resp.text
    # single-root clients (ActiveResource) take the id from the only top-level key
    assert list(resp.json) == ["comment"]
    created = resp.json["comment"]
    assert list(created) == COMMENT_KEYS
    assert list(created["user"]) == EMBEDDED_USER_KEYS
    base = f"https://{admin.community.domain}"
    mid, cid = message["id"], created["id"]
    assert created["url"] == f"{base}/api/messages/{mid}/comments/{cid}"
    assert created["permalink_url"] == f"{base}/messages/{mid}-big-plans/comments/{cid}"
    assert created["text"] == f"Agreed @{paul.username} #q3"
    assert f'data-user-id="{paul.id}"' in created["html_body"]
    assert created["html_body"].startswith('<div class="markdown-body"><p>Agreed ')
    assert (created["editable"], created["deletable"], created["likable"]) == (True, True, False)
    assert (created["likes"], created["likes_count"], created["thumbnail_url"]) == ([], 0, None)
    # whom the comment addresses, and its own tags
    assert [r["id"] for r in created["recipients"]] == [paul.id]
    assert all("mention_name" in r for r in created["recipients"])
    assert created["tags"] == [{"name": "q3", "url": f"{base}/topics/q3"}]
    assert (created["watchable"], created["watch"]) == (False, None)
    # as others see it
    shown = await admin.api.get(f"/api/messages/{mid}/comments/{cid}")
    assert shown.status == 200 and list(shown.json) == ["comment"]
    assert (shown.json["comment"]["editable"], shown.json["comment"]["deletable"],
            shown.json["comment"]["likable"]) == (False, True, True)  # admin may delete
    assert shown.json["comment"]["recipients"] == created["recipients"]
    assert shown.json["comment"]["tags"] == created["tags"]
    thread = (await admin.api.get(f"/api/messages/{mid}")).json["message"]
    assert thread["comments_count"] == 1 and thread["comments"][0]["id"] == cid
    assert thread["comments"][0]["recipients"] == created["recipients"]
    assert thread["comments"][0]["tags"] == created["tags"]
    listed = (await admin.api.get(f"/api/messages/{mid}/comments")).json["comments"]
    assert listed[0]["recipients"] == created["recipients"]
    # the message's own tags stay its body's; the comment's mention reaches paul's @Mentions
    assert [t["name"] for t in thread["tags"]] == ["roadmap"]


async def test_comment_accepts_forms_and_rejects_blank_text(world: World) -> None:
    admin = await world.community()
    message = await post(admin, "Hi")
    form = await admin.api.post(f"/api/messages/{message['id']}/comments",
                                data={"comment[text]": "from a form"})
    assert form.status == 201 and form.json["comment"]["text"] == "from a form"
    blank = await admin.api.post(f"/api/messages/{message['id']}/comments",
                                 json={"comment": {"text": " "}})
    assert blank.status == 422 and blank.json["fields"] == {"comment[text]": ["can't be blank"]}
    missing = await admin.api.post(f"/api/messages/{message['id']}/comments", json={})
    assert missing.status == 422
    assert (await admin.api.get(f"/api/messages/{message['id']}")).json["message"][
        "comments_count"] == 1


async def test_comment_with_an_uploaded_file_and_with_attachment_ids(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    message = await post(admin, "Show me")
    form = aiohttp.FormData()
    form.add_field("comment[text]", "a picture")
    form.add_field("comment[attachment]", png(), filename="pic.png", content_type="image/png")
    resp = await bob.api.post(f"/api/messages/{message['id']}/comments", data=form)
    assert resp.status == 201, resp.text
    (attachment,) = resp.json["comment"]["attachments"]
    assert attachment["filename"].endswith("-pic.png")
    assert resp.json["comment"]["media_files"][0]["attachment_id"] == attachment["id"]
    upload = aiohttp.FormData()
    upload.add_field("attachment", b"%PDF-1.4 notes", filename="notes.pdf",
                     content_type="application/pdf")
    uploaded = await bob.api.post("/api/attachments", data=upload)
    assert uploaded.status == 201, uploaded.text
    attachment_id = uploaded.json["attachment"]["id"]
    with_ids = await bob.api.post(f"/api/messages/{message['id']}/comments", json={
        "comment": {"text": "notes", "attachment_ids": [attachment_id]}})
    assert with_ids.status == 201, with_ids.text
    assert [a["id"] for a in with_ids.json["comment"]["attachments"]] == [attachment_id]
    assert with_ids.json["comment"]["media_files"] == []
    # someone else's attachment can't be claimed
    stolen = await admin.api.post(f"/api/messages/{message['id']}/comments", json={
        "comment": {"text": "mine now", "attachment_ids": [attachment_id]}})
    assert stolen.status == 422
    thread = (await admin.api.get(f"/api/messages/{message['id']}")).json["message"]
    assert [len(c["attachments"]) for c in thread["comments"]] == [1, 1]


async def test_comments_list_oldest_first_and_paged(world: World) -> None:
    admin = await world.community()
    message = await post(admin, "Thread")
    made = [await comment(admin, message["id"], f"c{i}") for i in range(5)]
    listed = await admin.api.get(f"/api/messages/{message['id']}/comments")
    assert listed.status == 200 and list(listed.json) == ["comments"]
    assert [c["id"] for c in listed.json["comments"]] == [c["id"] for c in made]
    page2 = await admin.api.get(f"/api/messages/{message['id']}/comments",
                                params={"per_page": 2, "page": 2})
    assert [c["text"] for c in page2.json["comments"]] == ["c2", "c3"]
    assert all(list(c) == COMMENT_KEYS for c in page2.json["comments"])
    other = await post(admin, "Other thread")
    wrong = await admin.api.get(f"/api/messages/{other['id']}/comments/{made[0]['id']}")
    assert wrong.status == 404


async def test_a_comment_bumps_its_thread(world: World) -> None:
    admin = await world.community()
    old = await post(admin, "old")
    new = await post(admin, "new")
    await set_interacted(world, old["id"], 1_500_000_000)
    assert message_ids(await admin.api.get("/api/messages"))[0] == new["id"]
    await comment(admin, old["id"])
    listed = await admin.api.get("/api/messages")
    assert message_ids(listed)[0] == old["id"]
    assert listed.json["messages"][0]["last_interacted_at"] > 1_500_000_000


async def test_only_the_author_edits_a_comment(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    paul = await world.user(admin, "Paul")
    message = await post(admin, "Thread")
    created = await comment(bob, message["id"], "typo")
    path = f"/api/messages/{message['id']}/comments/{created['id']}"
    assert (await admin.api.put(path, json={"comment": {"text": "admin"}})).status == 403
    assert (await paul.api.put(path, json={"comment": {"text": "paul"}})).status == 403
    edited = await bob.api.put(path, data={"comment[text]": f"fixed #tidy @{paul.username}"})
    assert edited.status == 200, edited.text
    assert edited.json["comment"]["text"] == f"fixed #tidy @{paul.username}"
    assert f'data-user-id="{paul.id}"' in edited.json["comment"]["html_body"]
    assert (await bob.api.put(path, json={"comment": {"text": ""}})).status == 422
    assert (await admin.api.get(path)).json["comment"]["text"] == f"fixed #tidy @{paul.username}"


async def test_delete_comment_by_author_group_admin_or_community_admin(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    author = await world.user(admin, "Author")
    poster = await world.user(admin, "Poster")
    group_id = await make_group(world, owner, members=[author, poster])
    message = await post(poster, "Thread", group_id=group_id)
    mid = message["id"]
    first = await comment(author, mid, "one")
    second = await comment(author, mid, "two")
    third = await comment(author, mid, "three")
    # the message's author is not the comment's: 403
    assert (await poster.api.delete(f"/api/messages/{mid}/comments/{first['id']}")).status == 403
    assert (await author.api.delete(f"/api/messages/{mid}/comments/{first['id']}")).status == 204
    assert (await owner.api.delete(f"/api/messages/{mid}/comments/{second['id']}")).status == 204
    resp = await admin.api.delete(f"/api/messages/{mid}/comments/{third['id']}")
    assert resp.status == 204 and resp.text == ""
    assert (await author.api.delete(f"/api/messages/{mid}/comments/{third['id']}")).status == 404
    thread = (await poster.api.get(f"/api/messages/{mid}")).json["message"]
    assert (thread["comments_count"], thread["comments"]) == (0, [])


async def test_comments_of_another_community_or_private_group_are_404(world: World) -> None:
    admin = await world.community("Acme")
    bob = await world.user(admin, "Bob")
    private = await make_group(world, admin, "Board", permission="private")
    secret = await post(admin, "secret", group_id=private)
    secret_comment = await comment(admin, secret["id"])
    other = await world.community("Other")
    for member, mid, cid in ((bob, secret["id"], secret_comment["id"]),
                             (other, secret["id"], secret_comment["id"])):
        path = f"/api/messages/{mid}/comments/{cid}"
        assert (await member.api.get(path)).status == 404
        assert (await member.api.put(path, json={"comment": {"text": "x"}})).status == 404
        assert (await member.api.delete(path)).status == 404
        assert (await member.api.get(f"/api/messages/{mid}/comments")).status == 404
    assert (await admin.api.get(f"/api/messages/{secret['id']}/comments/"
                                f"{secret_comment['id']}")).status == 200


async def test_comment_list_query_count_is_fixed(world: World, query_log: QueryLog) -> None:
    admin = await world.community()
    people = await world.many_users(admin, 3)
    message = await post(admin, "Busy thread")
    for i in range(15):
        person = people[i % 3]
        c = await comment(person, message["id"], f"reply {i} https://example.com/{i}")
        assert (await admin.api.post(
            f"/api/messages/{message['id']}/comments/{c['id']}/likes")).status == 201
    path = f"/api/messages/{message['id']}/comments"
    await admin.api.get(path)
    query_log.reset()
    one = await admin.api.get(path, params={"per_page": 1})
    small = len(query_log)
    query_log.reset()
    many = await admin.api.get(path, params={"per_page": 500})
    assert len(query_log) == small
    assert len(one.json["comments"]) == 1 and len(many.json["comments"]) == 15
    assert all(c["likes_count"] == 1 for c in many.json["comments"])
