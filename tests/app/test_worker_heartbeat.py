"""`commons worker` says it is alive: a heartbeat row while it runs (with its push counters),
gone when it stops; /readyz and /metrics read it."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from aiohttp.test_utils import TestClient

from app import worker
from app.config import Settings
from app.resources import POOL
from storage import heartbeats


async def test_the_worker_beats_while_it_runs_and_says_goodbye(
    client: TestClient, settings: Settings
) -> None:
    pool = client.app[POOL]
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run_worker(settings, stop=stop))
    try:
        async with asyncio.timeout(20):
            while not await heartbeats.recent(pool, timedelta(minutes=1)):  # noqa: ASYNC110
                await asyncio.sleep(0.1)
        (beat,) = await heartbeats.recent(pool, timedelta(minutes=1))
        assert beat["worker_id"] == worker.worker_id()
        assert beat["stats"] == {"sent": 0, "failed": 0, "retried": 0, "pruned": 0}
        ready = await (await client.get("/readyz")).json()
        assert ready["checks"]["worker"]["alive"] == 1
        assert "commons_worker_alive 1.0" in await (await client.get("/metrics")).text()
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
    assert await heartbeats.recent(pool, timedelta(minutes=1)) == []
