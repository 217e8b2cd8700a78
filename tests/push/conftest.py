"""Fixtures shared by the push tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.push.fake_fcm import FakeFcm


@pytest.fixture
async def fcm(aiohttp_server: Callable[..., Any]) -> FakeFcm:
    """The FCM stand-in (and its OAuth token endpoint) on 127.0.0.1, over HTTP."""
    fake = FakeFcm()
    server = await aiohttp_server(fake.app(), host="127.0.0.1")
    fake.base_url = str(server.make_url("")).rstrip("/")
    return fake
