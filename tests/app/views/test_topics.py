"""Topics (POST/GET/PUT /api/topics, search, contributors) and tags (GET /api/tags/:id)."""

from __future__ import annotations

from typing import Any

from tests.app.views.feed_support import comment, make_group, post
from tests.conftest import QueryLog
from tests.support import Member, World

TOPIC_KEYS = [
    "id", "name", "description", "html_description", "url", "messages_count",
    "contributors_count", "editable", "type",
]


async def create(member: Member, name: str, description: str | None = None,
                 status: int = 201) -> Any:
    topic: dict[str, Any] = {"name": name}
    if description is not None:
        topic["description"] = description
    resp = await member.api.post("/api/topics", json={"topic": topic})
    assert resp.status == status, resp.text
    return resp.json


async def test_create_and_show_topic(world: World) -> None:
    admin = await world.community("Acme", domain="acme.example")
    mia = await world.user(admin, "Mia")
    body = await create(mia, "#Q3-Plans", "What we plan for **Q3**")
    assert list(body) == ["topic"]
    topic = body["topic"]
    assert list(topic) == TOPIC_KEYS
    assert topic["name"] == "q3-plans"
    assert topic["description"] == "What we plan for **Q3**"
    assert topic["html_description"] == (
        '<div class="markdown-body"><p>What we plan for <strong>Q3</strong></p></div>'
    )
    assert topic["url"] == "https://acme.example/topics/q3-plans"
    assert topic["messages_count"] == 0 and topic["contributors_count"] == 0
    assert topic["editable"] is True and topic["type"] == "Topic"

    # everyone sees a created topic, by id, id-slug or name (any case, with or without #)
    bob = await world.user(admin, "Bob")
    for ref in (str(topic["id"]), f"{topic['id']}-q3-plans", "q3-plans", "Q3-Plans", "%23q3-plans"):
        resp = await bob.api.get(f"/api/topics/{ref}")
        assert resp.status == 200, ref
        assert list(resp.json) == ["topic", "messages", "messages_next_page"]
        assert resp.json["topic"] == {**topic, "editable": False}
        assert resp.json["messages"] == [] and resp.json["messages_next_page"] is None

    form = await mia.api.post("/api/topics.json", data={"topic[name]": "Budget"})
    assert form.status == 201 and form.json["topic"]["name"] == "budget"
    assert form.json["topic"]["description"] is None
    assert form.json["topic"]["html_description"] is None


async def test_create_topic_bad_input(world: World) -> None:
    admin = await world.community()
    await create(admin, "sales")
    duplicate = await create(admin, "#SALES", status=409)
    assert duplicate["fields"] == {"topic[name]": ["has already been taken"]}
    for name in ("", "  ", "#", "two words", "-dash", "x" * 101, "semi;colon"):
        resp = await admin.api.post("/api/topics", json={"topic": {"name": name}})
        assert resp.status == 422, name
        assert "topic[name]" in resp.json["fields"]
    assert (await admin.api.post("/api/topics", json={})).status == 422
    long = await admin.api.post("/api/topics", json={"topic": {"name": "ok",
                                                               "description": "d" * 5001}})
    assert long.status == 422 and "topic[description]" in long.json["fields"]
    await admin.api.post("/api/content_filters", json={"word": "darn"})
    filtered = await admin.api.post("/api/topics", json={"topic": {"name": "fine",
                                                                   "description": "Darn"}})
    assert filtered.status == 422 and "topic[description]" in filtered.json["fields"]
    assert (await admin.api.get("/api/topics/fine")).status == 404


async def test_topic_messages_follow_visibility(world: World) -> None:
    admin = await world.community()
    member = await world.user(admin, "Mia")
    outsider = await world.user(admin, "Oz")
    secret = await make_group(world, admin, "Secret", permission="private", members=[member])
    public = await post(member, "Launch day #launch")
    hidden = await post(member, "Secret launch plans #launch", group_id=secret)
    other_topic = await post(member, "Unrelated #other")
    commented = await post(outsider, "Lunch?")
    await comment(member, commented["id"], "after the #launch")

    as_member = (await member.api.get("/api/topics/launch")).json
    assert [m["id"] for m in as_member["messages"]] == [
        commented["id"], hidden["id"], public["id"],
    ]
    assert as_member["topic"]["messages_count"] == 3
    assert as_member["topic"]["contributors_count"] == 1

    as_outsider = (await outsider.api.get("/api/topics/launch")).json
    assert [m["id"] for m in as_outsider["messages"]] == [commented["id"], public["id"]]
    assert as_outsider["topic"]["messages_count"] == 2
    assert other_topic["id"] not in [m["id"] for m in as_outsider["messages"]]

    paged = await member.api.get("/api/topics/launch", params={"per_page": "2"})
    assert [m["id"] for m in paged.json["messages"]] == [commented["id"], hidden["id"]]
    assert paged.json["messages_next_page"] == 2
    page2 = await member.api.get("/api/topics/launch", params={"per_page": "2", "page": "2"})
    assert [m["id"] for m in page2.json["messages"]] == [public["id"]]
    assert page2.json["messages_next_page"] is None
    limited = await member.api.get("/api/topics/launch", params={"comments_limit": "0"})
    assert all(m["comments"] == [] for m in limited.json["messages"])
    for bad in ({"page": "0"}, {"comments_limit": "x"}, {"since": "-1"}):
        assert (await member.api.get("/api/topics/launch", params=bad)).status == 400, bad


