"""Migration 0022: every update of a user's row bumps the row's version, every change of their
custom values the values' version (at the writer's COMMIT, without touching the users row), and
a custom field's rename, move or deletion the directory's; nothing else does."""

from __future__ import annotations

from storage.db import transaction
from tests.support import Member, World


async def version(world: World, member: Member) -> int:
    return int(await world.pool.fetchval(
        "SELECT row_version FROM users WHERE id = $1", member.id))


async def values(world: World, member: Member) -> int:
    value = await world.pool.fetchval(
        "SELECT version FROM custom_value_versions WHERE user_id = $1", member.id)
    return int(value or 0)


async def directory(world: World, member: Member) -> int:
    value = await world.pool.fetchval(
        "SELECT version FROM directory_versions WHERE community_id = $1", member.community.id)
    return int(value or 0)


async def test_a_users_row_and_custom_values_bump_their_versions(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    field = await world.pool.fetchval(
        "INSERT INTO custom_fields (community_id, name) VALUES ($1, 'Desk') RETURNING id",
        admin.community.id)
    row = await version(world, bob)
    await world.pool.execute("UPDATE users SET status_message = 'away' WHERE id = $1", bob.id)
    assert await version(world, bob) > row
    row = await version(world, bob)
    await world.pool.execute("UPDATE users SET session_epoch = session_epoch WHERE id = $1",
                             bob.id)
    assert await version(world, bob) > row, "any update, even one that changes no value"
    row = await version(world, bob)
    others = (await version(world, admin), await values(world, admin))
    seen = await values(world, bob)

    async def bumped(label: str) -> None:
        nonlocal seen
        now = await values(world, bob)
        assert now > seen, f"{label} did not bump the values' version"
        seen = now

    async with transaction(world.pool) as conn:
        await conn.execute("INSERT INTO custom_field_values (user_id, custom_field_id, value) "
                           "VALUES ($1, $2, '4.2')", bob.id, field)
        # deferred: bumped by the COMMIT, not before
        assert await conn.fetchval(
            "SELECT version FROM custom_value_versions WHERE user_id = $1", bob.id) is None
    await bumped("a value added")
    await world.pool.execute("UPDATE custom_field_values SET value = '5' WHERE user_id = $1",
                             bob.id)
    await bumped("a value changed")
    await world.pool.execute("DELETE FROM custom_field_values WHERE user_id = $1", bob.id)
    await bumped("a value removed")
    assert await version(world, bob) == row  # the users row is not written
    assert (await version(world, admin), await values(world, admin)) == others  # nor anyone's


async def test_a_custom_fields_name_order_or_deletion_bumps_the_directory(world: World) -> None:
    admin = await world.community()
    field = await world.pool.fetchval(
        "INSERT INTO custom_fields (community_id, name) VALUES ($1, 'Desk') RETURNING id",
        admin.community.id)
    before = await directory(world, admin)
    await world.pool.execute("UPDATE custom_fields SET name = 'Office' WHERE id = $1", field)
    renamed = await directory(world, admin)
    assert renamed > before
    await world.pool.execute("UPDATE custom_fields SET position = 3 WHERE id = $1", field)
    moved = await directory(world, admin)
    assert moved > renamed
    await world.pool.execute("UPDATE custom_fields SET name = 'Office' WHERE id = $1", field)
    assert await directory(world, admin) == moved  # the same name again: no change shown
    bob = await world.user(admin, "Bob")
    await world.pool.execute("INSERT INTO custom_field_values (user_id, custom_field_id, value) "
                             "VALUES ($1, $2, '4.2')", bob.id, field)
    held = await values(world, bob)
    await world.pool.execute("DELETE FROM custom_fields WHERE id = $1", field)
    assert await directory(world, admin) > moved
    # its values went with it: bumped once, by the directory, not once per user
    assert await values(world, bob) == held
