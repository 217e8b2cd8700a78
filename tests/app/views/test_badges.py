"""Badges: the default set of each community, GET /api/badges(/:id), and their images."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from app.render.badges import IMAGE_SIZES
from tests.conftest import QueryLog
from tests.support import World

STATIC = Path(__file__).resolve().parents[3] / "app" / "static"
DEFAULT_NAMES = [
    "Thank You", "Team Player", "Above and Beyond", "Innovator", "Problem Solver",
    "Customer Hero",
]


async def test_each_community_gets_the_default_badges(world: World) -> None:
    admin = await world.community("Acme", domain="acme.example")
    member = await world.user(admin, "Mia")
    resp = await member.api.get("/api/badges")
    assert resp.status == 200 and list(resp.json) == ["badges"]
    badges = resp.json["badges"]
    assert [b["name"] for b in badges] == DEFAULT_NAMES

    other = await world.community("Other")
    theirs = (await other.api.get("/api/badges")).json["badges"]
    assert [b["name"] for b in theirs] == DEFAULT_NAMES
    assert {b["id"] for b in theirs}.isdisjoint({b["id"] for b in badges})


async def test_show_badge(world: World) -> None:
    admin = await world.community("Acme", domain="acme.example")
    member = await world.user(admin, "Mia")
    first = (await member.api.get("/api/badges")).json["badges"][0]

    resp = await member.api.get(f"/api/badges/{first['id']}")
    assert resp.status == 200 and list(resp.json) == ["badge"]
    badge = resp.json["badge"]
    assert list(badge) == ["id", "name", "description", "url", "images"]
    assert badge["name"] == "Thank You" and badge["description"]
    assert badge["url"] == f"https://acme.example/badges/{badge['id']}"
    assert list(badge["images"]) == ["square30", "square45", "square70", "square140"]
    assert badge["images"]["square45"] == (
        "https://acme.example/assets/badges/thank_you_square45.png"
    )
    assert (await member.api.get(f"/api/badges/{badge['id']}.json")).json == resp.json


async def test_badge_images_are_served(world: World) -> None:
    admin = await world.community()
    badge = (await admin.api.get("/api/badges")).json["badges"][2]
    for size, url in badge["images"].items():
        path = url.split("://", 1)[1].split("/", 1)[1]
        async with world.client.get("/" + path, headers={"Host": admin.api.host}) as resp:
            assert resp.status == 200, url
            assert resp.headers["Content-Type"] == "image/png", size
            assert (await resp.read()).startswith(b"\x89PNG")


def test_every_default_badge_has_its_images() -> None:
    sql = (Path(__file__).resolve().parents[3] / "migrations" /
           "0008_thanks_badges.sql").read_text()
    keys = ["thank_you", "team_player", "above_and_beyond", "innovator", "problem_solver",
            "customer_hero"]
    for key in keys:
        assert f"('{key}'," in sql
        for size in IMAGE_SIZES:
            with Image.open(STATIC / "badges" / f"{key}_{size}.png") as image:
                side = int(size.removeprefix("square"))
                assert image.format == "PNG" and image.size == (side, side)


async def test_badge_tenancy_and_bad_ids(world: World) -> None:
    admin = await world.community()
    other = await world.community("Other")
    theirs = (await other.api.get("/api/badges")).json["badges"][0]
    assert (await admin.api.get(f"/api/badges/{theirs['id']}")).status == 404
    assert (await admin.api.get("/api/badges/999999")).status == 404
    assert (await admin.api.get("/api/badges/nope")).status == 404
    assert (await admin.api.anonymous().get(f"/api/badges/{theirs['id']}")).status == 401


async def test_default_badges_backfill_existing_communities(world: World) -> None:
    """The migration's function makes the set for a community made without the hook, once."""
    async with world.pool.acquire() as conn:
        cid = await conn.fetchval(
            "INSERT INTO communities (name, domain, base_url) VALUES ('Old', 'old.example',"
            " 'https://old.example') RETURNING id"
        )
        await conn.execute("SELECT commons_create_default_badges($1)", cid)
        await conn.execute("SELECT commons_create_default_badges($1)", cid)
        names = [r["name"] for r in await conn.fetch(
            "SELECT name FROM badges WHERE community_id = $1 ORDER BY position", cid)]
    assert names == DEFAULT_NAMES


async def test_badge_list_runs_a_fixed_number_of_queries(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()

    async def count() -> int:
        query_log.reset()
        assert (await admin.api.get("/api/badges")).status == 200
        return len(query_log)

    await count()
    few = await count()
    async with world.pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO badges (community_id, image_key, name, position)"
            " SELECT $1, 'thank_you', 'Extra ' || i, 10 + i FROM generate_series(1, 20) i",
            admin.community.id,
        )
    assert await count() == few
    assert len((await admin.api.get("/api/badges")).json["badges"]) == 26