async def test_a_tag_used_only_where_you_cannot_read_does_not_exist_for_you(
    world: World,
) -> None:
    admin = await world.community()
    member = await world.user(admin, "Mia")
    outsider = await world.user(admin, "Oz")
    secret = await make_group(world, admin, "Secret", permission="private", members=[member])
    await post(member, "Plans for #acquisition", group_id=secret)

    assert (await member.api.get("/api/topics/acquisition")).status == 200
    for path in ("/api/topics/acquisition", "/api/tags/acquisition",
                 "/api/topics/acquisition/contributors"):
        assert (await outsider.api.get(path)).status == 404, path
    search = await outsider.api.get("/api/topics/search", params={"q": "acq"})
    assert search.json == {"topics": []}
    assert [t["name"] for t in (await member.api.get(
        "/api/topics/search", params={"q": "acq"})).json["topics"]] == ["acquisition"]

    # creating it tells the outsider nothing: it is theirs now, the private messages stay hidden
    made = (await create(outsider, "acquisition", "M&A"))["topic"]
    assert made["messages_count"] == 0 and made["editable"] is True
    as_outsider = (await outsider.api.get("/api/topics/acquisition")).json
    assert as_outsider["messages"] == []
    as_member = (await member.api.get("/api/topics/acquisition")).json
    assert as_member["topic"]["id"] == made["id"]
    assert as_member["topic"]["messages_count"] == 1
    assert as_member["topic"]["description"] == "M&A"
    # and now it is taken for everyone
    await create(member, "acquisition", status=409)


async def test_update_topic(world: World) -> None:
    admin = await world.community()
    creator = await world.user(admin, "Cleo")
    other = await world.user(admin, "Otto")
    topic = (await create(creator, "roadmap", "v1"))["topic"]
    path = f"/api/topics/{topic['id']}"

    resp = await creator.api.put(path, json={"topic": {"description": "v2"}})
    assert resp.status == 200 and resp.json["topic"]["description"] == "v2"
    assert (await other.api.get("/api/topics/roadmap")).json["topic"]["description"] == "v2"

    assert (await other.api.put(path, json={"topic": {"description": "mine"}})).status == 403
    by_admin = await admin.api.put("/api/topics/roadmap", data={"topic[description]": "v3"})
    assert by_admin.status == 200 and by_admin.json["topic"]["editable"] is True
    same_name = await creator.api.put(path, json={"topic": {"name": "RoadMap",
                                                            "description": ""}})
    assert same_name.status == 200 and same_name.json["topic"]["description"] is None
    renamed = await creator.api.put(path, json={"topic": {"name": "plans"}})
    assert renamed.status == 422 and "topic[name]" in renamed.json["fields"]
    assert (await other.api.get("/api/topics/roadmap")).json["topic"]["description"] is None

    # a topic made by a #tag belongs to whoever first used it
    await post(other, "Thinking about #hiring")
    hiring = await other.api.put("/api/topics/hiring", json={"topic": {"description": "Jobs"}})
    assert hiring.status == 200 and hiring.json["topic"]["description"] == "Jobs"
    assert (await creator.api.put("/api/topics/hiring",
                                  json={"topic": {"description": "x"}})).status == 403


async def test_topic_tenancy(world: World) -> None:
    admin = await world.community()
    other = await world.community("Other")
    theirs = (await create(other, "theirs"))["topic"]
    mine = (await create(admin, "shared-name"))["topic"]
    their_shared = (await create(other, "shared-name"))["topic"]
    assert their_shared["id"] != mine["id"]

    for path in (f"/api/topics/{theirs['id']}", "/api/topics/theirs",
                 f"/api/topics/{theirs['id']}/contributors", f"/api/tags/{theirs['id']}",
                 "/api/tags/theirs", "/api/topics/nope"):
        assert (await admin.api.get(path)).status == 404, path
    assert (await admin.api.put(f"/api/topics/{theirs['id']}",
                                json={"topic": {"description": "x"}})).status == 404
    # the same name means each community's own topic
    assert (await admin.api.get("/api/topics/shared-name")).json["topic"]["id"] == mine["id"]
    assert (await admin.api.get("/api/topics/search", params={"q": "the"})).json == {
        "topics": []
    }
    assert (await admin.api.anonymous().get("/api/topics/shared-name")).status == 401


