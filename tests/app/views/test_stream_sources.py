"""Streams read as an indexed union of sources (docs/feed.md, migration 0012): what a viewer's
streams hold follows joins, leaves, follows, unfollows, privacy changes, edits, deletes, hides and
comments at once, deep pages and sticky announcements stay in order, and the copies of
last_interacted_at on recipient and topic rows stay in step (and are backfilled)."""

from __future__ import annotations

from storage import feed_backfill
from tests.app.views.feed_support import comment, make_group, message_ids, post, stream_id
from tests.support import Member, World


async def _home(member: Member, **params: str) -> list[int]:
    return message_ids(await member.api.get("/api/messages", params=params))


async def _stream(member: Member, name: str, **params: str) -> list[int]:
    sid = await stream_id(member, name)
    return message_ids(await member.api.get(f"/api/streams/{sid}/messages", params=params))


async def test_home_follows_memberships_follows_and_privacy(world: World) -> None:
    admin = await world.community()
    me = await world.user(admin, "Me")
    author = await world.user(admin, "Author")
    group = await make_group(world, author, "Closed", permission="private")
    in_group = (await post(author, "in the group", group_id=group))["id"]
    plain = (await post(author, "no group"))["id"]
    assert await _home(me) == []
    # join: the group's messages appear; leave: they go
    await world.pool.execute(
        "INSERT INTO group_memberships (community_id, group_id, user_id) VALUES ($1, $2, $3)",
        admin.community.id, group, me.id)
    assert await _home(me) == [in_group]
    await world.pool.execute(
        "DELETE FROM group_memberships WHERE group_id = $1 AND user_id = $2", group, me.id)
    assert await _home(me) == []
    # follow: the author's readable messages appear (not those of a private group I left)
    assert (await me.api.post(f"/api/users/{author.id}/followers")).status in (200, 201)
    assert await _home(me) == [plain]
    # the group turns public: readable, so the followed author's message there appears too
    await world.pool.execute("UPDATE groups SET permission = 'public' WHERE id = $1", group)
    assert await _home(me) == [plain, in_group]
    assert (await me.api.delete(
        f"/api/users/{author.id}/followers/{me.id}")).status in (200, 204)
    assert await _home(me) == []


async def test_comments_edits_deletes_and_hides_move_every_stream(world: World) -> None:
    admin = await world.community()
    me = await world.user(admin, "Me")
    team = await make_group(world, admin, "Team", members=[me])
    first = (await post(admin, f"@{me.username} look at #roadmap"))["id"]
    second = (await post(admin, f"@{me.username} and #roadmap again"))["id"]
    in_team = (await post(admin, "team news #roadmap", group_id=team))["id"]
    assert await _stream(me, "@Mentions") == [second, first]
    assert await _home(me, tag="roadmap") == [in_team, second, first]
    # a comment moves the thread up in @Mentions and in the tag's list (the copies follow)
    await comment(admin, first, "bump")
    assert await _stream(me, "@Mentions") == [first, second]
    assert await _home(me, tag="roadmap") == [first, in_team, second]
    rows = await world.pool.fetch(
        "SELECT r.last_interacted_at = m.last_interacted_at AS same FROM message_recipients r "
        "JOIN messages m ON m.id = r.message_id WHERE m.id = ANY($1::bigint[]) "
        "UNION ALL SELECT t.last_interacted_at = m.last_interacted_at FROM message_topics t "
        "JOIN messages m ON m.id = t.message_id WHERE m.id = ANY($1::bigint[])",
        [first, second, in_team])
    assert rows and all(r["same"] for r in rows)
    # an edit that drops the mention and the tag drops the message from both lists
    edited = await admin.api.put(f"/api/messages/{second}",
                                 json={"message": {"body": "nothing for you"}})
    assert edited.status == 200, edited.text
    assert await _stream(me, "@Mentions") == [first]
    assert await _home(me, tag="roadmap") == [first, in_team]
    # a hide leaves the group's stream only; a delete leaves everything
    hidden = await admin.api.post(f"/api/groups/{team}/hide_message",
                                  json={"message_id": in_team})
    assert hidden.status == 200, hidden.text
    assert await _stream(me, "Team") == []
    assert in_team in await _home(me)
    assert (await admin.api.delete(f"/api/messages/{first}")).status == 204
    assert await _stream(me, "@Mentions") == []
    assert first not in await _home(me)


async def test_deep_pages_and_sticky_announcements_keep_the_order(world: World) -> None:
    admin = await world.community()
    me = await world.user(admin, "Me")
    team = await make_group(world, admin, "Team", members=[me])
    friend = await world.user(admin, "Friend")
    assert (await me.api.post(f"/api/users/{friend.id}/followers")).status in (200, 201)
    posted = []
    for i in range(9):
        who, fields = [(admin, {"group_id": team}), (friend, {}), (me, {})][i % 3]
        posted.append((await post(who, f"message {i}", **fields))["id"])
    sticky = (await post(admin, "read me first", message_type="broadcast_message",
                         days_of_stickiness=3))["id"]
    late = (await post(friend, "newest"))["id"]
    newest_first = [late, *reversed(posted)]
    pages = [await _home(me, page=str(p), per_page="3") for p in range(1, 6)]
    assert [m for page in pages for m in page] == [sticky, *newest_first]
    company = [await _stream(me, "Company", page=str(p), per_page="4") for p in range(1, 4)]
    assert [m for page in company for m in page] == [sticky, *newest_first]


