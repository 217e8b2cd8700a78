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


async def test_commons_worker_stops_cleanly_on_sigterm(
    client: TestClient, settings: Settings
) -> None:
    """A real `commons worker`: SIGTERM ends it with exit 0 and its heartbeat row gone."""
    import os
    import signal
    import sys

    from tests.servers import REPO_ROOT

    env = {k: v for k, v in os.environ.items() if not k.startswith(("S3_", "AWS_"))}
    env.update({"DATABASE_URL": settings.database_url or "", "REDIS_URL": "",
                "COMMONS_DATA_DIR": str(settings.data_dir)})
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", "worker", cwd=REPO_ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    pool = client.app[POOL]
    try:
        async with asyncio.timeout(30):
            while not await heartbeats.recent(pool, timedelta(minutes=1)):  # noqa: ASYNC110
                await asyncio.sleep(0.1)
        (beat,) = await heartbeats.recent(pool, timedelta(minutes=1))
        assert beat["pid"] == proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, out.decode()
    assert "Traceback" not in out.decode()
    assert await heartbeats.recent(pool, timedelta(minutes=1)) == []
