"""Flags (bookmarks): create (idempotent), the viewer's `flag` on messages, the Bookmarked
stream, remove (only your own), tenancy."""

from __future__ import annotations

from tests.app.views.feed_support import make_group, message_ids, post, stream_id
from tests.support import World


async def test_flag_a_message_and_find_it_bookmarked(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    message = await post(admin, "Read later")
    await post(admin, "Not flagged")
    created = await bob.api.post(f"/api/messages/{message['id']}/flags")
    assert created.status == 201, created.text
    assert list(created.json) == ["flag"] and list(created.json["flag"]) == ["id"]
    flag_id = created.json["flag"]["id"]
    again = await bob.api.post(f"/api/messages/{message['id']}/flags")
    assert again.status == 200 and again.json == {"flag": {"id": flag_id}}
    shown = (await bob.api.get(f"/api/messages/{message['id']}")).json["message"]
    assert shown["flag"] == {"id": flag_id}
    # the flag is the viewer's: the author sees none
    assert (await admin.api.get(f"/api/messages/{message['id']}")).json["message"][
        "flag"] is None
    bookmarked = await stream_id(bob, "Bookmarked")
    assert message_ids(await bob.api.get(f"/api/streams/{bookmarked}/messages")) == [
        message["id"]
    ]
    assert message_ids(await bob.api.get("/api/messages",
                                         params={"stream_id": bookmarked})) == [message["id"]]
    admin_bookmarked = await stream_id(admin, "Bookmarked")
    assert message_ids(await admin.api.get(f"/api/streams/{admin_bookmarked}/messages")) == []


async def test_remove_only_your_own_flag(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    message = await post(admin, "Read later")
    flag_id = (await bob.api.post(f"/api/messages/{message['id']}/flags")).json["flag"]["id"]
    path = f"/api/messages/{message['id']}/flags/{flag_id}"
    assert (await admin.api.delete(path)).status == 404
    removed = await bob.api.delete(path)
    assert removed.status == 204 and removed.text == ""
    assert (await bob.api.delete(path)).status == 404
    assert (await bob.api.get(f"/api/messages/{message['id']}")).json["message"]["flag"] is None
    bookmarked = await stream_id(bob, "Bookmarked")
    assert message_ids(await bob.api.get(f"/api/streams/{bookmarked}/messages")) == []


async def test_flags_of_invisible_messages_are_404(world: World) -> None:
    admin = await world.community("Acme")
    bob = await world.user(admin, "Bob")
    private = await make_group(world, admin, "Board", permission="private")
    secret = await post(admin, "secret", group_id=private)
    assert (await bob.api.post(f"/api/messages/{secret['id']}/flags")).status == 404
    public = await post(admin, "public")
    flag_id = (await bob.api.post(f"/api/messages/{public['id']}/flags")).json["flag"]["id"]
    other = await world.community("Other")
    assert (await other.api.post(f"/api/messages/{public['id']}/flags")).status == 404
    assert (await other.api.delete(
        f"/api/messages/{public['id']}/flags/{flag_id}")).status == 404
    assert (await bob.api.get(f"/api/messages/{public['id']}")).json["message"]["flag"] == {
        "id": flag_id
    }
