"""Blob stores: the same behaviour from the local-disk and the S3 driver (a real S3 server),
streaming in both directions, the size limit, and cleaning up after a failed upload."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from app.config import S3Settings
from storage.blobs import (
    BlobNotFound,
    BlobStore,
    BlobTooLarge,
    LocalBlobStore,
    S3BlobStore,
    open_blob_store,
)

MiB = 1024 * 1024


@pytest.fixture(params=["local", "s3"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BlobStore]:
    s3 = request.getfixturevalue("s3_settings") if request.param == "s3" else None
    async with open_blob_store(s3, tmp_path) as blobs:
        yield blobs


async def chunks_of(data: bytes, size: int = 64 * 1024) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def leftovers(blobs: BlobStore) -> list[str]:
    """Unfinished uploads: aborted multipart uploads must not linger, nor temp files."""
    if isinstance(blobs, S3BlobStore):
        return await blobs.pending_uploads()
    assert isinstance(blobs, LocalBlobStore)
    return blobs.temp_files()


async def read_all(blobs: BlobStore, key: str) -> bytes:
    async with blobs.open(key) as blob:
        data = b"".join([chunk async for chunk in blob.chunks])
        assert blob.size == len(data)
        return data


async def test_open_blob_store_picks_the_driver(tmp_path: Path, s3_settings: S3Settings) -> None:
    async with open_blob_store(None, tmp_path) as local:
        assert isinstance(local, LocalBlobStore)
        assert local.root == tmp_path / "blobs"
    async with open_blob_store(s3_settings, tmp_path) as s3:
        assert isinstance(s3, S3BlobStore)
        assert s3.bucket == s3_settings.bucket


async def test_put_open_read_list_delete(store: BlobStore) -> None:
    assert await store.put_stream("c1/a/x/original", chunks_of(b"hello world", 3)) == 11
    await store.put_bytes("c1/a/x/stream.jpg", b"thumb", content_type="image/jpeg")
    await store.put_bytes("c2/a/y/original", b"other")

    assert await read_all(store, "c1/a/x/original") == b"hello world"
    assert await store.read("c1/a/x/stream.jpg") == b"thumb"
    assert await store.list_keys("c1/") == ["c1/a/x/original", "c1/a/x/stream.jpg"]
    assert await store.list_keys() == ["c1/a/x/original", "c1/a/x/stream.jpg", "c2/a/y/original"]

    await store.delete(["c1/a/x/original", "c1/a/x/stream.jpg", "c1/never/was"])
    assert await store.list_keys("c1/") == []
    with pytest.raises(BlobNotFound):
        await store.read("c1/a/x/original")
    with pytest.raises(BlobNotFound):
        async with store.open("c9/missing"):
            pass
    assert await store.read("c2/a/y/original") == b"other"


async def test_overwriting_a_key_replaces_it(store: BlobStore) -> None:
    await store.put_bytes("k/one", b"first")
    await store.put_bytes("k/one", b"second")
    assert await store.read("k/one") == b"second"


async def test_empty_blob(store: BlobStore) -> None:
    assert await store.put_stream("k/empty", chunks_of(b"")) == 0
    assert await read_all(store, "k/empty") == b""


async def test_read_refuses_a_blob_over_max_bytes(store: BlobStore) -> None:
    await store.put_bytes("k/big", b"x" * 1000)
    with pytest.raises(BlobTooLarge):
        await store.read("k/big", max_bytes=999)
    assert len(await store.read("k/big", max_bytes=1000)) == 1000


async def test_streams_a_file_larger_than_a_part(store: BlobStore) -> None:
    data = os.urandom(19 * MiB + 123)  # two full 8 MiB parts and a short last one on S3
    size = await store.put_stream("big/original", chunks_of(data, 256 * 1024))
    assert size == len(data)
    assert hashlib.sha256(await read_all(store, "big/original")).digest() == \
        hashlib.sha256(data).digest()
    assert await leftovers(store) == []
    if isinstance(store, S3BlobStore):
        head = await store.client.head_object(Bucket=store.bucket, Key="big/original")
        assert head["ETag"].strip('"').endswith("-3")  # it went up as a 3-part upload


async def test_over_max_bytes_stores_nothing(store: BlobStore) -> None:
    data = b"z" * (9 * MiB)  # past one S3 part: a multipart upload was begun, then aborted
    with pytest.raises(BlobTooLarge):
        await store.put_stream("big/too-large", chunks_of(data, MiB), max_bytes=9 * MiB - 1)
    assert await store.list_keys() == []
    assert await leftovers(store) == []
    # exactly the limit is fine
    assert await store.put_stream("big/fits", chunks_of(data, MiB), max_bytes=9 * MiB) == 9 * MiB


async def test_a_failing_upload_stores_nothing(store: BlobStore) -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield b"a" * (9 * MiB)
        raise ConnectionResetError("client went away")

    with pytest.raises(ConnectionResetError):
        await store.put_stream("k/broken", broken())
    assert await store.list_keys() == []
    assert await leftovers(store) == []


@pytest.mark.parametrize("key", ["../etc/passwd", "/abs", "a//b", "a/../b", "a/./b", "", "a b"])
async def test_keys_are_checked(store: BlobStore, key: str) -> None:
    with pytest.raises(ValueError):
        await store.put_bytes(key, b"x")


async def test_download_url(store: BlobStore) -> None:
    await store.put_bytes("k/report", b"%PDF-1.4 ...", content_type="application/pdf")
    url = await store.download_url(
        "k/report", filename="12-Q3 report é.pdf", content_type="application/pdf", inline=False
    )
    if isinstance(store, LocalBlobStore):
        assert url is None  # the application serves local files itself
        return
    assert url is not None
    async with aiohttp.ClientSession() as http, http.get(url) as resp:  # no credentials
        assert resp.status == 200
        assert await resp.read() == b"%PDF-1.4 ..."
        assert resp.headers["Content-Type"] == "application/pdf"
        assert resp.headers["Content-Disposition"] == (
            "attachment; filename=\"12-Q3 report _.pdf\"; "
            "filename*=UTF-8''12-Q3%20report%20%C3%A9.pdf"
        )


async def test_local_store_writes_through_a_temp_file(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    seen: list[list[str]] = []

    async def watched() -> AsyncIterator[bytes]:
        yield b"a" * (2 * MiB)
        # mid-upload: the bytes are in a temp file, nothing under the final name yet
        seen.append(store.temp_files())
        seen.append(await store.list_keys())
        yield b"b"

    await store.put_stream("c1/x/original", watched())
    assert len(seen[0]) == 1 and seen[1] == []
    assert (tmp_path / "blobs" / "c1" / "x" / "original").stat().st_size == 2 * MiB + 1
    assert store.temp_files() == []


async def test_local_store_removes_stale_temp_files_at_start(tmp_path: Path) -> None:
    tmp = tmp_path / "blobs" / ".tmp"
    tmp.mkdir(parents=True)
    (tmp / "old.part").write_bytes(b"x")
    (tmp / "new.part").write_bytes(b"y")
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(tmp / "old.part", (two_days_ago, two_days_ago))
    async with open_blob_store(None, tmp_path) as store:
        assert isinstance(store, LocalBlobStore)
        assert store.temp_files() == ["new.part"]  # another process may still be writing it
