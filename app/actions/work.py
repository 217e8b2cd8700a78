"""The unit of work: the one way a write action touches the database.

    async with work(pool, hub, viewer.community_id) as w:
        row = await access_message(w.conn, viewer, message_id)   # rules, reads, writes
        ...
        w.emit(*await notifications.notify_users(w.conn, ...))   # notifications, push jobs
        w.after(lambda: delete_blobs(blobs, files))              # only once committed

One transaction holds the change and everything it causes: notification rows, push jobs
(visible to `commons worker` at commit) and the realtime events, stored last
(`storage.events.stage_events`) and numbered by the COMMIT itself, which is the only moment the
community's event counter is locked (migration 0019). A crash loses all of it or none of it,
never half (design.md "One request, end to end"; Zulip's do_send_messages does the same under
one transaction.atomic).

After commit, in this order: the events are published to `hub` (None: they are only stored, and
sockets catch up from PostgreSQL), then the `after` steps run (deleting blobs, forgetting cached
credentials). A failing step is logged and never undoes the change, nor skips the next step.
An exception inside the block rolls everything back: nothing is stored, published or run.

The same COMMIT bumps the content versions behind the polled lists' ETags (storage/versions.py,
docs/polling.md): the community's content version, unless the action said its change is seen
only by some users (`w.private_to(viewer.id)`: their own versions instead). Forgetting to say
so only costs 304s, never correctness.

A write with no event, no after-commit step and one statement needs none of that machinery:
`write_one` runs it in autocommit (one statement is atomic by itself), its content versions
staged by the same statement, so the same trigger bumps them at its implicit commit. No BEGIN,
no COMMIT, and it runs on whatever connection the caller already holds.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from typing import Protocol

import asyncpg

from realtime.events import Event, NewEvent
from storage import events as event_store
from storage.events import Statement, TailInsert
from storage.versions import COMMUNITY

log = logging.getLogger("commons.work")

Step = Callable[[], Awaitable[None]]
Emitted = NewEvent | TailInsert
"""What an action hands its unit of work to write last: events, and inserts that ride on the
same statement (push jobs)."""


class Publisher(Protocol):
    """What a unit of work publishes with: realtime.hub.Hub (tests pass their own)."""

    async def publish(self, events: Sequence[Event]) -> None: ...


class _RollBack(Exception):
    """Raised at the end of a unit of work that `roll_back()` was called on."""


class Work:
    """What an action sees of its unit of work (see the module's docstring)."""

    def __init__(self, conn: asyncpg.Connection, community_id: int) -> None:
        self.conn = conn
        self.community_id = community_id
        self.events: list[NewEvent] = []
        self.tail: list[TailInsert] = []
        self.steps: list[Step] = []
        self.published: list[Event] = []
        """The stored events with their ids, once the unit of work has committed."""
        self.rolled_back = False
        self._closed = False
        self._public = False
        self._private: set[int] | None = None

    def private_to(self, *user_ids: int) -> None:
        """Say that what this unit changes is seen by these users only (their read state,
        bookmarks...): their versions are bumped instead of the community's content version.
        With no user: it changes nothing any polled list shows. Only for changes that no other
        viewer could see in any list with an ETag (docs/polling.md)."""
        self._check_open()
        self._private = (self._private or set()) | set(user_ids)

    def public(self) -> None:
        """Bump the community's content version whatever `private_to` said (a helper doing a
        change every viewer may see inside an action that is otherwise private)."""
        self._check_open()
        self._public = True

    def versions(self) -> list[int]:
        """The content_versions rows this unit bumps at its commit."""
        return _versions(self._private, public=self._public)

    def emit(self, *items: Emitted) -> None:
        """Queue events (stored last in the transaction, in emit order, numbered at commit,
        published after it) and tail inserts (push jobs: push.jobs.jobs), written by the same
        last statement."""
        self._check_open()
        for item in items:
            if isinstance(item, TailInsert):
                self.tail.append(item)
            else:
                self.events.append(item)

    def after(self, step: Step) -> None:
        """Run `step` once the change is committed (and its events published)."""
        self._check_open()
        self.steps.append(step)

    def roll_back(self) -> None:
        """Undo everything at the end of the block instead of committing (a dry run): nothing
        is stored, published or run; the block's own result stands."""
        self._check_open()
        self.rolled_back = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this unit of work is already finished")


def _versions(private: Collection[int] | None, *, public: bool = False) -> list[int]:
    if private is None or public:
        return [COMMUNITY, *sorted(set(private or ()))]
    return sorted(set(private))


async def write_one(
    conn: asyncpg.Connection | asyncpg.Pool,
    community_id: int,
    statement: Statement,
    *,
    private_to: Collection[int] | None = None,
) -> list[asyncpg.Record]:
    """A unit of work that is one statement with no event (and nothing to run after it): run
    in autocommit, it is atomic by itself, and the content versions it bumps are staged by the
    same statement (storage.events.staging_versions), bumped at its commit as `work()` bumps
    them. `private_to` says what `Work.private_to` says (None: the community's content
    version; no user: none). Its rows are the statement's. Outside a transaction on `conn`
    (inside one, it would be part of that transaction, committed or rolled back with it)."""
    in_transaction = getattr(conn, "is_in_transaction", None)  # a pool has none
    if in_transaction is not None and in_transaction():
        raise RuntimeError("write_one is a unit of work of its own: not inside a transaction")
    return await event_store.run_staging_versions(
        conn, community_id, statement, _versions(private_to))


@asynccontextmanager
async def work(
    pool: asyncpg.Pool, hub: Publisher | None, community_id: int
) -> AsyncIterator[Work]:
    """A unit of work in `community_id` (whose event sequence its events join)."""
    async with pool.acquire() as conn:
        w = Work(conn, community_id)
        ids = event_store.EventIds(conn)
        try:
            async with conn.transaction():
                yield w
                w._closed = True
                if w.rolled_back:
                    raise _RollBack
                await event_store.stage_events(
                    conn, community_id, w.events, ids, w.versions(), w.tail)
            w.published = ids.numbered()
        except _RollBack:
            return
        finally:
            w._closed = True
            ids.close()
    # Committed, and the connection is back in the pool.
    if hub is not None and w.published:
        try:
            await hub.publish(w.published)
        except Exception:  # stored: sockets catch up from PostgreSQL
            log.exception("publishing %d events failed", len(w.published))
    for step in w.steps:
        try:
            await step()
        except Exception:
            log.exception("after-commit step %r failed", step)
