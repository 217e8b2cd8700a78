"""Migration 0021: every write to what a message's JSON shows besides its row bumps its thread's
version or its community's directory version, in the writer's transaction; writes that change
nothing shown bump nothing; deleting a message bumps nothing."""

from __future__ import annotations

from storage.db import transaction
from tests.app.views.feed_support import comment, post
from tests.support import Member, World


async def thread(world: World, message_id: int) -> int:
    version = await world.pool.fetchval(
        "SELECT version FROM thread_versions WHERE message_id = $1", message_id)
    return int(version or 0)


async def directory(world: World, member: Member) -> int:
    version = await world.pool.fetchval(
        "SELECT version FROM directory_versions WHERE community_id = $1", member.community.id)
    return int(version or 0)


async def test_each_write_to_a_thread_bumps_its_version(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    # a message's own recipients and tags are in its page row: posting bumps nothing
    mid = (await post(admin, f"Plans for #friday, @{bob.username}"))["id"]
    other = (await post(admin, "Other"))["id"]
    assert await thread(world, mid) == 0
    bumps = 0

    async def bumped(label: str) -> None:
        nonlocal bumps
        now = await thread(world, mid)
        assert now > bumps, f"{label} did not bump the thread"
        bumps = now

    cid = (await comment(bob, mid, f"Me #too @{admin.username}"))["id"]
    await bumped("a comment (with its recipient and topic)")
    edited = await bob.api.put(f"/api/messages/{mid}/comments/{cid}",
                               json={"comment": {"text": "Me, edited"}})
    assert edited.status == 200, edited.text
    await bumped("a comment's edit")
    like = await bob.api.post(f"/api/messages/{mid}/likes")
    assert like.status == 201, like.text
    await bumped("a like")
    comment_like = await admin.api.post(f"/api/messages/{mid}/comments/{cid}/likes")
    assert comment_like.status == 201, comment_like.text
    await bumped("a comment's like")
    unlike = await bob.api.delete(f"/api/messages/{mid}/likes/{like.json['like']['id']}")
    assert unlike.status in (200, 204), unlike.text
    await bumped("an unlike")
    upload = await world.pool.fetchval(
        "INSERT INTO attachments (community_id, uploader_id, filename, content_type, byte_size,"
        " storage_key) VALUES ($1, $2, 'a.txt', 'text/plain', 1, 'k-0021') RETURNING id",
        admin.community.id, bob.id)
    await world.pool.execute(
        "UPDATE attachments SET subject_type = 'comment', subject_id = $2 WHERE id = $1",
        upload, cid)
    await bumped("a comment's attachment")
    await world.pool.execute(
        "UPDATE attachments SET thumbnails = '{\"square\": \"k\"}' WHERE id = $1", upload)
    assert await thread(world, mid) == bumps, "a thumbnail (made on a GET) bumped the thread"
    deleted = await bob.api.delete(f"/api/messages/{mid}/comments/{cid}")
    assert deleted.status in (200, 204), deleted.text
    await bumped("a comment's deletion")
    assert await thread(world, other) == 0, "another thread moved"

    # a deleted message's likes and comments go with it: nothing is bumped for it any more
    again = await comment(bob, mid, "One more")
    assert again["id"]
    await bumped("a comment")
    gone = await admin.api.delete(f"/api/messages/{mid}")
    assert gone.status in (200, 204), gone.text
    assert await thread(world, mid) == bumps


async def test_what_many_messages_show_bumps_the_directory(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    elsewhere = await world.community("Elsewhere")
    await post(admin, "See https://example.com/0021 #release")
    seen = await directory(world, admin)

    async def bumps(label: str, expected: bool = True) -> None:
        nonlocal seen
        now = await directory(world, admin)
        assert (now > seen) is expected, f"{label}: {seen} -> {now}"
        seen = now

    renamed = await bob.api.put(f"/api/users/{bob.id}", json={"user": {"first_name": "Rob"}})
    assert renamed.status == 200, renamed.text
    await bumps("a user's name")
    same = await bob.api.put(f"/api/users/{bob.id}", json={"user": {"first_name": "Rob"}})
    assert same.status == 200, same.text
    await bumps("the same name again", expected=False)
    await world.pool.execute("UPDATE users SET session_epoch = session_epoch + 1 WHERE id = $1",
                             bob.id)
    await bumps("a column no message shows", expected=False)
    await post(admin, "Again https://example.com/0021")  # the link's upsert: a no-op update
    await bumps("a link posted again", expected=False)
    await world.pool.execute(
        "UPDATE external_resources SET title = 'Example' WHERE community_id = $1",
        admin.community.id)
    await bumps("a link's title")
    await world.pool.execute(
        "UPDATE topics SET name = 'releases' WHERE community_id = $1 AND name = 'release'",
        admin.community.id)
    await bumps("a topic's name")
    async with transaction(world.pool) as conn:  # as a provisioning upload: one bump
        for first_name in ("Ann", "Bea", "Cy"):
            await conn.execute("UPDATE users SET first_name = $2 WHERE id = $1",
                               bob.id, first_name)
    assert await directory(world, admin) == seen + 1, "one bump per transaction"
    seen += 1
    deactivated = await admin.api.delete(f"/api/users/{bob.id}")
    assert deactivated.status in (200, 204), deactivated.text
    await bumps("a deactivation")
    assert await directory(world, elsewhere) == 0, "another community moved"
