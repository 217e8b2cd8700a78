"""Followers and following: lists, follow, unfollow (both routes), counts."""

from __future__ import annotations

from tests.app.views.test_users import assert_full_user
from tests.conftest import QueryLog
from tests.support import Member, World


async def _counts(viewer: Member, user: Member) -> tuple[int, int]:
    resp = await viewer.api.get(f"/api/users/{user.id}")
    assert resp.status == 200
    return resp.json["user"]["following_count"], resp.json["user"]["followers_count"]


async def _ids(viewer: Member, path: str, **params: str) -> list[int]:
    resp = await viewer.api.get(path, params=params)
    assert resp.status == 200, resp.text
    assert list(resp.json) == ["users"]
    for user in resp.json["users"]:
        assert_full_user(user)
    return [u["id"] for u in resp.json["users"]]


async def test_follow_and_lists(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    bob = await world.user(admin, "Bob")
    cat = await world.user(admin, "Cat")
    resp = await ann.api.post(f"/api/users/{bob.id}/followers")
    assert resp.status == 201, resp.text
    assert list(resp.json) == ["user"]
    user = resp.json["user"]
    assert_full_user(user)
    assert user["id"] == bob.id
    assert user["followers_count"] == 1
    assert user["followable"] is False  # already followed
    assert (await cat.api.post(f"/api/users/{bob.id}.json/followers")).status == 404
    assert (await cat.api.post(f"/api/users/{bob.id}/followers.json")).status == 201
    assert (await ann.api.post(f"/api/users/{cat.id}/followers")).status == 201
    # following again changes nothing
    again = await ann.api.post(f"/api/users/{bob.id}/followers")
    assert again.status == 201 and again.json["user"]["followers_count"] == 2

    assert sorted(await _ids(admin, f"/api/users/{bob.id}/followers")) == [ann.id, cat.id]
    assert await _ids(admin, f"/api/users/{ann.id}/followers") == []
    assert sorted(await _ids(admin, f"/api/users/{ann.id}/following")) == [bob.id, cat.id]
    assert await _ids(admin, f"/api/users/{bob.id}/following") == []
    assert await _counts(admin, ann) == (2, 0)
    assert await _counts(admin, bob) == (0, 2)
    assert await _counts(admin, cat) == (1, 1)
    # followable is relative to the viewer
    seen_by_ann = await ann.api.get(f"/api/users/{ann.id}/following")
    assert all(u["followable"] is False for u in seen_by_ann.json["users"])
    seen_by_admin = await admin.api.get(f"/api/users/{ann.id}/following")
    assert all(u["followable"] is True for u in seen_by_admin.json["users"])
    # newest first, paged
    assert await _ids(admin, f"/api/users/{ann.id}/following", per_page="1") == [cat.id]
    assert await _ids(admin, f"/api/users/{ann.id}/following", per_page="1",
                      page="2") == [bob.id]
    assert await _ids(admin, f"/api/users/{ann.id}/following", page="3") == []


async def test_cannot_follow_yourself_or_an_inactive_user(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    gone = await world.user(admin, "Gone")
    await admin.api.delete(f"/api/users/{gone.id}")
    me = await ann.api.post(f"/api/users/{ann.id}/followers")
    assert me.status == 422
    assert me.json["code"] == "validation_failed"
    inactive = await ann.api.post(f"/api/users/{gone.id}/followers")
    assert inactive.status == 422
    missing = await ann.api.post("/api/users/999999/followers")
    assert missing.status == 404
    assert await _counts(admin, ann) == (0, 0)


async def test_unfollow_through_both_routes(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    bob = await world.user(admin, "Bob")
    cat = await world.user(admin, "Cat")
    await ann.api.post(f"/api/users/{bob.id}/followers")
    await ann.api.post(f"/api/users/{cat.id}/followers")
    # DELETE /users/:user_id/followers/:my_user_id
    resp = await ann.api.delete(f"/api/users/{bob.id}/followers/{ann.id}")
    assert resp.status == 204
    assert resp.text == ""
    assert await _ids(admin, f"/api/users/{bob.id}/followers") == []
    # DELETE /users/:user_id/following/:id
    resp = await ann.api.delete(f"/api/users/{ann.id}/following/{cat.id}.json")
    assert resp.status == 204
    assert await _ids(admin, f"/api/users/{ann.id}/following") == []
    assert await _counts(admin, ann) == (0, 0)
    assert await _counts(admin, cat) == (0, 0)
    # nothing left to unfollow
    assert (await ann.api.delete(f"/api/users/{bob.id}/followers/{ann.id}")).status == 404
    # and following again works
    assert (await ann.api.post(f"/api/users/{bob.id}/followers")).status == 201


async def test_only_the_follower_or_an_admin_unfollows(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    bob = await world.user(admin, "Bob")
    eve = await world.user(admin, "Eve")
    await ann.api.post(f"/api/users/{bob.id}/followers")
    for path in (f"/api/users/{bob.id}/followers/{ann.id}",
                 f"/api/users/{ann.id}/following/{bob.id}"):
        resp = await eve.api.delete(path)
        assert resp.status == 403, path
        assert resp.json["code"] == "forbidden"
        # not even the followed user may cut the relation
        assert (await bob.api.delete(path)).status == 403
    assert await _ids(admin, f"/api/users/{bob.id}/followers") == [ann.id]
    assert (await admin.api.delete(f"/api/users/{ann.id}/following/{bob.id}")).status == 204
    assert await _ids(admin, f"/api/users/{bob.id}/followers") == []


async def test_follow_lists_of_unknown_users_are_404(world: World) -> None:
    admin = await world.community()
    for path in ("/api/users/999999/followers", "/api/users/999999/following",
                 "/api/users/abc/followers"):
        resp = await admin.api.get(path)
        assert resp.status == 404, path


async def test_follow_lists_run_a_fixed_number_of_queries(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()
    star = await world.user(admin, "Star")
    boss = await world.user(admin, "Boss")
    fans = await world.many_users(admin, 150, manager_id=boss.id)
    async with world.pool.acquire() as conn:
        await conn.executemany(
            "INSERT INTO follows (community_id, follower_id, followed_id) VALUES ($1, $2, $3)",
            [(admin.community.id, f.id, star.id) for f in fans]
            + [(admin.community.id, star.id, f.id) for f in fans],
        )
    await admin.api.get("/api/userinfo")
    for path in (f"/api/users/{star.id}/followers", f"/api/users/{star.id}/following"):
        counts = []
        for per_page in (1, 500):
            query_log.reset()
            resp = await admin.api.get(path, params={"per_page": str(per_page)})
            assert len(resp.json["users"]) == min(per_page, 150)
            counts.append(len(query_log))
        assert counts[0] == counts[1], (path, counts)
    page = (await admin.api.get(f"/api/users/{star.id}/followers",
                                params={"per_page": "500"})).json["users"]
    assert {u["following_count"] for u in page} == {1}
    assert {u["followers_count"] for u in page} == {1}
