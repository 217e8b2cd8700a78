"""The durable realtime event log (table realtime_events, migration 0005).

Ids are per community and are handed out from realtime_event_counters, whose row lock is held
until the writing transaction commits. So within a community ids are gap-free and in commit
order: once id N is visible, every id below N is visible too. That is what lets a client resume
from `since=N`, and lets a hub notice a message Redis dropped (a hole in the ids) and fetch it
from here.

Two ways to store events:
- `stage_events` (what every action's unit of work does, app/actions/work.py): the events are
  staged without touching the counter and numbered INSIDE the COMMIT by a deferred trigger
  (migration 0019), which reports the first id in a NOTICE that `EventIds` collects. The
  counter is locked only for the trigger and the commit record, never across a round trip to
  the application (bench/event_counter.py measured what that round trip cost).
- `append_events`: numbered at once, the counter locked from this statement to the commit; for
  code that needs the ids inside its transaction (tests, tools).

Values cross the driver as text (`::text`, `::json` casts), so these functions behave the same
whatever json codecs the pool installs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import asyncpg
import orjson


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event before it is stored: `stage_events` or `append_events` gives it an id."""

    channel: str
    name: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Event:
    """A stored event: ids increase by one per community, in commit order."""

    id: int
    community_id: int
    channel: str
    name: str
    data: dict[str, Any]


def validate(event: NewEvent) -> None:
    """Channel and name travel in a newline-separated header; keep them single-line."""
    if not event.channel or "\n" in event.channel or "\n" in event.name or not event.name:
        raise ValueError(f"invalid realtime channel or event name: {event.channel!r}")


# One round trip: bump the counter (creating it on first use), then insert the batch with the
# ids just reserved. Runs as the last statement of the writing transaction.
APPEND_EVENTS = """
WITH counter AS (
    INSERT INTO realtime_event_counters AS c (community_id, last_id)
    VALUES ($1, cardinality($2::text[]))
    ON CONFLICT (community_id) DO UPDATE SET last_id = c.last_id + EXCLUDED.last_id
    RETURNING last_id
)
INSERT INTO realtime_events (community_id, id, channel, name, data)
SELECT $1, counter.last_id - cardinality($2::text[]) + e.ord, e.channel, e.name, e.data::json
FROM counter,
     unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS e(channel, name, data, ord)
RETURNING id
"""

EVENTS_SINCE = """
SELECT id, channel, name, data::text AS data FROM realtime_events
WHERE community_id = $1 AND channel = ANY($2::text[]) AND id > $3 AND id <= $4
ORDER BY id LIMIT $5
"""

ALL_EVENTS_SINCE = """
SELECT id, channel, name, data::text AS data FROM realtime_events
WHERE community_id = $1 AND id > $2 AND id <= $3
ORDER BY id LIMIT $4
"""

LAST_EVENT_ID = "SELECT last_id FROM realtime_event_counters WHERE community_id = $1"

LAST_EVENT_IDS = """
SELECT community_id, last_id FROM realtime_event_counters WHERE community_id = ANY($1::bigint[])
"""

OLDEST_EVENT_ID = "SELECT min(id) FROM realtime_events WHERE community_id = $1"

PRUNE_EVENTS = """
DELETE FROM realtime_events WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM realtime_events WHERE created_at < now() - $1::interval LIMIT $2
))
"""

# `versions`: the content_versions rows the same COMMIT bumps (migration 0020, storage/versions.py)
STAGE_EVENTS = """
INSERT INTO realtime_events_staged (community_id, channels, names, datas, versions)
VALUES ($1, $2::text[], $3::text[], $4::text[], $5::bigint[]) RETURNING id
"""

# STAGE_EVENTS with no event, as a CTE that `staging_versions` puts in front of another
# statement; {c} and {v} are its placeholders (the community, the versions).
STAGE_VERSIONS_CTE = """staged_versions AS (
    INSERT INTO realtime_events_staged (community_id, channels, names, datas, versions)
    VALUES ({c}, '{{}}', '{{}}', '{{}}', {v}::bigint[]))"""

MAX_ID = 2**63 - 1
NOTICE_PREFIX = "commons-realtime-events "


async def append_events(
    conn: asyncpg.Connection, community_id: int, events: Sequence[NewEvent]
) -> list[Event]:
    """Store `events` and give them the community's next ids, in order.

    Call it inside the transaction that makes the change, as its LAST statement: it locks the
    community's counter row until commit, which is what keeps ids in commit order (and a
    transaction that went on working while holding it would serialize the community's writers
    for longer). Use READ COMMITTED (the default). Publish the result after commit.
    """
    if not events:
        return []
    ids = await conn.fetch(APPEND_EVENTS, community_id, *_columns(events))
    first = min(row[0] for row in ids)
    return [Event(first + i, community_id, e.channel, e.name, e.data) for i, e in enumerate(events)]