async def test_backfill_fills_rows_older_than_the_migration(world: World) -> None:
    admin = await world.community()
    me = await world.user(admin, "Me")
    older = (await post(admin, f"@{me.username} older #topic"))["id"]
    newer = (await post(admin, f"@{me.username} newer #topic"))["id"]
    await comment(admin, older, "bump")  # older is now the most recent
    # rows as a database upgraded from before migration 0012 has them
    await world.pool.execute("UPDATE message_recipients SET last_interacted_at = NULL")
    await world.pool.execute("UPDATE message_topics SET last_interacted_at = NULL")
    # exact before the backfill (the pages also read rows not filled yet) ...
    assert await _stream(me, "@Mentions") == [older, newer]
    assert await _home(me, tag="topic") == [older, newer]
    filled = await feed_backfill.backfill(world.pool, batch=1)
    assert filled["message_recipients"] >= 2 and filled["message_topics"] == 2
    assert await world.pool.fetchval(
        "SELECT count(*) FROM message_recipients WHERE last_interacted_at IS NULL") == 0
    # ... and after it
    assert await _stream(me, "@Mentions") == [older, newer]
    assert await _home(me, tag="topic") == [older, newer]
    assert await feed_backfill.backfill(world.pool, batch=10) == {
        "message_recipients": 0, "message_topics": 0}


async def test_tag_overrides_stream_id_and_user_and_system_narrow_every_list(
    world: World,
) -> None:
    """Issue 9: `tag` overrides stream_id on GET /api/messages; user_id and external_system_id
    narrow /api/streams/:id/messages, /api/users/:id/messages and
    /api/external_systems/:id/messages too."""
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    team = await make_group(world, admin, "Team", members=[bob])
    outside = (await post(admin, "company news #launch"))["id"]
    bobs = (await post(bob, "team news #launch", group_id=team))["id"]
    admins = (await post(admin, "team plan", group_id=team))["id"]
    team_stream = await stream_id(admin, "Team")
    # tag overrides stream_id: the Company stream's messages with the topic
    tagged = await _home(admin, tag="launch", stream_id=str(team_stream))
    assert tagged == [bobs, outside]
    # user_id narrows a stream given by path or by stream_id
    by_path = message_ids(await admin.api.get(f"/api/streams/{team_stream}/messages",
                                              params={"user_id": str(bob.id)}))
    assert by_path == [bobs]
    assert await _home(admin, stream_id=str(team_stream), user_id=str(admin.id)) == [admins]
    # external_system_id narrows a user's messages, and user_id a system's
    system = await world.pool.fetchval(
        "INSERT INTO external_systems (community_id, name, system_url, client_identifier, "
        "client_secret_hash) VALUES ($1, 'CRM', 'https://crm.example', 'crm-narrow', 'x') "
        "RETURNING id", admin.community.id)
    await world.pool.execute("UPDATE messages SET external_system_id = $2 WHERE id = $1", bobs,
                             system)
    assert message_ids(await admin.api.get(
        f"/api/users/{bob.id}/messages", params={"external_system_id": str(system)})) == [bobs]
    assert message_ids(await admin.api.get(
        f"/api/users/{admin.id}/messages", params={"external_system_id": str(system)})) == []
    assert message_ids(await admin.api.get(
        f"/api/external_systems/{system}/messages", params={"user_id": str(admin.id)})) == []
    assert message_ids(await admin.api.get(
        f"/api/external_systems/{system}/messages", params={"user_id": str(bob.id)})) == [bobs]


async def test_not_in_company_stream_keeps_a_systems_messages_out_of_company(
    world: World,
) -> None:
    """Issue 9: messages of an external system with not_in_company_stream stay out of the
    Company stream; they remain in Home (for those they reach), the system's and the author's
    lists, and readable by id."""
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    system = await world.pool.fetchval(
        "INSERT INTO external_systems (community_id, name, system_url, client_identifier, "
        "client_secret_hash, not_in_company_stream) "
        "VALUES ($1, 'CRM', 'https://crm.example', 'crm-id', 'x', true) RETURNING id",
        admin.community.id)
    quiet = (await post(bob, "from the CRM"))["id"]
    loud = (await post(bob, "by hand"))["id"]
    await world.pool.execute("UPDATE messages SET external_system_id = $2 WHERE id = $1",
                             quiet, system)
    assert await _stream(admin, "Company") == [loud]
    assert message_ids(await admin.api.get(f"/api/external_systems/{system}/messages")) == [
        quiet]
    assert message_ids(await admin.api.get(f"/api/users/{bob.id}/messages")) == [loud, quiet]
    assert await _stream(bob, "Sent") == [loud, quiet]
    assert (await admin.api.get(f"/api/messages/{quiet}")).status == 200
    # the switch is read live: turned off, the messages are back in Company
    await world.pool.execute(
        "UPDATE external_systems SET not_in_company_stream = false WHERE id = $1", system)
    assert await _stream(admin, "Company") == [loud, quiet]
