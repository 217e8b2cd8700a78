"""Malformed input that schemathesis found answered with a 500: each is the client's fault, a
JSON 400."""

from __future__ import annotations

from tests.support import World


async def test_multipart_without_a_boundary_is_400(world: World) -> None:
    ann = await world.community()
    resp = await ann.api.post("/api/groups", data=b'{"group": {"name": "x"}}',
                              headers={"Content-Type": "multipart/form-data"})
    assert resp.status == 400, resp.text
    assert resp.json["code"] == "bad_request"


async def test_a_control_byte_in_a_part_header_is_400(world: World) -> None:
    ann = await world.community()
    body = (b"--b\r\nContent-Disposition: form-data; name=\"group[name]\"\r\n"
            b"X-Bad: a\x17b\r\n\r\nTeam\r\n--b--\r\n")
    for api in (ann.api, ann.api.anonymous()):
        path = "/api/groups" if api is ann.api else "/api/authentication"
        resp = await api.post(path, data=body,
                              headers={"Content-Type": "multipart/form-data; boundary=b"})
        assert resp.status == 400, (path, resp.text)
        assert resp.json["code"] == "bad_request"
        assert resp.headers["X-Request-Id"]


async def test_a_far_future_since_is_400(world: World) -> None:
    ann = await world.community()
    resp = await ann.api.post("/api/topics", json={"topic": {"name": "planning"}})
    assert resp.status == 201, resp.text
    topic_id = resp.json["topic"]["id"]
    far = await ann.api.get(f"/api/topics/{topic_id}?since=99999999999999")
    assert far.status == 400, far.text
    assert far.json["code"] == "bad_request"


async def test_provisioning_multipart_without_a_boundary_is_400(world: World) -> None:
    ann = await world.community()
    resp = await ann.api.post("/api/users/provision", data=b"x",
                              headers={"Content-Type": "multipart/form-data"})
    assert resp.status == 400, resp.text
    assert resp.json["code"] == "bad_request"
