"""File parts of multipart bodies: spooled to disk, not held in memory, and closed when the
request ends (issue 8, defect 6); malformed multipart bodies are 400s (defect 7)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from app.middleware import errors_middleware
from app.params import UploadedFile, read_params
from app.responses import json_response
from app.uploads import SPOOL_BYTES, WRITE_BUFFER, uploads_middleware

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
