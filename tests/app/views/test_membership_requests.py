"""Membership requests: asking to join a private group, cancelling, and what its admins do."""

from __future__ import annotations

from typing import Any

from tests.conftest import QueryLog
from tests.support import Member, World

REQUEST_KEYS = ["id", "group_id", "user_id", "created_at", "user"]


async def club_of(world: World, owner: Member, name: str = "Club", **params: Any) -> dict[str, Any]:
    return await world.group(owner, name, permission_mode="private", allow_access_request=True,
                             **params)


async def pending(world: World, group_id: int) -> list[int]:
    rows = await world.pool.fetch(
        "SELECT user_id FROM group_membership_requests WHERE group_id = $1 ORDER BY id", group_id
    )
    return [r["user_id"] for r in rows]


async def test_request_membership(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    bob = await world.user(admin, "Bob")
    club = await club_of(world, owner)
    url = f"/api/groups/{club['id']}/membership_requests"
    resp = await bob.api.post(url)
    assert resp.status == 201, resp.text
    request = resp.json["membership_request"]
    assert list(request) == REQUEST_KEYS
    assert (request["group_id"], request["user_id"], request["user"]["id"]) == (
        club["id"], bob.id, bob.id)
    assert request["created_at"].endswith("+00:00")
    # asking again changes nothing
    again = await bob.api.post(url + ".json")
    assert again.status == 201 and again.json["membership_request"]["id"] == request["id"]
    assert await pending(world, club["id"]) == [bob.id]
    # still not a member: the content stays closed
    assert (await bob.api.get(f"/api/groups/{club['id']}/members")).status == 403


async def test_request_membership_refusals(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    bob = await world.user(admin, "Bob")
    member = await world.user(admin, "Member")
    external = await world.user(admin, "Ext", role="external_contributor")
    public = await world.group(owner, "Public")
    secret = await world.group(owner, "Secret", permission_mode="private")
    club = await club_of(world, owner, members=(member,))
    archived = await club_of(world, owner, "Old Club")
    assert (await owner.api.delete(f"/api/groups/{archived['id']}/archive")).status == 200
    partners = await world.group(owner, "Partners", permission_mode="external_contributor",
                                 allow_access_request=True)

    async def ask(who: Member, group: dict[str, Any]) -> Any:
        return await who.api.post(f"/api/groups/{group['id']}/membership_requests")

    assert (await ask(bob, public)).status == 403
    assert (await ask(bob, secret)).status == 404
    assert (await ask(bob, archived)).status == 403
    already = await ask(member, club)
    assert already.status == 422 and already.json["code"] == "validation_failed"
    assert (await ask(external, partners)).status == 404
    other = await world.community("Other")
    assert (await ask(other, club)).status == 404
    for group in (public, secret, club, archived, partners):
        assert await pending(world, group["id"]) == []


async def test_cancel_your_request(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    club = await club_of(world, owner)
    base = f"/api/groups/{club['id']}"
    assert (await bob.api.post(f"{base}/membership_requests")).status == 201
    assert (await carol.api.post(f"{base}/membership_requests")).status == 201
    cancelled = await bob.api.delete(f"{base}/membership_request")
    assert cancelled.status == 204 and cancelled.text == ""
    assert await pending(world, club["id"]) == [carol.id]
    shown = (await bob.api.get(base)).json["group"]
    assert shown["can_request_membership"] is True
    assert shown["can_cancel_membership_request"] is False
    none_left = await bob.api.delete(f"{base}/membership_request.json")
    assert none_left.status == 404 and none_left.json["code"] == "not_found"
    other = await world.community("Other")
    assert (await other.api.delete(f"{base}/membership_request")).status == 404
    assert await pending(world, club["id"]) == [carol.id]


async def test_admins_list_approve_and_reject(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    club = await club_of(world, owner)
    base = f"/api/groups/{club['id']}/membership_requests"
    assert (await bob.api.post(base)).status == 201
    assert (await carol.api.post(base)).status == 201
    listed = await owner.api.get(base)
    assert listed.status == 200 and list(listed.json) == ["membership_requests"]
    requests = listed.json["membership_requests"]
    assert [list(r) for r in requests] == [REQUEST_KEYS] * 2
    assert [r["user_id"] for r in requests] == [bob.id, carol.id]  # oldest first
    paged = await owner.api.get(base, params={"per_page": 1, "page": 2})
    assert [r["user_id"] for r in paged.json["membership_requests"]] == [carol.id]
    bobs, carols = requests[0]["id"], requests[1]["id"]

    approved = await owner.api.post(f"{base}/{bobs}/approve")
    assert approved.status == 200, approved.text
    membership = approved.json["group_membership"]
    assert list(membership) == ["id", "user_id", "role", "role_key", "user"]
    assert (membership["user_id"], membership["role_key"]) == (bob.id, "member")
    shown = (await bob.api.get(f"/api/groups/{club['id']}")).json["group"]
    assert shown["role_key"] == "member" and shown["can_cancel_membership_request"] is False
    assert shown["member_count"] == 2
    assert (await owner.api.post(f"{base}/{bobs}/approve")).status == 404

    rejected = await owner.api.post(f"{base}/{carols}/reject.json")
    assert rejected.status == 204
    assert (await owner.api.get(base)).json["membership_requests"] == []
    carols_view = (await carol.api.get(f"/api/groups/{club['id']}")).json["group"]
    assert carols_view["role_key"] is None and carols_view["can_request_membership"] is True
    assert (await owner.api.post(f"{base}/{carols}/reject")).status == 404


async def test_request_admin_routes_refusals(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    member = await world.user(admin, "Member")
    bob = await world.user(admin, "Bob")
    club = await club_of(world, owner, members=(member,))
    elsewhere = await club_of(world, owner, "Elsewhere")
    base = f"/api/groups/{club['id']}/membership_requests"
    assert (await bob.api.post(base)).status == 201
    request_id = (await owner.api.get(base)).json["membership_requests"][0]["id"]
    for who, status in ((member, 403), (bob, 403)):
        assert (await who.api.get(base)).status == status
        assert (await who.api.post(f"{base}/{request_id}/approve")).status == status
        assert (await who.api.post(f"{base}/{request_id}/reject")).status == status
    other = await world.community("Other")
    assert (await other.api.get(base)).status == 404
    assert (await other.api.post(f"{base}/{request_id}/approve")).status == 404
    assert (await other.api.post(f"{base}/{request_id}/reject")).status == 404
    # a request is only found through its own group
    wrong = f"/api/groups/{elsewhere['id']}/membership_requests/{request_id}"
    assert (await owner.api.post(f"{wrong}/approve")).status == 404
    assert (await owner.api.post(f"{wrong}/reject")).status == 404
    assert (await owner.api.get(base, params={"per_page": "many"})).status == 400
    assert await pending(world, club["id"]) == [bob.id]
    # a community admin counts as a group admin; an archived group takes no new members
    assert (await admin.api.get(base)).status == 200
    assert (await owner.api.delete(f"/api/groups/{club['id']}/archive")).status == 200
    assert (await admin.api.post(f"{base}/{request_id}/approve")).status == 403
    assert await pending(world, club["id"]) == [bob.id]


async def test_adding_a_requester_fulfils_the_request(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    bob = await world.user(admin, "Bob")
    club = await club_of(world, owner)
    assert (await bob.api.post(f"/api/groups/{club['id']}/membership_requests")).status == 201
    added = await owner.api.post(f"/api/groups/{club['id']}/memberships",
                                 json={"group_membership": {"user_id": bob.id}})
    assert added.status == 201
    assert await pending(world, club["id"]) == []


async def test_request_list_runs_a_fixed_number_of_queries(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Owner")
    club = await club_of(world, owner)
    crowd = await world.many_users(admin, 25)
    for user in crowd:
        assert (await user.api.post(f"/api/groups/{club['id']}/membership_requests")).status == 201
    counts = {}
    for per_page in (1, 500):
        query_log.reset()
        resp = await owner.api.get(f"/api/groups/{club['id']}/membership_requests",
                                   params={"per_page": per_page})
        assert resp.status == 200
        counts[per_page] = (len(query_log), len(resp.json["membership_requests"]))
    assert counts[1][1] == 1 and counts[500][1] == 25
    assert counts[1][0] == counts[500][0], counts
