"""PUT /api/users/:id with user[profile_photo][data]: the avatar becomes an uploaded image."""

from __future__ import annotations

import io

import aiohttp
from PIL import Image
from yarl import URL

from tests.support import World


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (200, 160), (200, 40, 40)).save(out, format="PNG")
    return out.getvalue()


async def test_profile_photo_upload_through_the_api(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    form = aiohttp.FormData()
    form.add_field("user[title]", "Photographer")
    form.add_field("user[profile_photo][data]", _png(), filename="me.png",
                   content_type="image/png")
    resp = await bob.api.put(f"/api/users/{bob.id}", data=form)
    assert resp.status == 200, resp.text
    user = resp.json["user"]
    assert user["title"] == "Photographer"
    avatars = user["avatars"]
    assert avatars["is_system_default"] is False
    assert isinstance(avatars["id"], int)
    square = await bob.api.get(URL(avatars["square45"]).path)
    assert square.status == 200
    assert Image.open(io.BytesIO(square.raw)).size == (45, 45)
    # others see the new avatar too
    seen = await admin.api.get(f"/api/users/{bob.id}")
    assert seen.json["user"]["avatars"]["id"] == avatars["id"]


async def test_profile_photo_of_someone_else_is_forbidden(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    eve = await world.user(admin, "Eve")
    form = aiohttp.FormData()
    form.add_field("user[profile_photo][data]", _png(), filename="x.png",
                   content_type="image/png")
    resp = await eve.api.put(f"/api/users/{bob.id}", data=form)
    assert resp.status == 403
    unchanged = await admin.api.get(f"/api/users/{bob.id}")
    assert unchanged.json["user"]["avatars"]["is_system_default"] is True


async def test_profile_photo_on_create(world: World) -> None:
    """POST /api/users takes user[profile_photo][data] as PUT does (it used to be ignored)."""
    admin = await world.community()
    form = aiohttp.FormData()
    form.add_field("user[first_name]", "Ann")
    form.add_field("user[last_name]", "Lee")
    form.add_field("user[email]", f"ann@{admin.community.domain}")
    form.add_field("user[password]", "long enough pw")
    form.add_field("user[profile_photo][data]", _png(), filename="ann.png",
                   content_type="image/png")
    resp = await admin.api.post("/api/users", data=form)
    assert resp.status == 201, resp.text
    avatars = resp.json["user"]["avatars"]
    assert avatars["is_system_default"] is False and isinstance(avatars["id"], int)
    square = await admin.api.get(URL(avatars["square45"]).path)
    assert square.status == 200
    assert Image.open(io.BytesIO(square.raw)).size == (45, 45)

    # not an image: 422 and nobody is created
    bad = aiohttp.FormData()
    bad.add_field("user[first_name]", "Ben")
    bad.add_field("user[email]", f"ben@{admin.community.domain}")
    bad.add_field("user[password]", "long enough pw")
    bad.add_field("user[profile_photo][data]", b"not an image", filename="ben.png",
                  content_type="image/png")
    refused = await admin.api.post("/api/users", data=bad)
    assert refused.status == 422
    assert refused.json["fields"] == {"user[profile_photo][data]": [
        "must be a PNG, JPEG, GIF, WebP, BMP or TIFF image"]}
    found = await admin.api.get("/api/users/search", params={"q": f"ben@{admin.community.domain}"})
    assert found.json["users"] == []
