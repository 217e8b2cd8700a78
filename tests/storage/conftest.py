"""Fixtures of the storage tests: an S3 bucket of the real test S3 server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.config import S3Settings
from tests.s3_buckets import fresh_bucket


@pytest.fixture
def s3_settings() -> Iterator[S3Settings]:
    """Settings of a new, empty bucket on the test S3 server (SeaweedFS), removed afterwards."""
    with fresh_bucket() as settings:
        yield settings
