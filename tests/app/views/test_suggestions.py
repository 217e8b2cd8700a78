"""GET /api/search/suggestions: people and groups in headed sets, with every filter."""

from __future__ import annotations

from typing import Any

from tests.conftest import QueryLog
from tests.shapes import USER_EXTRAS, captured_keys
from tests.support import Member, World

EMBEDDED_USER_KEYS = [*captured_keys("User — embedded"), *USER_EXTRAS]
SHORT_GROUP_KEYS = [
    "id", "name", "html_name", "url", "type", "avatars", "username", "groupname", "private",
    "external_contributor", "chat_enabled", "post_enabled", "activity_url",
]


async def make_group(
    world: World, owner: Member, name: str, *, permission: str = "public",
    allow_access_request: bool = False, post_enabled: bool = True, state: str = "active",
    group_type: str = "standard", members: tuple[Member, ...] = (),
) -> int:
    """A group straight in the database (owner as admin), independent of the groups API."""
    async with world.pool.acquire() as conn:
        group_id: int = await conn.fetchval(
            "INSERT INTO groups (community_id, name, groupname, permission, allow_access_request,"
            " post_enabled, state, group_type, creator_id)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
            owner.community.id, name, name.replace(" ", ""), permission, allow_access_request,
            post_enabled, state, group_type, owner.id,
        )
        await conn.execute(
            "INSERT INTO group_memberships (community_id, group_id, user_id, role)"
            " VALUES ($1, $2, $3, 'admin')", owner.community.id, group_id, owner.id,
        )
        for member in members:
            await conn.execute(
                "INSERT INTO group_memberships (community_id, group_id, user_id)"
                " VALUES ($1, $2, $3)", owner.community.id, group_id, member.id,
            )
    return group_id


async def suggest(member: Member, params: Any, status: int = 200) -> Any:
    resp = await member.api.get("/api/search/suggestions", params=params)
    assert resp.status == status, resp.text
    return resp.json


def heading_map(body: Any) -> dict[str, list[Any]]:
    return {r["heading"]: r["entries"] for r in body["results"]}


def names(entries: list[Any]) -> list[str]:
    return [e["name"] for e in entries]


async def test_default_sets_and_shapes(world: World) -> None:
    admin = await world.community("Acme")
    viewer = await world.user(admin, "Viola", "Viewer")
    followed = await world.user(admin, "Sam", "Followed")
    other = await world.user(admin, "Sam", "Stranger")
    await viewer.api.post(f"/api/users/{followed.id}/followers")
    await make_group(world, admin, "Sample Team")

    body = await suggest(viewer, {"q": "sa"})

    assert list(body) == ["results"]
    assert [r["heading"] for r in body["results"]] == [
        "People you follow", "Entire company", "Groups",
    ]
    sets = heading_map(body)
    assert names(sets["People you follow"]) == ["Sam Followed"]
    # a followed user is listed once, under "People you follow"
    assert names(sets["Entire company"]) == ["Sam Stranger"]
    user = sets["Entire company"][0]
    assert list(user) == EMBEDDED_USER_KEYS
    assert user["id"] == other.id and user["type"] == "User"
    group = sets["Groups"][0]
    assert list(group) == SHORT_GROUP_KEYS
    assert group["name"] == "Sample Team" and group["type"] == "Group"
    assert group["url"].endswith(f"/groups/{group['id']}-sampleteam")


async def test_q_is_required(world: World) -> None:
    admin = await world.community()
    for params in ({}, {"q": ""}, {"q": "   "}):
        resp = await admin.api.get("/api/search/suggestions", params=params)
        assert resp.status == 422
        assert resp.json["fields"] == {"q": ["can't be blank"]}


async def test_needs_authentication(world: World) -> None:
    admin = await world.community()
    resp = await admin.api.anonymous().get("/api/search/suggestions", params={"q": "a"})
    assert resp.status == 401


