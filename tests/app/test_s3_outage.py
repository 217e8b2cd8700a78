"""S3 down during an upload: the client gets 503 `unavailable` with Retry-After (never a 500),
and nothing is orphaned: no attachment row, no object, and no multipart upload left pending
once S3 is back (its abort is retried until S3 answers).

The S3 server killed here is a private SeaweedFS of this module, never the shared one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient

from app.config import S3Settings, Settings
from app.main import create_app
from app.passwords import Passwords
from app.resources import BLOBS, POOL
from storage.blobs import PART_SIZE, S3BlobStore
from tests.servers import SeaweedProcess, start_private_seaweedfs
from tests.support import Member, World

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def private_s3() -> Iterator[SeaweedProcess]:
    server = start_private_seaweedfs()
    yield server
    server.stop()


@pytest.fixture
async def app_on_s3(
    aiohttp_client: Any, settings: Settings, private_s3: SeaweedProcess
) -> tuple[TestClient, World]:
    if not private_s3.running:
        await asyncio.to_thread(private_s3.start)
    server = private_s3.server
    s3 = S3Settings(endpoint_url=server.endpoint_url, bucket=server.bucket,
                    access_key_id=server.access_key, secret_access_key=server.secret_key,
                    region=server.region)
    app = create_app(dataclasses.replace(settings, s3=s3, redis_url=None))
    client: TestClient = await aiohttp_client(app)
    return client, World(app[POOL], Passwords(settings.argon2), client)


async def upload(member: Member, body: Any, filename: str = "file.bin") -> Any:
    form = aiohttp.FormData()
    form.add_field("attachment", body, filename=filename,
                   content_type="application/octet-stream")
    return await member.api.post("/api/attachments", data=form)


async def nothing_orphaned(world: World, store: S3BlobStore) -> None:
    assert await world.pool.fetchval("SELECT count(*) FROM attachments") == 0
    await asyncio.wait_for(store.wait_for_aborts(), 60)
    assert await store.pending_uploads() == []
    assert await store.list_keys("") == []


def assert_unavailable(resp: Any) -> None:
    assert resp.status == 503, resp.text
    assert resp.json["code"] == "unavailable", resp.json
    assert int(resp.headers["Retry-After"]) > 0


async def test_s3_down_before_an_upload(
    app_on_s3: tuple[TestClient, World], private_s3: SeaweedProcess
) -> None:
    client, world = app_on_s3
    store = client.app[BLOBS]
    assert isinstance(store, S3BlobStore)
    ann = await world.community("Acme")
    await asyncio.to_thread(private_s3.kill)
    resp = await upload(ann, b"hello " * 1000)
    assert_unavailable(resp)
    assert await world.pool.fetchval("SELECT count(*) FROM attachments") == 0

    await asyncio.to_thread(private_s3.start)
    again = await upload(ann, b"hello " * 1000)  # no app restart needed
    assert again.status == 201, again.text
    (key,) = await store.list_keys("")
    await store.delete([key])
    await world.pool.execute("DELETE FROM attachments")


async def test_s3_killed_in_the_middle_of_an_upload(
    app_on_s3: tuple[TestClient, World], private_s3: SeaweedProcess
) -> None:
    client, world = app_on_s3
    store = client.app[BLOBS]
    assert isinstance(store, S3BlobStore)
    ann = await world.community("Acme")
    killed = threading.Event()

    async def body() -> AsyncIterator[bytes]:
        # past one part, so that a multipart upload is under way, then S3 dies
        sent = 0
        while sent < 3 * PART_SIZE:
            yield os.urandom(MiB)
            sent += MiB
            if sent == PART_SIZE + 2 * MiB:
                await asyncio.sleep(0.5)  # the first part reaches S3
                await asyncio.to_thread(private_s3.kill)
                killed.set()

    try:
        resp = await upload(ann, body())
    except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError):
        resp = None  # the server answered before the body was sent: check it on a new request
    assert killed.is_set()
    if resp is not None:
        assert_unavailable(resp)
    assert await world.pool.fetchval("SELECT count(*) FROM attachments") == 0

    await asyncio.to_thread(private_s3.start)
    await nothing_orphaned(world, store)
