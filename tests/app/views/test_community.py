"""GET /api/community_info and the content filters (GET/POST/DELETE /api/content_filters)."""

from __future__ import annotations

from app.actions.content_filters import blocked_words
from tests.app.views.test_suggestions import make_group
from tests.conftest import QueryLog
from tests.support import World

COMMUNITY_KEYS = [
    "id", "name", "domain", "url", "api_url", "realtime_url", "avatars", "member_count",
    "group_count", "badge_count", "created_at", "features", "limits",
]


async def test_community_info(world: World) -> None:
    admin = await world.community("Acme Corp", domain="acme.example")
    member = await world.user(admin, "Mia")
    gone = await world.user(admin, "Gus")
    await admin.api.delete(f"/api/users/{gone.id}")
    await make_group(world, admin, "Public One")
    await make_group(world, admin, "Secret One", permission="private")
    other = await world.community("Other")
    await world.user(other, "Olga")
    await make_group(world, other, "Elsewhere")

    resp = await member.api.get("/api/community_info")
    assert resp.status == 200
    assert list(resp.json) == ["community"]
    info = resp.json["community"]
    assert list(info) == COMMUNITY_KEYS
    assert info["id"] == admin.community.id
    assert info["name"] == "Acme Corp" and info["domain"] == "acme.example"
    assert info["url"] == "https://acme.example"
    assert info["api_url"] == "https://acme.example/api"
    assert info["realtime_url"] == "wss://acme.example/api/realtime"
    assert info["avatars"]["is_system_default"] is True
    assert info["avatars"]["square70"].startswith("https://acme.example/assets/avatars/")
    # active users only; groups the viewer may see listed; nothing from the other community
    assert info["member_count"] == 2
    assert info["group_count"] == 1
    assert info["badge_count"] == 6
    assert info["created_at"].endswith("+00:00")
    assert info["features"]["thanks"] is True
    assert all(isinstance(v, bool) for v in info["features"].values())
    assert info["limits"]["per_page_max"] == 500

    # a member of the secret group counts it
    admin_view = (await admin.api.get("/api/community_info.json")).json["community"]
    assert admin_view["group_count"] == 2


async def test_community_info_needs_authentication(world: World) -> None:
    admin = await world.community()
    assert (await admin.api.anonymous().get("/api/community_info")).status == 401


async def test_content_filters_lifecycle(world: World) -> None:
    admin = await world.community()
    member = await world.user(admin, "Max")

    assert (await member.api.get("/api/content_filters")).json == {"content_filters": []}

    resp = await admin.api.post("/api/content_filters", json={"content_filter": {"word": "Darn"}})
    assert resp.status == 201
    made = resp.json["content_filter"]
    assert list(made) == ["id", "word", "created_at"] and made["word"] == "Darn"
    # form encoding, plain `word`, whitespace folded
    resp = await admin.api.post("/api/content_filters", data={"word": "  heck   no "})
    assert resp.status == 201 and resp.json["content_filter"]["word"] == "heck no"

    listed = (await member.api.get("/api/content_filters")).json["content_filters"]
    assert [f["word"] for f in listed] == ["Darn", "heck no"]

    # duplicates, any case, are a conflict
    dup = await admin.api.post("/api/content_filters", json={"word": "DARN"})
    assert dup.status == 409
    for bad in ({}, {"word": "  "}, {"word": "!!!"}, {"word": "x" * 101}):
        resp = await admin.api.post("/api/content_filters", json=bad)
        assert resp.status == 422, bad
        assert "content_filter[word]" in resp.json["fields"]

    assert (await admin.api.delete(f"/api/content_filters/{made['id']}")).status == 204
    listed = (await member.api.get("/api/content_filters")).json["content_filters"]
    assert [f["word"] for f in listed] == ["heck no"]
    assert (await admin.api.delete(f"/api/content_filters/{made['id']}")).status == 404


async def test_content_filters_are_for_admins(world: World) -> None:
    admin = await world.community()
    member = await world.user(admin, "Max")
    made = (await admin.api.post("/api/content_filters", json={"word": "darn"})).json
    fid = made["content_filter"]["id"]

    assert (await member.api.post("/api/content_filters", json={"word": "heck"})).status == 403
    assert (await member.api.delete(f"/api/content_filters/{fid}")).status == 403
    listed = (await member.api.get("/api/content_filters")).json["content_filters"]
    assert [f["word"] for f in listed] == ["darn"]


async def test_content_filters_tenancy(world: World) -> None:
    admin = await world.community()
    other = await world.community("Other")
    theirs = (await other.api.post("/api/content_filters", json={"word": "theirs"})).json
    fid = theirs["content_filter"]["id"]

    assert (await admin.api.get("/api/content_filters")).json == {"content_filters": []}
    assert (await admin.api.delete(f"/api/content_filters/{fid}")).status == 404
    assert len((await other.api.get("/api/content_filters")).json["content_filters"]) == 1


async def test_content_filters_paging_and_query_count(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()

    async def count() -> int:
        query_log.reset()
        resp = await admin.api.get("/api/content_filters", params={"per_page": "500"})
        assert resp.status == 200
        return len(query_log)

    await count()
    few = await count()
    for i in range(12):
        await admin.api.post("/api/content_filters", json={"word": f"word{i:02d}"})
    assert await count() == few
    page2 = await admin.api.get("/api/content_filters", params={"per_page": "5", "page": "2"})
    assert [f["word"] for f in page2.json["content_filters"]] == [
        f"word{i:02d}" for i in range(5, 10)
    ]
    assert (await admin.api.get("/api/content_filters", params={"page": "0"})).status == 400


def test_blocked_words_match_whole_words_in_any_case() -> None:
    words = ["darn", "heck no", "c++"]
    assert blocked_words(words, "Well DARN it") == ["darn"]
    assert blocked_words(words, "darning socks") == []
    assert blocked_words(words, "oh heck\n no!") == ["heck no"]
    assert blocked_words(words, "heck, no") == []
    assert blocked_words(words, "I write C++ daily") == ["c++"]
    assert blocked_words(words, "darn; heck no") == ["darn", "heck no"]


async def test_content_filters_refuse_posted_text(world: World) -> None:
    admin = await world.community()
    member = await world.user(admin, "Max")
    await admin.api.post("/api/content_filters", json={"word": "darn"})

    resp = await member.api.post("/api/meetings", json={"meeting": {
        "title": "Darn standup", "starts_at": "2030-01-01T09:00:00Z"}})
    assert resp.status == 422
    assert "meeting[title]" in resp.json["fields"]
    ok = await member.api.post("/api/meetings", json={"meeting": {
        "title": "Standup", "starts_at": "2030-01-01T09:00:00Z"}})
    assert ok.status == 201
