"""File parts of multipart bodies: spooled to disk, not held in memory, and closed when the
request ends (issue 8, defect 6); malformed multipart bodies are 400s (defect 7)."""

from __future__ import annotations

import base64
import hashlib
import os
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast
from unittest import mock

import aiohttp
import pytest
from aiohttp import web
from aiohttp.streams import EMPTY_PAYLOAD
from aiohttp.test_utils import TestClient, make_mocked_request

from app.errors import TooLarge
from app.middleware import errors_middleware
from app.params import UploadedFile, read_params
from app.responses import json_response
from app.uploads import (
    DATA_URI_LIMIT_KEY,
    SPOOL_BYTES,
    UPLOAD_DIR_KEY,
    UPLOADS_KEY,
    WRITE_BUFFER,
    InvalidDataUri,
    close_uploads,
    read_json_spooling_data_uris,
    uploads_middleware,
)

SEEN: list[UploadedFile] = []


async def _keep(request: web.Request) -> web.Response:
    params = await read_params(request)
    upload = params["file"]
    assert isinstance(upload, UploadedFile)
    SEEN.append(upload)
    # what the endpoint sees: the bytes on disk, little of them in memory
    data = b"".join([chunk async for chunk in upload.chunks()])
    return json_response({
        "size": upload.size, "read": len(data), "head": (await upload.head(4)).decode(),
        "on_disk": upload._file is not None,
        "in_memory": len(upload._memory) + upload._pending_bytes,
        "same": data == _payload(upload.size),
    })


