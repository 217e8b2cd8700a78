"""app.actions.attachments.put_upload: a spooled upload goes into a local blob store without a
copy (the spool file is given a name), into S3 streamed, and the limit holds either way."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.actions.attachments import put_upload
from app.errors import TooLarge
from app.uploads import SPOOL_BYTES, UploadedFile
from storage.blobs import BlobStore, LocalBlobStore, open_blob_store
from tests.s3_buckets import fresh_bucket
from tests.storage.test_blobs import leftovers, read_all


@pytest.fixture(params=["local", "s3"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BlobStore]:
    if request.param == "local":
        async with open_blob_store(None, tmp_path) as blobs:
            yield blobs
        return
    with fresh_bucket() as s3:
        async with open_blob_store(s3, tmp_path) as blobs:
            yield blobs


async def spooled(data: bytes, directory: Path) -> UploadedFile:
    upload = UploadedFile("big.bin", "application/octet-stream")
    for start in range(0, len(data), 100_000):
        await upload._write(data[start:start + 100_000], directory)
    await upload._finish()
    return upload


async def test_a_spooled_upload_is_stored_whole(store: BlobStore, tmp_path: Path) -> None:
    data = os.urandom(3 * SPOOL_BYTES + 5)
    upload = await spooled(data, tmp_path / "uploads")
    fd = upload.fileno()
    assert fd is not None  # on disk
    size = await put_upload(store, "c1/a/big/original", upload,
                            content_type="application/octet-stream", max_bytes=len(data))
    assert size == len(data)
    if isinstance(store, LocalBlobStore):
        # the same file, not a copy of it
        assert store.path_of("c1/a/big/original").stat().st_ino == os.fstat(fd).st_ino
    upload.close()  # the request ends: the blob stays
    assert await read_all(store, "c1/a/big/original") == data
    assert await leftovers(store) == []


async def test_a_small_upload_in_memory_is_streamed(store: BlobStore, tmp_path: Path) -> None:
    upload = await spooled(b"small", tmp_path / "uploads")
    assert upload.fileno() is None
    assert await put_upload(store, "c1/a/small/original", upload,
                            content_type="text/plain", max_bytes=100) == 5
    assert await read_all(store, "c1/a/small/original") == b"small"


async def test_over_the_limit_nothing_is_stored(store: BlobStore, tmp_path: Path) -> None:
    upload = await spooled(os.urandom(SPOOL_BYTES + 10), tmp_path / "uploads")
    with pytest.raises(TooLarge):
        await put_upload(store, "c1/a/no/original", upload, content_type="x/y",
                         max_bytes=SPOOL_BYTES)
    assert await store.list_keys() == [] and await leftovers(store) == []