async def test_matches_word_prefixes_of_names_username_and_email(world: World) -> None:
    admin = await world.community()
    await world.user(admin, "Margaret", "Hamilton", username="mh")
    await world.user(admin, "Grace", "Hopper", email="amazing@acme.test")

    assert names(heading_map(await suggest(admin, {"q": "hamil"}))["Entire company"]) == [
        "Margaret Hamilton"
    ]
    assert names(heading_map(await suggest(admin, {"q": "marg ham"}))["Entire company"]) == [
        "Margaret Hamilton"
    ]
    assert names(heading_map(await suggest(admin, {"q": "amaz"}))["Entire company"]) == [
        "Grace Hopper"
    ]
    # no partial match inside a word
    assert heading_map(await suggest(admin, {"q": "argaret"}))["Entire company"] == []
    # nothing to match on: sets still answered, empty
    body = await suggest(admin, {"q": "!!!"})
    assert [r["entries"] for r in body["results"]] == [[], [], []]


async def test_include_categories(world: World) -> None:
    admin = await world.community()
    viewer = await world.user(admin, "Val", "Viewer")
    followed = await world.user(admin, "Kim", "Followed")
    await world.user(admin, "Kim", "Other")
    await viewer.api.post(f"/api/users/{followed.id}/followers")

    only_company = await suggest(
        viewer, {"q": "kim", "user_filter[include_categories][]": "entire_company"}
    )
    sets = heading_map(only_company)
    assert list(sets) == ["Entire company", "Groups"]
    # alone, the company set includes the people the viewer follows
    assert names(sets["Entire company"]) == ["Kim Followed", "Kim Other"]

    only_followed = await suggest(
        viewer, {"q": "kim", "user_filter[include_categories]": "people_you_follow"}
    )
    sets = heading_map(only_followed)
    assert list(sets) == ["People you follow", "Groups"]
    assert names(sets["People you follow"]) == ["Kim Followed"]

    both = await suggest(viewer, [
        ("q", "kim"), ("user_filter[include_categories][]", "people_you_follow"),
        ("user_filter[include_categories][]", "entire_company"),
    ])
    assert names(heading_map(both)["Entire company"]) == ["Kim Other"]

    bad = await admin.api.get("/api/search/suggestions", params={
        "q": "kim", "user_filter[include_categories][]": "friends"})
    assert bad.status == 422
    assert "user_filter[include_categories]" in bad.json["fields"]


async def test_account_states(world: World) -> None:
    admin = await world.community()
    await world.user(admin, "Dana", "Active")
    gone = await world.user(admin, "Dana", "Gone")
    assert (await admin.api.delete(f"/api/users/{gone.id}")).status == 200

    default = heading_map(await suggest(admin, {"q": "dana"}))["Entire company"]
    assert names(default) == ["Dana Active"]

    deactivated = heading_map(await suggest(
        admin, {"q": "dana", "user_filter[account_states]": "deactivated"}
    ))["Entire company"]
    assert names(deactivated) == ["Dana Gone"]
    assert deactivated[0]["active"] is False and deactivated[0]["inactive"] is True

    both = heading_map(await suggest(admin, [
        ("q", "dana"), ("user_filter[account_states][]", "active"),
        ("user_filter[account_states][]", "deactivated"),
    ]))["Entire company"]
    assert names(both) == ["Dana Active", "Dana Gone"]

    bad = await admin.api.get("/api/search/suggestions", params={
        "q": "dana", "user_filter[account_states]": "terminated"})
    assert bad.status == 422


