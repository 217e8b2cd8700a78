"""The community of a request's host: cached, and looked up once for the requests that miss
the cache together."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app import tenancy
from app.tenancy import CommunityResolver


async def test_requests_that_miss_together_share_one_lookup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    acme = object()
    calls: list[str] = []

    async def for_host(pool: Any, host: str) -> tuple[Any, bool] | None:
        calls.append(host)
        await asyncio.sleep(0.01)
        return (acme, True) if host == "acme.example" else None

    monkeypatch.setattr(tenancy.communities, "for_host", for_host)
    resolver = CommunityResolver(pool=None)  # type: ignore[arg-type]
    found = await asyncio.gather(
        *(resolver.for_host("ACME.example") for _ in range(50)),
        *(resolver.for_host("other.example") for _ in range(50)),
    )
    assert found == [acme] * 50 + [None] * 50
    assert sorted(calls) == ["acme.example", "other.example"]
    # then the exact match is cached; the unknown host is asked again
    assert await resolver.for_host("acme.example") is acme
    assert await resolver.for_host("other.example") is None
    assert sorted(calls) == ["acme.example", "other.example", "other.example"]

