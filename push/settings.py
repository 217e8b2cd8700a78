"""The push worker's settings (PUSH_* in the README), apart from the worker so that reading
the configuration does not import the providers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkerSettings:
    """PUSH_* settings (README)."""

    batch_size: int = 100
    concurrency: int = 32
    lease: float = 60.0
    """Seconds a claimed job stays invisible to other workers while it is being sent (longer
    than a send can take: requests time out after 15 s)."""
    backoff_min: float = 1.0
    backoff_max: float = 3600.0
    give_up: float = 24 * 3600.0
    idle_poll: float = 5.0
    badge_interval: float = 5.0
    """At most one silent badge update per device per this many seconds."""
    fanout_chunk: int = 1000
    """Members of a group fanned out per transaction for a chat message (not a PUSH_*
    setting: it bounds a transaction's length, nothing an operator needs to tune)."""