async def test_exclude_ids_and_role(world: World) -> None:
    admin = await world.community()
    one = await world.user(admin, "Lee", "One")
    await world.user(admin, "Lee", "Two")
    boss = await world.user(admin, "Lee", "Boss", role="tenant_admin")

    excluded = heading_map(await suggest(admin, [
        ("q", "lee"), ("user_filter[exclude_ids][]", str(one.id)),
        ("user_filter[exclude_ids][]", str(boss.id)),
    ]))["Entire company"]
    assert names(excluded) == ["Lee Two"]

    admins = heading_map(await suggest(admin, {"q": "lee", "user_filter[role]": "admin"}))
    assert names(admins["Entire company"]) == ["Lee Boss"]
    members = heading_map(await suggest(admin, {"q": "lee", "user_filter[role]": "member"}))
    assert names(members["Entire company"]) == ["Lee One", "Lee Two"]

    for bad in ({"user_filter[role]": "owner"}, {"user_filter[exclude_ids][]": "x"}):
        resp = await admin.api.get("/api/search/suggestions", params={"q": "lee", **bad})
        assert resp.status == 422, bad


async def test_user_max_results(world: World) -> None:
    admin = await world.community()
    for i in range(4):
        await world.user(admin, "Max", f"User{i}")
    sets = heading_map(await suggest(admin, {"q": "max", "user_filter[max_results]": "3"}))
    assert names(sets["Entire company"]) == ["Max User0", "Max User1", "Max User2"]


async def test_types(world: World) -> None:
    admin = await world.community()
    await world.user(admin, "Tess", "Types")
    await make_group(world, admin, "Tessellation")

    groups_only = await suggest(admin, {"q": "tess", "types[]": "Group"})
    assert [r["heading"] for r in groups_only["results"]] == ["Groups"]
    assert names(groups_only["results"][0]["entries"]) == ["Tessellation"]

    users_only = await suggest(admin, {"q": "tess", "types": "user"})
    assert [r["heading"] for r in users_only["results"]] == [
        "People you follow", "Entire company",
    ]

    # listed types with nothing behind them here answer no sets
    assert (await suggest(admin, {"q": "tess", "types[]": "Project"}))["results"] == []

    resp = await admin.api.get("/api/search/suggestions", params={"q": "t", "types": "Robot"})
    assert resp.status == 422 and "types" in resp.json["fields"]


async def test_group_visibility(world: World) -> None:
    admin = await world.community()
    member = await world.user(admin, "Mo", "Member")
    outsider = await world.user(admin, "Oz", "Outsider")
    external = await world.user(admin, "Ed", "External", role="external_contributor")
    await make_group(world, admin, "Proj Public")
    await make_group(world, admin, "Proj Secret", permission="private", members=(member,))
    await make_group(world, admin, "Proj Requestable", permission="private",
                     allow_access_request=True)
    await make_group(world, admin, "Proj Partners", permission="external_contributor",
                     members=(external,))
    other = await world.community("Other")
    await make_group(world, other, "Proj Elsewhere")
    await world.user(other, "Proj", "Elsewhere")

    async def groups_for(viewer: Member) -> list[str]:
        return names(heading_map(await suggest(viewer, {"q": "proj"}))["Groups"])

    # the viewer's own groups first, then by name
    assert await groups_for(member) == ["Proj Secret", "Proj Public", "Proj Requestable"]
    assert await groups_for(outsider) == ["Proj Public", "Proj Requestable"]
    assert await groups_for(external) == ["Proj Partners"]
    assert await groups_for(admin) == [
        "Proj Partners", "Proj Public", "Proj Requestable", "Proj Secret",
    ]
    # nothing from another community, users included
    users = heading_map(await suggest(admin, {"q": "proj"}))["Entire company"]
    assert users == []


