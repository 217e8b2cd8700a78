"""Malformed multipart bodies on real endpoints: no boundary, control bytes in a part header.
Each is a 400 JSON error, also unauthenticated on /api/authentication and on the attachment
upload that streams its file (issue 8, defect 7)."""

from __future__ import annotations

from tests.support import Member, World

GOOD_PART = b'Content-Disposition: form-data; name="x"'
BAD_PARTS = [
    b'Content-Disposition: form-data; name="a\x01b"',
    b'Content-Disposition: form-data; name="attachment"; filename="x\x07.txt"',
    b'Content-Disposition: form-data; name="x"\r\nContent-Type: text/pl\x00ain',
]


def _body(part_headers: bytes) -> bytes:
    return b"--XyZ\r\n" + part_headers + b"\r\n\r\nvalue\r\n--XyZ--\r\n"


async def _paths(admin: Member) -> list[tuple[str, str, bool]]:
    """(method, path, anonymous) of endpoints that take a body."""
    message = await admin.api.post("/api/messages", json={"message": {"body": "Hi"}})
    assert message.status == 201, message.text
    group = await admin.api.post("/api/groups", json={"group": {"name": "Hooks"}})
    hook = await admin.api.post(f"/api/groups/{group.json['group']['id']}/webhooks",
                                json={"webhook": {"name": "Bot"}})
    assert hook.status == 201, hook.text
    hook_path = "/" + hook.json["webhook"]["url"].split("://", 1)[1].split("/", 1)[1]
    return [
        ("POST", "/api/authentication", True),
        ("POST", hook_path, True),
        ("POST", "/api/attachments", False),
        ("POST", "/api/messages", False),
        ("POST", f"/api/messages/{message.json['message']['id']}/comments", False),
        ("PUT", f"/api/users/{admin.id}", False),
    ]


async def test_malformed_multipart_is_a_400_everywhere(world: World) -> None:
    admin = await world.community()
    for method, path, anonymous in await _paths(admin):
        api = admin.api.anonymous() if anonymous else admin.api
        cases = [("multipart/form-data", _body(GOOD_PART)),
                 ("multipart/form-data; boundary=", _body(GOOD_PART))]
        cases += [("multipart/form-data; boundary=XyZ", _body(bad)) for bad in BAD_PARTS]
        for ctype, body in cases:
            resp = await api.request(method, path, data=body, headers={"Content-Type": ctype})
            assert resp.status == 400, (method, path, ctype, body, resp.status, resp.text)
            assert resp.json["code"] == "bad_request"
            assert resp.headers["X-Request-Id"]
