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