async def test_group_filters(world: World) -> None:
    admin = await world.community()
    viewer = await world.user(admin, "Gil", "Viewer")
    public_member = await make_group(world, admin, "Team Alpha", members=(viewer,))
    public_other = await make_group(world, admin, "Team Beta")
    await make_group(world, admin, "Team Gamma", permission="private", members=(viewer,))
    await make_group(world, admin, "Team Delta", permission="external_contributor",
                     members=(viewer,))
    await make_group(world, admin, "Team Epsilon", group_type="provisioned",
                     members=(viewer,))
    await make_group(world, admin, "Team Zeta", state="archived", members=(viewer,))
    await make_group(world, admin, "Team Eta", post_enabled=False, members=(viewer,))
    await make_group(world, admin, "Team Theta", permission="private",
                     allow_access_request=True)

    async def groups(**filters: str) -> list[str]:
        params = {"q": "team", **{f"group_filter[{k}]": v for k, v in filters.items()}}
        return sorted(names(heading_map(await suggest(viewer, params))["Groups"]))

    everything = await groups()
    assert everything == sorted(["Team Alpha", "Team Beta", "Team Gamma", "Team Delta",
                                 "Team Epsilon", "Team Zeta", "Team Eta", "Team Theta"])
    assert await groups(visibility="public") == sorted(
        ["Team Alpha", "Team Beta", "Team Epsilon", "Team Zeta", "Team Eta"])
    assert await groups(visibility="private") == ["Team Delta", "Team Gamma", "Team Theta"]
    assert await groups(member_only="true") == sorted(
        ["Team Alpha", "Team Gamma", "Team Delta", "Team Epsilon", "Team Zeta", "Team Eta"])
    # posting, as messages allow it: a member, the group active, posting on (or group admin)
    assert await groups(can_post_only="true") == sorted(
        ["Team Alpha", "Team Gamma", "Team Delta", "Team Epsilon"])
    assert await groups(can_post_only="false") == everything
    assert "Team Delta" not in await groups(exclude_external_facing="true")
    assert len(await groups(exclude_external_facing="1")) == len(everything) - 1
    assert "Team Epsilon" not in await groups(exclude_provisioned="true")
    assert len(await groups(exclude_provisioned="true")) == len(everything) - 1
    assert await groups(member_only="true", visibility="public", can_post_only="true") == [
        "Team Alpha", "Team Epsilon",
    ]

    excluded = await suggest(viewer, [
        ("q", "team"), ("group_filter[exclude_ids][]", str(public_member)),
        ("group_filter[exclude_ids][]", str(public_other)),
    ])
    assert "Team Alpha" not in names(heading_map(excluded)["Groups"])
    assert "Team Beta" not in names(heading_map(excluded)["Groups"])
    assert len(heading_map(excluded)["Groups"]) == len(everything) - 2

    for bad in ({"group_filter[visibility]": "secret"}, {"group_filter[member_only]": "maybe"},
                {"group_filter[max_results]": "0"}, {"group_filter[max_results]": "many"}):
        resp = await viewer.api.get("/api/search/suggestions", params={"q": "team", **bad})
        assert resp.status == 422, bad


async def test_can_post_only_for_admins(world: World) -> None:
    admin = await world.community()
    owner = await world.user(admin, "Gwen", "Owner")
    await make_group(world, owner, "Crew Quiet", post_enabled=False)  # owner is its admin
    await make_group(world, owner, "Crew Open")
    await make_group(world, owner, "Crew Secret", permission="private")
    await make_group(world, owner, "Crew Old", state="archived")

    async def postable(viewer: Member) -> list[str]:
        body = await suggest(viewer, {"q": "crew", "group_filter[can_post_only]": "true"})
        return sorted(names(heading_map(body)["Groups"]))

    # a group admin posts where posting is off; a community admin posts in any group they read
    assert await postable(owner) == ["Crew Open", "Crew Quiet", "Crew Secret"]
    assert await postable(admin) == ["Crew Open", "Crew Quiet"]


async def test_group_max_results(world: World) -> None:
    admin = await world.community()
    for i in range(23):
        await make_group(world, admin, f"Club {i:02d}")

    default = heading_map(await suggest(admin, {"q": "club"}))["Groups"]
    assert len(default) == 20
    three = heading_map(await suggest(admin, {"q": "club", "group_filter[max_results]": "3"}))
    assert names(three["Groups"]) == ["Club 00", "Club 01", "Club 02"]
    capped = await suggest(admin, {"q": "club", "group_filter[max_results]": "100000"})
    assert len(heading_map(capped)["Groups"]) == 23


