"""Invitations become memberships when the invited address becomes a user."""

from __future__ import annotations

from storage import memberships
from storage.db import transaction
from tests.support import Api, World


async def invite(owner_api: Api, group_id: int, email: str, role: str = "member") -> None:
    resp = await owner_api.post(
        f"/api/groups/{group_id}/memberships/add_members",
        json={"group_memberships": [{"email": email, "invite": "true", "role": role}]},
    )
    assert resp.status == 201, resp.text
    assert resp.json["group_memberships"][0]["invite"] == email


async def roles_in(world: World, group_id: int) -> dict[int, str]:
    rows = await world.pool.fetch(
        "SELECT user_id, role FROM group_memberships WHERE group_id = $1", group_id
    )
    return {r["user_id"]: r["role"] for r in rows}


async def test_accept_invitations_joins_the_new_user(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    team = await world.group(owner, "Team")
    leads = await world.group(owner, "Leads", permission_mode="private")
    untouched = await world.group(owner, "Untouched")
    await invite(owner.api, team["id"], "New.Person@example.com")
    await invite(owner.api, leads["id"], "new.person@EXAMPLE.com", role="admin")
    await invite(owner.api, untouched["id"], "someone.else@example.com")
    # creating the user runs the hook in the same transaction
    newcomer = await world.user(admin, "New", email="new.person@example.com")
    assert (await roles_in(world, team["id"]))[newcomer.id] == "member"
    assert (await roles_in(world, leads["id"]))[newcomer.id] == "admin"
    assert newcomer.id not in await roles_in(world, untouched["id"])
    left = await world.pool.fetch("SELECT email FROM group_invitations ORDER BY email")
    assert [r["email"] for r in left] == ["someone.else@example.com"]
    # consumed: a second call joins nothing
    async with transaction(world.pool) as conn:
        assert await memberships.accept_invitations(
            conn, admin.community.id, newcomer.id, newcomer.email
        ) == []
    shown = await newcomer.api.get(f"/api/groups/{leads['id']}")
    assert shown.status == 200 and shown.json["group"]["role_key"] == "admin"


async def test_accept_invitations_respects_group_rules_and_tenancy(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    internal = await world.group(owner, "Internal")
    partners = await world.group(owner, "Partners", permission_mode="external_contributor")
    archived = await world.group(owner, "Archived")
    for group in (internal, partners, archived):
        await invite(owner.api, group["id"], "guest@partner.example")
        await invite(owner.api, group["id"], "guest2@partner.example")
    assert (await owner.api.delete(f"/api/groups/{archived['id']}/archive")).status == 200
    other = await world.community("Other")
    stranger = await world.user(other, "Guest", email="guest@partner.example")
    async with transaction(world.pool) as conn:
        # a user of another community joins nothing here
        assert await memberships.accept_invitations(
            conn, admin.community.id, stranger.id, stranger.email
        ) == []
    async with transaction(world.pool) as conn:
        assert await memberships.accept_invitations(
            conn, other.community.id, stranger.id, stranger.email
        ) == []
    left = await world.pool.fetchval(
        "SELECT count(*) FROM group_invitations WHERE email = 'guest@partner.example'"
    )
    assert left == 3
    guest = await world.user(admin, "Guest", email="guest2@partner.example",
                             role="external_contributor")
    # an external contributor only joins groups that admit them; an archived group takes nobody
    assert guest.id in await roles_in(world, partners["id"])
    assert guest.id not in await roles_in(world, internal["id"])
    assert guest.id not in await roles_in(world, archived["id"])
    remaining = await world.pool.fetchval(
        "SELECT count(*) FROM group_invitations WHERE email = 'guest2@partner.example'"
    )
    assert remaining == 0