def _columns(events: Sequence[NewEvent]) -> tuple[list[str], list[str], list[str]]:
    for event in events:
        validate(event)
    return ([e.channel for e in events], [e.name for e in events],
            [orjson.dumps(e.data).decode() for e in events])


@dataclass(frozen=True, slots=True)
class TailInsert:
    """An INSERT that rides on the unit of work's last statement (`stage_events`) as a
    data-modifying CTE, instead of a round trip of its own: `sql` is an INSERT ... RETURNING
    whose placeholders are numbered from $1, `args` its arguments; when it inserts a row, the
    statement NOTIFYs `wake` (delivered at commit, as any NOTIFY)."""

    sql: str
    args: tuple[Any, ...]
    wake: str | None = None


_PLACEHOLDER = re.compile(r"\$(\d+)")


@functools.lru_cache(maxsize=256)
def _shifted(sql: str, by: int) -> str:
    """`sql` with its placeholders renumbered from $1+by (our statements hold no `$` but in
    placeholders: no string literal, no dollar quoting). Cached: a few statements, each
    renumbered the same few ways."""
    return _PLACEHOLDER.sub(lambda m: f"${int(m.group(1)) + by}", sql)


def staging_statement(
    community_id: int, events: Sequence[NewEvent], versions: Sequence[int],
    tail: Sequence[TailInsert],
) -> tuple[str, list[Any]]:
    """The statement `stage_events` runs and its arguments: the events and versions staged
    (when there are any), then each tail insert as a CTE of its own. It returns the staged
    row's id (null when nothing is staged) and makes the tail's NOTIFYs."""
    args: list[Any] = []
    ctes: list[str] = []
    staged = "NULL::bigint"
    if events or versions:
        args += [community_id, *_columns(events), list(versions)]
        ctes.append(f"staged AS ({STAGE_EVENTS.strip()})")
        staged = "(SELECT id FROM staged)"
    wakes: list[str] = []
    for i, t in enumerate(tail):
        ctes.append(f"tail{i} AS ({_shifted(t.sql.strip(), len(args))})")
        args += t.args
        if t.wake is not None:
            args.append(t.wake)
            wakes.append(f"CASE WHEN EXISTS (SELECT FROM tail{i}) "
                         f"THEN pg_notify(${len(args)}, '') END")
    columns = ", ".join([staged, *wakes])
    return f"WITH {', '.join(ctes)}\nSELECT {columns}", args


async def stage_events(
    conn: asyncpg.Connection, community_id: int, events: Sequence[NewEvent], ids: EventIds,
    versions: Sequence[int] = (), tail: Sequence[TailInsert] = (),
) -> None:
    """Store `events` to be numbered when the caller's transaction commits; once it has,
    `ids.numbered()` gives them with their ids. Call inside the transaction, last or not (it
    locks nothing), with `ids` listening on `conn` since before the commit. `versions`: the
    content versions the same COMMIT bumps (storage/versions.py), in the same statement, as
    are the `tail` inserts (push jobs: push.jobs.jobs)."""
    if not events and not versions and not tail:
        return
    if not tail:  # the common statement, whose text never varies
        staged = await conn.fetchval(
            STAGE_EVENTS, community_id, *_columns(events), list(versions))
    else:
        sql, args = staging_statement(community_id, events, versions, tail)
        staged = await conn.fetchval(sql, *args)
    if events:
        ids.expect(int(staged), community_id, events)


@dataclass(frozen=True, slots=True)
class Statement:
    """One SQL statement and its arguments, for a caller that runs it as a whole unit of work
    (app.actions.work.write_one)."""

    sql: str
    args: tuple[Any, ...] = field(default=())


def staging_versions(sql: str, first_param: int) -> str:
    """`sql` with STAGE_VERSIONS_CTE in front: the same statement also stages the content
    versions its commit bumps (placeholders $first_param, the community, and the next one, the
    versions). Data-modifying CTEs run once and to completion whatever the statement reads, and
    the staged row's deferred trigger (migrations 0019, 0020) fires at the statement's commit,
    the implicit one in autocommit. `sql` may itself start with WITH (not WITH RECURSIVE)."""
    cte = STAGE_VERSIONS_CTE.format(c=f"${first_param}", v=f"${first_param + 1}")
    body = sql.lstrip()
    head = body[:5].upper()
    if head.startswith("WITH") and head[4:5].isspace():
        rest = body[4:].lstrip()
        if rest[:9].upper() == "RECURSIVE":
            raise ValueError("staging_versions does not take WITH RECURSIVE")
        return f"WITH {cte},\n{rest}"
    return f"WITH {cte}\n{body}"