async def test_context_group_ranks_its_members_first(world: World) -> None:
    admin = await world.community()
    viewer = await world.user(admin, "Vic", "Viewer")
    await world.user(admin, "Robin", "Aardvark")
    insider = await world.user(admin, "Robin", "Zebra")
    team = await make_group(world, admin, "Team", members=(viewer, insider))
    secret = await make_group(world, admin, "Secret", permission="private", members=(insider,))

    plain = heading_map(await suggest(viewer, {"q": "robin"}))["Entire company"]
    assert names(plain) == ["Robin Aardvark", "Robin Zebra"]
    ranked = heading_map(await suggest(
        viewer, {"q": "robin", "context_type": "group", "context_id": str(team)}
    ))["Entire company"]
    assert names(ranked) == ["Robin Zebra", "Robin Aardvark"]
    # a group the viewer cannot read does not reorder anything (it would tell its members)
    hidden = heading_map(await suggest(
        viewer, {"q": "robin", "context_type": "group", "context_id": str(secret)}
    ))["Entire company"]
    assert names(hidden) == ["Robin Aardvark", "Robin Zebra"]
    # a message's author and the members of its group rank first, when it can be read
    resp = await insider.api.post("/api/messages", json={"message": {
        "body": "Hi team", "group_id": team}})
    assert resp.status == 201, resp.text
    in_team = resp.json["message"]["id"]
    by_message = heading_map(await suggest(
        viewer, {"q": "robin", "context_type": "message", "context_id": str(in_team)}
    ))["Entire company"]
    assert names(by_message) == ["Robin Zebra", "Robin Aardvark"]
    resp = await insider.api.post("/api/messages", json={"message": {
        "body": "Psst", "group_id": secret}})
    assert resp.status == 201, resp.text
    unreadable = heading_map(await suggest(viewer, {
        "q": "robin", "context_type": "message", "context_id": str(resp.json["message"]["id"])
    }))["Entire company"]
    assert names(unreadable) == ["Robin Aardvark", "Robin Zebra"]
    # other context types are accepted; unknown ones are not
    assert (await viewer.api.get("/api/search/suggestions", params={
        "q": "robin", "context_type": "townhall", "context_id": "1"})).status == 200
    assert (await viewer.api.get("/api/search/suggestions", params={
        "q": "robin", "context_type": "planet"})).status == 422


async def test_form_and_json_encodings(world: World) -> None:
    admin = await world.community()
    one = await world.user(admin, "Enc", "One")
    await world.user(admin, "Enc", "Two")
    resp = await admin.api.get(
        f"/api/search/suggestions.json?q=enc&user_filter[exclude_ids]={one.id}&types=User"
    )
    assert resp.status == 200
    assert names(heading_map(resp.json)["Entire company"]) == ["Enc Two"]


async def test_fixed_number_of_queries(world: World, query_log: QueryLog) -> None:
    admin = await world.community()
    viewer = await world.user(admin, "Quinn", "Viewer")

    async def count() -> int:
        query_log.reset()
        await suggest(viewer, {"q": "qa", "user_filter[max_results]": "500",
                               "group_filter[max_results]": "500"})
        return len(query_log)

    await count()  # warm: credentials cache, prepared statements
    few = await count()
    for i in range(30):
        user = await world.user(admin, "Qa", f"Person{i}")
        if i % 2:
            await viewer.api.post(f"/api/users/{user.id}/followers")
        await make_group(world, admin, f"Qa Group {i}", members=(viewer,) if i % 3 else ())
    many = await count()
    body = await suggest(viewer, {"q": "qa"})
    assert [len(r["entries"]) for r in body["results"]] == [15, 15, 20]
    assert few == many
