"""`commons worker`: background jobs (push delivery, thumbnails, event pruning)."""

from __future__ import annotations

import asyncio
import logging

from app.config import Settings

log = logging.getLogger("commons.worker")


async def run_worker(settings: Settings, *, once: bool = False) -> None:
    """Runs the registered periodic jobs until stopped (or one round with once=True)."""
    from storage.db import create_pool

    assert settings.database_url
    pool = await create_pool(settings.database_url, size=4)
    try:
        while True:
            for job in JOBS:
                try:
                    await job(pool, settings)
                except Exception:
                    log.exception("job %s failed", job.__name__)
            if once:
                return
            await asyncio.sleep(5)
    finally:
        await pool.close()


JOBS: list = []