async def run_staging_versions(
    conn: asyncpg.Connection | asyncpg.Pool, community_id: int, statement: Statement,
    versions: Sequence[int],
) -> list[asyncpg.Record]:
    """Run `statement`, staging `versions` (content_versions rows of `community_id`, bumped at
    its commit) in the same statement; with none, the statement as it is."""
    if not versions:
        return await conn.fetch(statement.sql, *statement.args)
    sql = staging_versions(statement.sql, len(statement.args) + 1)
    return await conn.fetch(sql, *statement.args, community_id, list(versions))


class EventIds:
    """Collects the ids the COMMIT gives staged events (the trigger's NOTICE on `conn`).

        ids = EventIds(conn)
        try:
            async with conn.transaction():
                ...
                await stage_events(conn, community_id, events, ids)
            stored = ids.numbered()   # after commit
        finally:
            ids.close()
    """

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn
        self._staged: dict[int, tuple[int, Sequence[NewEvent]]] = {}
        self._first: dict[int, int] = {}
        conn.add_log_listener(self._notice)

    def expect(self, staged: int, community_id: int, events: Sequence[NewEvent]) -> None:
        self._staged[staged] = (community_id, events)

    def _notice(self, conn: object, message: asyncpg.PostgresLogMessage) -> None:
        text = str(getattr(message, "message", ""))
        if text.startswith(NOTICE_PREFIX):
            staged, _, first = text[len(NOTICE_PREFIX):].split()
            self._first[int(staged)] = int(first)

    def numbered(self) -> list[Event]:
        """The staged events with their ids, in staging order. asyncpg hands the COMMIT's
        NOTICE to the listener before it resumes the COMMIT's caller (both are scheduled in
        arrival order), so after commit they are all known; a batch whose NOTICE did not arrive
        (it never should) is left out: it is stored, and hubs read it from PostgreSQL."""
        out: list[Event] = []
        for staged, (community_id, events) in self._staged.items():
            first = self._first.get(staged)
            if first is not None:
                out += [Event(first + i, community_id, e.channel, e.name, e.data)
                        for i, e in enumerate(events)]
        return out

    def close(self) -> None:
        self._conn.remove_log_listener(self._notice)


async def events_since(
    conn: asyncpg.Connection,
    community_id: int,
    channels: Sequence[str] | None,
    since_id: int,
    limit: int,
    *,
    up_to: int | None = None,
) -> list[Event]:
    """Events with since_id < id <= up_to on `channels` (None: every channel), ordered by id."""
    upper = MAX_ID if up_to is None else up_to
    if channels is None:
        rows = await conn.fetch(ALL_EVENTS_SINCE, community_id, since_id, upper, limit)
    else:
        rows = await conn.fetch(EVENTS_SINCE, community_id, list(channels), since_id, upper, limit)
    return [
        Event(r["id"], community_id, r["channel"], r["name"], orjson.loads(r["data"])) for r in rows
    ]


async def last_event_id(conn: asyncpg.Connection, community_id: int) -> int:
    """The highest committed id of the community (0 before its first event)."""
    value = await conn.fetchval(LAST_EVENT_ID, community_id)
    return int(value or 0)


async def last_event_ids(conn: asyncpg.Connection, community_ids: Iterable[int]) -> dict[int, int]:
    """`last_event_id` for many communities in one query (absent: no event yet)."""
    rows = await conn.fetch(LAST_EVENT_IDS, list(community_ids))
    return {r["community_id"]: r["last_id"] for r in rows}


async def oldest_event_id(conn: asyncpg.Connection, community_id: int) -> int | None:
    """The smallest id still stored; replaying from before it is impossible (reset)."""
    value = await conn.fetchval(OLDEST_EVENT_ID, community_id)
    return None if value is None else int(value)


async def prune_events(
    conn: asyncpg.Connection, older_than: timedelta, *, batch_size: int = 10_000
) -> int:
    """Delete events older than `older_than`, in batches; returns how many were deleted.

    Call it outside a transaction so each batch commits on its own and locks stay short.
    The counters are kept: ids never restart, so an old `since` is recognised as too old.
    """
    total = 0
    while True:
        status = await conn.execute(PRUNE_EVENTS, older_than, batch_size)
        deleted = int(status.rsplit(" ", 1)[-1])
        total += deleted
        if deleted < batch_size:
            return total