def _payload(size: int) -> bytes:
    return (b"0123456789abcdef" * (size // 16 + 1))[:size]


def _open_files(directory: Path) -> int:
    """Descriptors of this process open on files under directory (unnamed temp files show
    as `<dir>/#123 (deleted)`)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target.startswith(str(directory))
    return count


async def _echo(request: web.Request) -> web.Response:
    params = await read_params(request)
    return json_response({k: v if isinstance(v, str) else repr(v) for k, v in params.items()})


@pytest.fixture
async def uploads(aiohttp_client: Any, tmp_path: Path) -> TestClient:
    app = web.Application(
        middlewares=[errors_middleware, uploads_middleware(tmp_path / "uploads")],
        client_max_size=8 * 1024 * 1024,
    )
    app.router.add_post("/keep", _keep)
    app.router.add_post("/echo", _echo)
    return await aiohttp_client(app)


async def test_a_large_file_part_is_spooled_to_disk_and_closed_after(
    uploads: TestClient, tmp_path: Path
) -> None:
    SEEN.clear()
    size = 5 * 1024 * 1024 + 7
    form = aiohttp.FormData()
    form.add_field("file", _payload(size), filename="big.bin",
                   content_type="application/octet-stream")
    resp = await uploads.post("/keep", data=form)
    assert resp.status == 200, await resp.text()
    body = await resp.json()
    assert body["size"] == body["read"] == size and body["same"] is True
    assert body["head"] == "0123"
    assert body["on_disk"] is True
    assert body["in_memory"] <= WRITE_BUFFER
    # the request is over: its temp file is closed (and, being unnamed, gone)
    (upload,) = SEEN
    assert upload._file is None
    assert _open_files(tmp_path / "uploads") == 0
    assert list((tmp_path / "uploads").iterdir()) == []


async def test_a_small_file_part_stays_in_memory(uploads: TestClient) -> None:
    form = aiohttp.FormData()
    form.add_field("file", _payload(1000), filename="small.bin")
    body = await (await uploads.post("/keep", data=form)).json()
    assert body["size"] == 1000 and body["same"] is True
    assert body["on_disk"] is False and 1000 <= SPOOL_BYTES


async def test_the_whole_body_is_bounded(uploads: TestClient) -> None:
    form = aiohttp.FormData()
    form.add_field("file", _payload(9 * 1024 * 1024), filename="huge.bin")
    resp = await uploads.post("/keep", data=form)
    assert resp.status == 413
    assert (await resp.json())["code"] == "too_large"


def _multipart(part_headers: bytes, boundary: str = "XyZ") -> bytes:
    return (
        f"--{boundary}\r\n".encode() + part_headers + b"\r\n\r\nvalue\r\n"
        + f"--{boundary}--\r\n".encode()
    )


@pytest.mark.parametrize("ctype", [
    "multipart/form-data",
    "multipart/form-data; charset=utf-8",
    "multipart/form-data; boundary=",
    "multipart/mixed",
])
async def test_multipart_without_a_boundary_is_a_400(uploads: TestClient, ctype: str) -> None:
    resp = await uploads.post("/echo", data=_multipart(b'Content-Disposition: form-data; '
                                                       b'name="a"'),
                              headers={"Content-Type": ctype})
    assert resp.status == 400, await resp.text()
    body = await resp.json()
    assert body["code"] == "bad_request"


@pytest.mark.parametrize("header", [
    b'Content-Disposition: form-data; name="a\x01b"',
    b'Content-Disposition: form-data; name="a"\r\nContent-Type: text/pl\x00ain',
    b'Content-Disposition: form-data; name="f"; filename="x\x07.txt"',
    b'Content-Disp\x01osition: form-data; name="a"',
    b'Content-Disposition: form-data; name="a"\r\nX-Other: \x1b[31m',
])
async def test_control_bytes_in_a_part_header_are_a_400(
    uploads: TestClient, header: bytes
) -> None:
    resp = await uploads.post("/echo", data=_multipart(header),
                              headers={"Content-Type": "multipart/form-data; boundary=XyZ"})
    assert resp.status == 400, await resp.text()
    assert (await resp.json())["code"] == "bad_request"


async def test_a_plain_multipart_field_still_reads(uploads: TestClient) -> None:
    resp = await uploads.post("/echo", data=_multipart(b'Content-Disposition: form-data; '
                                                       b'name="a"'),
                              headers={"Content-Type": "multipart/form-data; boundary=XyZ"})
    assert resp.status == 200
    assert await resp.json() == {"a": "value"}


# --- JSON bodies with a base64 data URI attachment (incoming webhooks) --------------------------


class _Content:
    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    async def iter_any(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece


class _Request(dict[Any, Any]):
    """What read_json_spooling_data_uris uses of a request: its body in given pieces."""

    def __init__(self, body: bytes, sizes: list[int], directory: Path,
                 client_max_size: int = 1024 * 1024) -> None:
        super().__init__()
        pieces, at, n = [], 0, 0
        while at < len(body):
            size = sizes[n % len(sizes)]
            pieces.append(body[at:at + size])
            at, n = at + size, n + 1
        self.content = _Content(pieces)
        self.client_max_size = client_max_size
        self[UPLOAD_DIR_KEY] = directory


async def _spooled(body: bytes, sizes: list[int], directory: Path, limit: int = 10**8,
                   client_max_size: int = 1024 * 1024) -> dict[str, Any]:
    request = cast(web.Request, _Request(body, sizes, directory, client_max_size))
    return await read_json_spooling_data_uris(request, limit)


def _data_uri_body(data: bytes, *, escape: bool = False, key: str = "attachment") -> bytes:
    encoded = base64.b64encode(data).decode()
    if escape:  # as some JSON encoders write it: slashes escaped, line breaks every 76
        encoded = "\\n".join(encoded[i:i + 76] for i in range(0, len(encoded), 76))
        encoded = encoded.replace("/", "\\/")
    return (f'{{"message": {{"body": "Log \\"x\\" attached", "{key}": '
            f'"data:application/pdf;base64,{encoded}", "n": [1, "data:x"]}}}}').encode()


@pytest.mark.parametrize("sizes", [[1], [3, 1, 7], [4096], [10**9]],
                         ids=["bytes", "odd", "4k", "whole"])
@pytest.mark.parametrize("escape", [False, True], ids=["plain", "escaped"])
async def test_a_data_uri_is_decoded_as_it_arrives(
    sizes: list[int], escape: bool, tmp_path: Path
) -> None:
    data = os.urandom(3000 if sizes[0] < 100 else 700_001)
    params = await _spooled(_data_uri_body(data, escape=escape), sizes, tmp_path)
    message = params["message"]
    upload = message["attachment"]
    assert isinstance(upload, UploadedFile), message
    assert (upload.filename, upload.content_type) == ("attachment.pdf", "application/pdf")
    assert await upload.read() == data and upload.size == len(data)
    assert (upload._file is not None) == (len(data) > SPOOL_BYTES)
    # the rest of the body as it was
    assert message["body"] == 'Log "x" attached' and message["n"] == [1, "data:x"]
    upload.close()


async def test_only_an_attachment_is_spooled(tmp_path: Path) -> None:
    encoded = base64.b64encode(b"hello").decode()
    body = (f'{{"message": {{"body": "data:text/plain;base64,{encoded}", '
            f'"attachment": "data:text/plain,plain", "x": {{"attachment": "not a uri"}}}}}}')
    params = await _spooled(body.encode(), [5], tmp_path)
    assert params["message"] == {"body": f"data:text/plain;base64,{encoded}",
                                 "attachment": "data:text/plain,plain",
                                 "x": {"attachment": "not a uri"}}
    unwrapped = await _spooled(f'{{"message[attachment]": "data:text/plain;base64,{encoded}"}}'
                               .encode(), [2], tmp_path)
    assert await unwrapped["message[attachment]"].read() == b"hello"


@pytest.mark.parametrize(("payload", "reason"), [
    ("QUJD@@@@", "is not valid base64"), ("QQ==QUJD", "is not valid base64"),
    ("QUJ", "is not valid base64"), ("QU\\u0042D", "is not valid base64"), ("", "is empty"),
])
async def test_a_data_uri_that_is_not_base64(payload: str, reason: str, tmp_path: Path) -> None:
    body = f'{{"attachment": "data:image/png;base64,{payload}", "body": "x"}}'.encode()
    params = await _spooled(body, [3], tmp_path)
    assert isinstance(params["attachment"], InvalidDataUri)
    assert params["attachment"].reason == reason and params["body"] == "x"


async def test_a_data_uri_over_the_limit_is_a_413_as_soon_as_it_is_seen(tmp_path: Path) -> None:
    body = _data_uri_body(os.urandom(SPOOL_BYTES + 50_000))
    request = _Request(body + b"this is never read as JSON", [4096], tmp_path)
    with pytest.raises(TooLarge):
        await read_json_spooling_data_uris(cast(web.Request, request), SPOOL_BYTES + 40_000)
    (upload,) = request[UPLOADS_KEY]  # its temp file is the request's: closed at its end
    assert _open_files(tmp_path) == 1
    close_uploads(cast(web.Request, request))
    assert _open_files(tmp_path) == 0 and upload.fileno() is None
    # and what is not spooled counts against client_max_size
    with pytest.raises(TooLarge):
        await _spooled(b'{"body": "' + b"x" * 5000 + b'"}', [100], tmp_path,
                       client_max_size=4000)


async def test_a_data_uri_body_is_never_held_whole(aiohttp_client: Any, tmp_path: Path) -> None:
    """12 MB through a real request, sent as it is made: the encoded text (16 MB, past
    client_max_size) is never read whole, nor the decoded bytes; Python's allocations (the
    server's and this client's) peak far below either."""

    async def keep_uri(request: web.Request) -> web.Response:
        request[DATA_URI_LIMIT_KEY] = 13 * 1024 * 1024
        upload = (await read_params(request))["attachment"]
        assert isinstance(upload, UploadedFile)
        digest = hashlib.sha256()
        async for chunk in upload.chunks():
            digest.update(chunk)
        return json_response({"size": upload.size, "on_disk": upload._file is not None,
                              "sha256": digest.hexdigest()})

    app = web.Application(middlewares=[errors_middleware, uploads_middleware(tmp_path)],
                          client_max_size=13 * 1024 * 1024)
    app.router.add_post("/keep_uri", keep_uri)
    client = await aiohttp_client(app)
    block = os.urandom(3 * 64 * 1024)
    blocks = 64
    sent = hashlib.sha256()

    async def body() -> AsyncIterator[bytes]:
        yield b'{"body": "x", "attachment": "data:application/octet-stream;base64,'
        for n in range(blocks):
            piece = n.to_bytes(4, "big") + block[4:]
            sent.update(piece)
            yield base64.b64encode(piece)
        yield b'"}'

    tracemalloc.start()
    try:
        resp = await client.post("/keep_uri", data=body(),
                                 headers={"Content-Type": "application/json"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert resp.status == 200, await resp.text()
    assert await resp.json() == {"size": blocks * len(block), "on_disk": True,
                                 "sha256": sent.hexdigest()}
    assert peak < 6 * 1024 * 1024, peak  # about 4 MB: socket buffers and a write buffer


async def test_a_request_without_a_body_passes_through_with_no_layer_of_its_own(
    tmp_path: Path,
) -> None:
    """A GET (no Content-Length, no chunked body) can spool nothing: the middleware hands back
    the handler's own awaitable; a request with a body is wrapped, and its uploads closed."""
    middleware = uploads_middleware(tmp_path)
    answer = web.Response()
    calls: list[web.Request] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        calls.append(request)
        return answer

    bodiless = make_mocked_request("GET", "/", payload=EMPTY_PAYLOAD)
    own = handler(bodiless)
    passed = middleware(bodiless, lambda request: own)
    assert passed is own
    assert await passed is answer
    assert UPLOAD_DIR_KEY not in bodiless

    # any payload but aiohttp's empty one: a body exists
    with_body = make_mocked_request("POST", "/", payload=mock.Mock())
    upload = UploadedFile.from_bytes("a.txt", "text/plain", b"x")
    with_body[UPLOADS_KEY] = [upload]
    assert len(upload._memory) == 1
    assert await middleware(with_body, handler) is answer
    assert with_body[UPLOAD_DIR_KEY] == tmp_path
    assert len(upload._memory) == 0  # closed when the request ended
