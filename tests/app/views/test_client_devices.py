"""Client devices: registering, updating, listing and unregistering push registrations."""

from __future__ import annotations

from typing import Any

from tests.support import Member, World

DEVICE_KEYS = ["registration_id", "push_enabled", "push_mentions", "push_announcements",
               "push_replies", "push_conversation_activity", "notification_type", "client_id",
               "os_version", "client_version"]
APNS_TOKEN = "a1" * 32
FCM_TOKEN = "cYx3:APA91bH-" + "x_" * 60


async def devices_of(member: Member) -> list[dict[str, Any]]:
    resp = await member.api.get("/api/client_devices")
    assert resp.status == 200, resp.text
    assert list(resp.json) == ["client_devices"]
    devices: list[dict[str, Any]] = resp.json["client_devices"]
    return devices


async def platforms(world: World) -> dict[str, str]:
    rows = await world.pool.fetch("SELECT registration_id, platform FROM client_devices")
    return {r["registration_id"]: r["platform"] for r in rows}


async def test_register_a_device(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    assert await devices_of(ann) == []
    resp = await ann.api.put("/api/client_devices", json={
        "registration_id": APNS_TOKEN,
        "client_device": {"push_mentions": False, "os_version": "iOS 17.2",
                          "client_version": "3.1"},
    })
    assert resp.status == 204 and resp.text == ""
    [device] = await devices_of(ann)
    assert list(device) == DEVICE_KEYS
    assert device == {
        "registration_id": APNS_TOKEN, "push_enabled": True, "push_mentions": False,
        "push_announcements": True, "push_replies": True, "push_conversation_activity": True,
        "notification_type": "main", "client_id": device["client_id"],
        "os_version": "iOS 17.2", "client_version": "3.1",
    }
    assert isinstance(device["client_id"], int)
    assert await devices_of(admin) == []


async def test_registering_again_updates_the_same_device(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    first = await ann.api.put("/api/client_devices.json", data={
        "registration_id": FCM_TOKEN, "client_device[push_replies]": "false",
        "client_device[os_version]": "Android 14",
    })
    assert first.status == 204, first.text
    [before] = await devices_of(ann)
    again = await ann.api.put("/api/client_devices", json={
        "registration_id": FCM_TOKEN, "notification_type": "main",
        "client_device": {"push_enabled": "0", "client_version": "2.0"},
    })
    assert again.status == 204
    [after] = await devices_of(ann)
    assert after["client_id"] == before["client_id"]
    assert (after["push_enabled"], after["push_replies"]) == (False, False)  # kept
    assert (after["os_version"], after["client_version"]) == ("Android 14", "2.0")
    # the same token for conversations is another device
    chat = await ann.api.put("/api/client_devices", json={
        "registration_id": FCM_TOKEN, "notification_type": "conversations"})
    assert chat.status == 204
    listed = await devices_of(ann)
    assert [d["notification_type"] for d in listed] == ["main", "conversations"]
    assert listed[1]["push_enabled"] is True


async def test_the_platform_comes_from_the_parameter_or_the_token(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    for token, platform in ((APNS_TOKEN, None), (FCM_TOKEN, None), ("b2" * 32, "android"),
                            ("opaque-token", "ios"), ("another", "FCM")):
        body: dict[str, Any] = {"registration_id": token}
        if platform:
            body["client_device"] = {"platform": platform}
        assert (await ann.api.put("/api/client_devices", json=body)).status == 204
    assert await platforms(world) == {
        APNS_TOKEN: "apns", FCM_TOKEN: "fcm", "b2" * 32: "fcm", "opaque-token": "apns",
        "another": "fcm",
    }
    bad = await ann.api.put("/api/client_devices", json={
        "registration_id": "x", "client_device": {"platform": "blackberry"}})
    assert bad.status == 422 and list(bad.json["fields"]) == ["client_device[platform]"]


async def test_bad_parameters(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    cases = [
        ({}, "registration_id"),
        ({"registration_id": "   "}, "registration_id"),
        ({"registration_id": "t", "notification_type": "sms"}, "notification_type"),
        ({"registration_id": "t", "client_device": {"push_enabled": "maybe"}},
         "client_device[push_enabled]"),
        ({"registration_id": "t" * 5000}, "registration_id"),
        ({"registration_id": "t", "client_device": {"os_version": "v" * 300}},
         "client_device[os_version]"),
    ]
    for body, field in cases:
        resp = await ann.api.put("/api/client_devices", json=body)
        assert resp.status == 422, body
        assert field in resp.json["fields"], (body, resp.json)
    assert await devices_of(ann) == []
    missing = await ann.api.delete("/api/client_devices")
    assert missing.status == 422 and "registration_id" in missing.json["fields"]
    wrong = await ann.api.delete("/api/client_devices",
                                 params={"registration_id": "t", "notification_type": "x"})
    assert wrong.status == 422
    assert (await ann.api.anonymous().get("/api/client_devices")).status == 401


async def test_unregister(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    for kind in ("main", "conversations"):
        resp = await ann.api.put("/api/client_devices",
                                 json={"registration_id": "ann-1", "notification_type": kind})
        assert resp.status == 204
    assert (await bob.api.put("/api/client_devices",
                              json={"registration_id": "bob-1"})).status == 204
    # notification_type defaults to main; the query string or the body both work
    resp = await ann.api.delete("/api/client_devices", params={"registration_id": "ann-1"})
    assert resp.status == 204 and resp.text == ""
    assert [d["notification_type"] for d in await devices_of(ann)] == ["conversations"]
    resp = await ann.api.delete("/api/client_devices.json", json={
        "registration_id": "ann-1", "notification_type": "conversations"})
    assert resp.status == 204
    assert await devices_of(ann) == []
    # idempotent, and someone else's token is left alone (and nothing tells it exists)
    for token in ("ann-1", "bob-1", "never"):
        resp = await ann.api.delete("/api/client_devices", params={"registration_id": token})
        assert resp.status == 204
    assert [d["registration_id"] for d in await devices_of(bob)] == ["bob-1"]


async def test_a_token_moves_to_whoever_registers_it_last(world: World) -> None:
    admin = await world.community()
    ann, bob = [await world.user(admin, n) for n in ("Ann", "Bob")]
    assert (await ann.api.put("/api/client_devices", json={
        "registration_id": "shared-phone",
        "client_device": {"push_mentions": False, "os_version": "1"}})).status == 204
    assert (await bob.api.put("/api/client_devices",
                              json={"registration_id": "shared-phone"})).status == 204
    assert await devices_of(ann) == []
    [device] = await devices_of(bob)
    assert device["push_mentions"] is True and device["os_version"] is None  # fresh switches


async def test_devices_belong_to_one_community(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    other = await world.community("Other")
    zed = await world.user(other, "Zed")
    for member in (ann, zed):
        assert (await member.api.put("/api/client_devices",
                                     json={"registration_id": "same-token"})).status == 204
    assert len(await devices_of(ann)) == 1 and len(await devices_of(zed)) == 1
    assert (await zed.api.delete("/api/client_devices",
                                 params={"registration_id": "same-token"})).status == 204
    assert len(await devices_of(ann)) == 1 and await devices_of(zed) == []


async def test_a_user_has_at_most_fifty_devices(world: World) -> None:
    admin = await world.community()
    ann = await world.user(admin, "Ann")
    await world.pool.execute(
        "INSERT INTO client_devices (community_id, user_id, registration_id, platform) "
        "SELECT $1, $2, 'token-' || n, 'fcm' FROM generate_series(1, 50) n",
        admin.community.id, ann.id,
    )
    too_many = await ann.api.put("/api/client_devices", json={"registration_id": "token-51"})
    assert too_many.status == 422 and "registration_id" in too_many.json["fields"]
    update = await ann.api.put("/api/client_devices", json={
        "registration_id": "token-7", "client_device": {"push_enabled": False}})
    assert update.status == 204  # updating one of them is fine
    assert len(await devices_of(ann)) == 50