async def test_search_topics(world: World) -> None:
    admin = await world.community()
    member = await world.user(admin, "Mia")
    for name in ("sales-emea", "sales", "salesforce", "support"):
        await create(admin, name)
    await post(member, "Closing #sales_q4")

    async def names(q: str, **params: str) -> list[str]:
        resp = await member.api.get("/api/topics/search", params={"q": q, **params})
        assert resp.status == 200
        assert all(list(t) == TOPIC_KEYS for t in resp.json["topics"])
        return [t["name"] for t in resp.json["topics"]]

    assert await names("sales") == ["sales", "sales-emea", "sales_q4", "salesforce"]
    assert await names("#SALES_") == ["sales_q4"]
    assert await names("s", per_page="2") == ["sales", "sales-emea"]
    assert await names("s", per_page="2", page="3") == ["support"]
    assert await names("zzz") == []
    assert await names("  ") == []
    assert await names("%") == []
    assert (await member.api.get("/api/topics/search", params={"q": "s", "page": "x"})
            ).status == 400


async def test_search_topics_runs_a_fixed_number_of_queries(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()

    async def count() -> int:
        query_log.reset()
        resp = await admin.api.get("/api/topics/search", params={"q": "t", "per_page": "500"})
        assert resp.status == 200
        return len(query_log)

    await create(admin, "t0")
    await count()
    few = await count()
    for i in range(1, 15):
        await create(admin, f"t{i}")
    await post(admin, "#t1 #t2 #t3")
    assert await count() == few


async def test_contributors(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann", "Author")
    ben = await world.user(admin, "Ben", "Commenter")
    cat = await world.user(admin, "Cat", "Secret")
    viewer = await world.user(admin, "Vic", "Viewer")
    secret = await make_group(world, admin, "Secret", permission="private", members=[cat])
    first = await post(ann, "Working on #perf")
    await post(ann, "More #perf work")
    await comment(ben, first["id"], "Measured it #perf")
    await post(cat, "Private #perf numbers", group_id=secret)
    await post(viewer, "Nothing tagged")

    resp = await viewer.api.get("/api/topics/perf/contributors")
    assert resp.status == 200 and list(resp.json) == ["users"]
    users = resp.json["users"]
    assert [u["id"] for u in users] == [ann.id, ben.id]
    # the 23 captured keys, then first_name, last_name, out_of_office_on
    assert list(users[0])[:2] == ["contact_info", "manager"] and len(users[0]) == 26
    as_cat = (await cat.api.get("/api/topics/perf/contributors")).json["users"]
    assert [u["id"] for u in as_cat] == [ann.id, ben.id, cat.id]
    one = await viewer.api.get("/api/topics/perf/contributors", params={"per_page": "1",
                                                                        "page": "2"})
    assert [u["id"] for u in one.json["users"]] == [ben.id]
    topic = (await viewer.api.get("/api/topics/perf")).json["topic"]
    assert topic["contributors_count"] == 2 and topic["messages_count"] == 2


async def test_contributors_run_a_fixed_number_of_queries(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()
    people = [await world.user(admin, f"P{i}") for i in range(8)]

    async def count() -> int:
        query_log.reset()
        resp = await admin.api.get("/api/topics/bench/contributors",
                                   params={"per_page": "500"})
        assert resp.status == 200
        return len(query_log)

    await post(people[0], "#bench")
    await count()
    few = await count()
    for person in people[1:]:
        await post(person, "me too #bench")
    assert await count() == few
    assert len((await admin.api.get("/api/topics/bench/contributors")).json["users"]) == 8


async def test_show_tag(world: World) -> None:
    admin = await world.community("Acme", domain="acme.example")
    member = await world.user(admin, "Mia")
    await post(member, "Go #Team")
    resp = await member.api.get("/api/tags/team")
    assert resp.status == 200 and list(resp.json) == ["tag"]
    tag = resp.json["tag"]
    assert list(tag) == ["id", "name", "url", "messages_count"]
    assert tag["name"] == "team" and tag["url"] == "https://acme.example/topics/team"
    assert tag["messages_count"] == 1
    assert (await member.api.get(f"/api/tags/{tag['id']}.json")).json == resp.json


async def test_topics_in_search_suggestions(world: World) -> None:
    admin = await world.community()
    member = await world.user(admin, "Mia")
    outsider = await world.user(admin, "Oz")
    secret = await make_group(world, admin, "Secret", permission="private", members=[member])
    await create(admin, "design")
    await post(member, "#designops", group_id=secret)

    resp = await outsider.api.get("/api/search/suggestions", params={"q": "des",
                                                                      "types[]": "Topic"})
    assert resp.status == 200
    [topics] = resp.json["results"]
    assert topics["heading"] == "Topics"
    assert [t["name"] for t in topics["entries"]] == ["design"]
    assert list(topics["entries"][0]) == ["id", "name", "url", "type"]
    as_member = await member.api.get("/api/search/suggestions", params=[
        ("q", "des"), ("types[]", "Topic"), ("types[]", "User")])
    assert [r["heading"] for r in as_member.json["results"]] == [
        "People you follow", "Entire company", "Topics",
    ]
    assert [t["name"] for t in as_member.json["results"][2]["entries"]] == [
        "design", "designops",
    ]
