"""An e-mail invited to a group before its account exists joins the group on sign-up."""

from __future__ import annotations

from tests.support import PASSWORD, World


async def test_invited_email_joins_the_group_when_the_user_is_created(world: World) -> None:
    admin = await world.community()
    group = await world.group(admin, "Robots", permission_mode="private")
    invited = await admin.api.post(
        f"/api/groups/{group['id']}/memberships/add_members",
        json={"group_memberships": [{"email": "Newbie@Example.com", "invite": "true",
                                     "role": "admin"}]},
    )
    assert invited.status == 201
    assert invited.json["group_memberships"][0]["invite"] == "Newbie@Example.com"

    created = await admin.api.post("/api/users", json={"user": {
        "email": "newbie@example.com", "first_name": "New", "last_name": "Bie",
        "password": PASSWORD}})
    assert created.status == 201, created.text
    newbie = admin.api.as_user("newbie@example.com")
    mine = await newbie.get("/api/group_memberships")
    assert [(m["group"]["id"], m["role_key"]) for m in mine.json["group_memberships"]] == [
        (group["id"], "admin")
    ]
    # the invitation was used up: a second account can't reuse it
    members = await admin.api.get(f"/api/groups/{group['id']}/members")
    assert sorted(u["id"] for u in members.json["users"]) == sorted(
        [admin.id, created.json["user"]["id"]]
    )


async def test_an_admin_changing_an_email_to_an_invited_one_joins(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    group = await world.group(admin, "Painters", permission_mode="private")
    await admin.api.post(
        f"/api/groups/{group['id']}/memberships/add_members",
        json={"group_memberships": [{"email": "bob.new@example.com", "invite": "true"}]},
    )
    assert (await bob.api.get(f"/api/groups/{group['id']}")).status == 404
    moved = await admin.api.put(f"/api/users/{bob.id}",
                                json={"user": {"email": "bob.new@example.com"}})
    assert moved.status == 200
    seen = await bob.api.as_user("bob.new@example.com").get(f"/api/groups/{group['id']}")
    assert seen.status == 200
    assert seen.json["group"]["role_key"] == "member"


async def test_changing_ones_own_email_never_claims_an_invitation(world: World) -> None:
    """Issue 8, defect 1: anyone could join a private group through someone else's
    invitation by changing their own e-mail to the invited address (and back)."""
    admin = await world.community()
    eve = await world.user(admin, "Eve")
    group = await world.group(admin, "Board", permission_mode="private")
    await admin.api.post(
        f"/api/groups/{group['id']}/memberships/add_members",
        json={"group_memberships": [{"email": "ceo@example.com", "invite": "true"}]},
    )
    moved = await eve.api.put(f"/api/users/{eve.id}", json={"user": {
        "email": "ceo@example.com", "current_password": PASSWORD}})
    assert moved.status == 200, moved.text
    as_ceo = eve.api.as_user("ceo@example.com")
    assert (await as_ceo.get(f"/api/groups/{group['id']}")).status == 404
    mine = await as_ceo.get("/api/group_memberships")
    assert mine.json["group_memberships"] == []
    back = await as_ceo.put(f"/api/users/{eve.id}", json={"user": {
        "email": eve.email, "current_password": PASSWORD}})
    assert back.status == 200
    assert (await eve.api.get(f"/api/groups/{group['id']}")).status == 404
    # the invitation is still there for its real owner
    ceo = await admin.api.post("/api/users", json={"user": {
        "email": "ceo@example.com", "first_name": "C", "last_name": "Eo",
        "password": PASSWORD}})
    assert ceo.status == 201
    assert (await admin.api.as_user("ceo@example.com").get(
        f"/api/groups/{group['id']}")).status == 200
