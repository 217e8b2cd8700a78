"""Fixtures shared by the app tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers import RedisProcess, start_redis_on_free_port


@pytest.fixture
def private_redis() -> Iterator[RedisProcess]:
    """A Redis of the test's own, which it may stop, kill or freeze."""
    server = start_redis_on_free_port()
    yield server
    server.close()
