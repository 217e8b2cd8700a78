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


async def test_changing_email_to_an_invited_one_joins(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    group = await world.group(admin, "Painters", permission_mode="private")
    await admin.api.post(
        f"/api/groups/{group['id']}/memberships/add_members",
        json={"group_memberships": [{"email": "bob.new@example.com", "invite": "true"}]},
    )
    assert (await bob.api.get(f"/api/groups/{group['id']}")).status == 404
    moved = await bob.api.put(f"/api/users/{bob.id}",
                              json={"user": {"email": "bob.new@example.com"}})
    assert moved.status == 200
    seen = await bob.api.as_user("bob.new@example.com").get(f"/api/groups/{group['id']}")
    assert seen.status == 200
    assert seen.json["group"]["role_key"] == "member"
