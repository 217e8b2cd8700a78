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

log = logging.getLogger("commons.after_commit")

Step = Callable[[], Awaitable[None]]


class AfterCommit:
    def __init__(self) -> None:
        self.steps: list[Step] = []

    def add(self, step: Step) -> None:
        self.steps.append(step)

    async def run(self) -> None:
        steps, self.steps = self.steps, []
        for step in steps:
            try:
                await step()
            except Exception:
                log.exception("after-commit step %r failed", step)
