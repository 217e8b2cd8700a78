"""The front door: `/` and `/api/docs` are HTML for people, on any Host, and everything they
load is served by Commons itself (no CDN)."""

from __future__ import annotations

import re

from aiohttp.test_utils import TestClient

from app.views.ops import version


async def test_front_page_says_what_this_is(client: TestClient) -> None:
    resp = await client.get("/", headers={"Host": "anything.example"})
    assert resp.status == 200
    assert resp.content_type == "text/html"
    page = await resp.text()
    assert "Commons" in page and version() in page
    for link in ("/api/docs", "/api/openapi.json", "/healthz", "/readyz"):
        assert f'href="{link}"' in page


async def test_api_docs_load_only_from_this_server(client: TestClient) -> None:
    resp = await client.get("/api/docs", headers={"Host": "anything.example"})
    assert resp.status == 200
    page = await resp.text()
    assert not re.search(r"(src|href)=\"(https?:)?//", page), "nothing from another host"
    assets = re.findall(r"(?:src|href)=\"(/assets/[^\"]+)\"", page)
    assert len(assets) == 3
    for asset in assets:
        got = await client.get(asset)
        assert got.status == 200, asset
        assert len(await got.read()) > 100
    init = await (await client.get("/assets/docs.js")).text()
    assert "validatorUrl: null" in init


async def test_unknown_paths_are_still_json(client: TestClient) -> None:
    resp = await client.get("/nothing-here", headers={"Host": "anything.example"})
    assert resp.status == 404
    assert (await resp.json())["code"] == "not_found"


def test_the_docs_ui_is_package_data() -> None:
    """`pip install .` (the Containerfile) carries app/static, Swagger UI included."""
    import tomllib

    from tests.servers import REPO_ROOT

    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert "static/**/*" in pyproject["tool"]["setuptools"]["package-data"]["app"]
    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "LICENSE"):
        assert (REPO_ROOT / "app" / "static" / "swagger-ui" / name).is_file()
