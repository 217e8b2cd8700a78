"""A fresh S3 bucket per test on the real S3 server of tests.servers.ensure_s3 (SeaweedFS), so
that a test can assert what a bucket holds. Used by the `s3_settings` fixtures of
tests/storage/conftest.py and tests/app/views/test_attachments.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from app.config import S3Settings
from tests.servers import ensure_s3, s3_client


@contextmanager
def fresh_bucket() -> Iterator[S3Settings]:
    """S3Settings for a new empty bucket, emptied and removed afterwards."""
    server = ensure_s3()
    bucket = f"test-{uuid.uuid4().hex[:16]}"
    client = s3_client(server)
    try:
        client.create_bucket(Bucket=bucket)
        yield S3Settings(
            endpoint_url=server.endpoint_url,
            bucket=bucket,
            access_key_id=server.access_key,
            secret_access_key=server.secret_key,
            region=server.region,
        )
        for upload in client.list_multipart_uploads(Bucket=bucket).get("Uploads", ()):
            client.abort_multipart_upload(
                Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"]
            )
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", ()):
                client.delete_object(Bucket=bucket, Key=item["Key"])
        client.delete_bucket(Bucket=bucket)
    finally:
        client.close()
