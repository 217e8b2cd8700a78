"""The hub's own drop: an event that arrives ahead of a hole while the stream's reorder buffer is
full is not held (commons_hub_drops_total) but read back from PostgreSQL, so nothing is lost.
The other families are read through the app's /metrics in tests/app/test_metrics.py."""

from __future__ import annotations

from typing import Any

import asyncpg
from prometheus_client import REGISTRY

from tests.realtime.test_hub import Collector, attach, ev


def value(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def test_an_event_past_a_full_reorder_buffer_is_dropped_then_read_back(
    make_hub: Any, rt_pool: asyncpg.Pool, commit: Any
) -> None:
    hub = await make_hub("local", max_pending=1, gap_timeout=0.2)
    sub = Collector(1, ["c"])
    await attach(hub, sub)
    stored = [(await commit(None, 1, ev("c", n)))[0] for n in range(3)]
    drops, deliveries = value("commons_hub_drops_total"), value("commons_hub_deliveries_total")
    await hub.publish([stored[2]])  # held: 1 and 2 are missing
    await hub.publish([stored[1]])  # the buffer is full: dropped
    assert value("commons_hub_drops_total") - drops == 1
    assert await sub.wait_for(3) == [1, 2, 3]  # the catch-up read the hole from PostgreSQL
    assert value("commons_hub_drops_total") - drops == 1
    assert value("commons_hub_deliveries_total") - deliveries == 3


async def test_a_redis_hub_hearing_its_own_held_event_back_does_not_count_a_drop(
    make_hub: Any, rt_pool: asyncpg.Pool, commit: Any
) -> None:
    """A Redis hub feeds its own publish at once and hears it again from Redis: the second
    arrival of an event it already holds is neither held twice nor a drop."""
    hub = await make_hub("redis", max_pending=1, gap_timeout=0.5)
    sub = Collector(1, ["c"])
    await attach(hub, sub)
    stored = [(await commit(None, 1, ev("c", n)))[0] for n in range(2)]
    drops = value("commons_hub_drops_total")
    await hub.publish([stored[1]])  # held (1 is missing), and heard back from Redis
    assert await sub.wait_for(2) == [1, 2]  # the catch-up read 1 from PostgreSQL
    assert value("commons_hub_drops_total") - drops == 0
