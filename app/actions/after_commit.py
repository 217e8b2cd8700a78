"""Steps an action runs only once its transaction has committed (publishing events, enqueuing
notifications and push jobs, deleting blobs).

    after = AfterCommit()
    async with transaction(pool) as conn:
        ...
        after.add(lambda: publish(...))
    await after.run()

A step that fails is logged and does not undo the committed change nor skip the next steps.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncpg

from realtime.hub import Hub

log = logging.getLogger("commons.after_commit")

Step = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Outbox:
    """What after-commit work that writes and publishes needs (the feed hooks: notifications,
    their events and push jobs): the pool for a transaction of its own, and the hub (None:
    the events are stored, and sockets get them when their hub next reads PostgreSQL)."""

    pool: asyncpg.Pool
    hub: Hub | None = None


class AfterCommit:
    def __init__(self, outbox: Outbox | None = None) -> None:
        self.steps: list[Step] = []
        # None: the hooks that need it (feed_hooks) do nothing, e.g. for a caller that has
        # no hub to publish with yet
        self.outbox = outbox

    def add(self, step: Step) -> None:
        self.steps.append(step)

    async def run(self) -> None:
        steps, self.steps = self.steps, []
        for step in steps:
            try:
                await step()
            except Exception:
                log.exception("after-commit step %r failed", step)
