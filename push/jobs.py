"""Durable push jobs (table push_jobs, migration 0009): one job per thing to announce and device.

Life of a job:

* `jobs` are written by the last statement of the unit of work that makes the change (a
  notification, a remark), so a job exists exactly when the change committed; that statement
  also NOTIFYs `commons_push`, which PostgreSQL delivers at commit, to wake the worker at once.
* `claim` takes due jobs with `FOR UPDATE SKIP LOCKED` (several workers never take the same
  job), counts the attempt and moves `next_attempt_at` forward by a lease, all in one short
  statement: nothing is locked while the network call runs, and a worker that dies mid-send
  leaves its jobs to be claimed again when the lease is over (delivery is at least once).
  The same statement re-checks, from the database as it is now, whether the push is still
  wanted: the device still has the switch on, still belongs to the user, and the notification
  is still unread or the remark still unacknowledged (`Claimed.wanted`).
* Then the job is `complete`d (deleted: sent, no longer wanted, dropped, given up) or
  `retry`d at a later time.
* The badge a push carries is counted by the claim statement (`storage.notifications.badge_of`,
  the counts REST reports), so it is right as of the moment the push leaves, and never stored.
* A `badge` job is a silent badge update of one device (`enqueue_badges`, when its user read
  something). There is at most one per device (a unique index): a read bumps its "seq". Once
  sent (`settle_badges`), the job stays, remembering the seq it sent, until `interval` later;
  it is then sent again if reads came in meanwhile, else deleted. So a burst of reads gives
  at most one update per device per interval, and the last read is never left unannounced.

The payload is provider-neutral: {"title", "body", "data": {str: str}, "thread", "check"}
(a badge job's is {"seq": n, "sent_seq": m}).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import orjson

from storage.events import TailInsert
from storage.notifications import badge_of

CHANNEL = "commons_push"
"""The LISTEN/NOTIFY channel that wakes workers when jobs are committed."""

KINDS = ("notification", "remark", "badge", "chat")
NOTIFICATION_TYPES = ("main", "conversations")
# The device switch that must be on for a push of each kind (besides push_enabled); a name from
# here is the only thing ever put into SQL text.
SWITCHES = (
    "push_mentions", "push_announcements", "push_replies", "push_conversation_activity",
)

# One job for each device (of type $5, push_enabled, and the switch on) of the users $3, with
# their payloads $4 (one each, or a single one shared by all: sent once; unnest pads the shorter
# array with nulls), due after $6. Rides on the unit of work's last statement (`jobs`).
_INSERT_JOBS = """
INSERT INTO push_jobs (community_id, user_id, device_id, kind, payload, next_attempt_at)
SELECT $1, d.user_id, d.id, $2, coalesce(x.payload, ($4::text[])[1])::jsonb, now() + $6::interval
FROM unnest($3::bigint[], $4::text[]) AS x(user_id, payload)
JOIN client_devices d ON d.community_id = $1 AND d.user_id = x.user_id
    AND d.notification_type = $5 AND d.push_enabled AND {switch}
RETURNING 1
"""

# A chat message `c` unread by member `gm` (read state `cr`): after they last viewed the chat
# and after they joined, as storage/chat_messages.py counts unread chats.
_CHAT_UNREAD = "c.created_at > greatest(cr.last_viewed_at, gm.created_at)"

# Whether a claimed job is still worth sending (see the module docstring).
_WANTED = f"""
(d.user_id = j.user_id AND d.push_enabled
 AND CASE j.payload->'check'->>'switch'
        WHEN 'push_mentions' THEN d.push_mentions
        WHEN 'push_announcements' THEN d.push_announcements
        WHEN 'push_replies' THEN d.push_replies
        WHEN 'push_conversation_activity' THEN d.push_conversation_activity
        ELSE true END
 AND CASE j.kind
        WHEN 'notification' THEN EXISTS (
            SELECT 1 FROM notifications n
            WHERE n.id = (j.payload->'check'->>'notification_id')::bigint
              AND n.user_id = j.user_id AND NOT n.read)
        WHEN 'remark' THEN EXISTS (
            SELECT 1 FROM conversation_members m
            WHERE m.conversation_id = (j.payload->'check'->>'conversation_id')::bigint
              AND m.user_id = j.user_id AND m.left_at IS NULL
              AND m.last_read_activity_id < (j.payload->'check'->>'activity_id')::bigint)
        WHEN 'badge' THEN (j.payload->>'seq') IS DISTINCT FROM (j.payload->>'sent_seq')
        WHEN 'chat' THEN EXISTS (
            SELECT 1 FROM group_chat_messages c
            JOIN group_memberships gm ON gm.group_id = c.group_id AND gm.user_id = j.user_id
            LEFT JOIN group_chat_reads cr
                ON cr.group_id = c.group_id AND cr.user_id = j.user_id
            WHERE c.id = (j.payload->'check'->>'chat_message_id')::bigint
              AND {_CHAT_UNREAD}
              AND coalesce(cr.push_notifications_enabled, true)
              AND CASE WHEN (j.payload->'check'->>'mention')::boolean
                       THEN coalesce(cr.push_notification_on_chat_mention, true)
                       ELSE coalesce(cr.push_notification_on_group_chat_message, true) END)
        ELSE false END)
"""

CLAIM = f"""
WITH due AS (
    SELECT id FROM push_jobs
    WHERE next_attempt_at <= now()
    ORDER BY next_attempt_at, id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE push_jobs j SET attempts = j.attempts + 1, next_attempt_at = now() + $2::interval
FROM due, client_devices d
WHERE j.id = due.id AND d.id = j.device_id
RETURNING j.id, j.community_id, j.user_id, j.device_id, j.kind, j.payload::text AS payload,
          j.attempts, j.created_at, d.registration_id, d.platform, {_WANTED} AS wanted,
          {badge_of("j.community_id", "j.user_id")} AS badge
"""

COMPLETE = "DELETE FROM push_jobs WHERE id = ANY($1::bigint[])"

_ENQUEUE_CHAT = """
WITH made AS (
    INSERT INTO push_chat_fanouts (community_id, group_id, chat_message_id, author_id, mentions,
                                   payload)
    VALUES ($1, $2, $3, $4, $5::text[], ($6::text)::jsonb)
    RETURNING 1
)
SELECT pg_notify('commons_push', '') FROM made
"""

# One chunk of one chat fan-out (see fan_out): $1 the chunk size (members). The next members
# after the cursor; for each of their `main` devices, the route the push takes: 'mention'
# (@mentioned, the member's chat mention setting and the device's push_mentions on) or else
# 'message' (the member's chat message setting and the device's push_conversation_activity
# on), or none. Never the author, only active users, only members for whom the message is
# still unread, only with the member's group push switch on.
_FAN_OUT = f"""
WITH f AS (
    SELECT * FROM push_chat_fanouts ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED
), gm AS (
    SELECT gm.user_id, gm.created_at FROM f
    JOIN group_memberships gm ON gm.group_id = f.group_id AND gm.user_id > f.after_user_id
    ORDER BY gm.user_id LIMIT $1
), routes AS (
    SELECT gm.user_id, d.id AS device_id,
           CASE WHEN lower(u.username) = ANY(f.mentions) AND d.push_mentions
                     AND coalesce(cr.push_notification_on_chat_mention, true) THEN 'mention'
                WHEN d.push_conversation_activity
                     AND coalesce(cr.push_notification_on_group_chat_message, true)
                     THEN 'message' END AS route
    FROM f
    JOIN group_chat_messages c ON c.id = f.chat_message_id
    JOIN gm ON gm.user_id <> f.author_id
    JOIN users u ON u.id = gm.user_id AND u.state = 'active'
    JOIN client_devices d ON d.community_id = f.community_id AND d.user_id = gm.user_id
        AND d.notification_type = 'main' AND d.push_enabled
    LEFT JOIN group_chat_reads cr ON cr.group_id = f.group_id AND cr.user_id = gm.user_id
    WHERE {_CHAT_UNREAD} AND coalesce(cr.push_notifications_enabled, true)
), made AS (
    INSERT INTO push_jobs (community_id, user_id, device_id, kind, payload)
    SELECT f.community_id, r.user_id, r.device_id, 'chat',
           (f.payload - 'mention_title') || jsonb_build_object(
               'title', f.payload->(CASE r.route WHEN 'mention' THEN 'mention_title'
                                                 ELSE 'title' END),
               'check', jsonb_build_object(
                   'switch', CASE r.route WHEN 'mention' THEN 'push_mentions'
                                          ELSE 'push_conversation_activity' END,
                   'chat_message_id', f.chat_message_id, 'mention', r.route = 'mention'))
    FROM f, routes r WHERE r.route IS NOT NULL
    ORDER BY r.user_id, r.device_id
    RETURNING 1
), counted AS (
    SELECT (SELECT count(*) FROM f)::int AS taken, (SELECT count(*) FROM gm)::int AS members,
           (SELECT max(user_id) FROM gm) AS last_user, (SELECT count(*) FROM made)::int AS made
), moved AS (
    UPDATE push_chat_fanouts p SET after_user_id = counted.last_user
    FROM f, counted WHERE p.id = f.id AND counted.members = $1
), finished AS (
    DELETE FROM push_chat_fanouts p USING f, counted WHERE p.id = f.id AND counted.members < $1
)
SELECT taken, members, made,
       CASE WHEN made > 0 THEN pg_notify('commons_push', '')::text END AS woke
FROM counted
"""

# One silent badge update per device of the user that has push on: a new job, or a bump of
# the device's existing one (see the module docstring).
_ENQUEUE_BADGES = """
WITH made AS (
    INSERT INTO push_jobs AS j (community_id, user_id, device_id, kind, payload)
    SELECT $1, d.user_id, d.id, 'badge', '{"seq": 0}'::jsonb
    FROM client_devices d
    WHERE d.community_id = $1 AND d.user_id = $2 AND d.push_enabled
    ORDER BY d.id
    ON CONFLICT (device_id) WHERE kind = 'badge'
    DO UPDATE SET payload = j.payload || jsonb_build_object('seq', (j.payload->>'seq')::int + 1)
    RETURNING 1
), counted AS (SELECT count(*)::int AS n FROM made)
SELECT n, CASE WHEN n > 0 THEN pg_notify('commons_push', '')::text END AS woke FROM counted
"""

# Badge jobs handled: $1 ids, $2 their seq when claimed, $3 whether each was sent, $4 the
# interval. Sent: kept until the interval is over, remembering what was sent. Not sent (not
# wanted): deleted, unless a read came in meanwhile (then due at once).
_SETTLE_BADGES = """
WITH x AS (
    SELECT * FROM unnest($1::bigint[], $2::int[], $3::boolean[]) AS x(id, seq, sent)
), kept AS (
    UPDATE push_jobs j
    SET payload = CASE WHEN x.sent THEN j.payload || jsonb_build_object('sent_seq', x.seq)
                       ELSE j.payload END,
        next_attempt_at = CASE WHEN x.sent THEN now() + $4::interval ELSE now() END,
        attempts = 0
    FROM x WHERE j.id = x.id AND (x.sent OR (j.payload->>'seq')::int <> x.seq)
)
DELETE FROM push_jobs j USING x
WHERE j.id = x.id AND NOT x.sent AND (j.payload->>'seq')::int = x.seq
"""

RETRY = """
UPDATE push_jobs j SET next_attempt_at = now() + make_interval(secs => x.delay),
                       last_error = x.error
FROM unnest($1::bigint[], $2::float8[], $3::text[]) AS x(id, delay, error)
WHERE j.id = x.id
"""

PENDING = """
SELECT id, community_id, user_id, device_id, kind, payload::text AS payload, attempts,
       next_attempt_at, last_error, created_at
FROM push_jobs ORDER BY id
"""


@dataclass(frozen=True, slots=True)
class PushMessage:
    """What a device shows, the same for every provider."""

    title: str
    body: str
    data: Mapping[str, str]
    thread: str | None = None
    """Pushes of one thread are grouped together on the device (APNs thread-id)."""
    badge: int | None = None
    """The app icon's badge (counted when the job is claimed)."""
    silent: bool = False
    """A badge update only: nothing shown (APNs content-available, FCM data-only)."""
    push_id: str | None = None
    """The push's identity, the same for every attempt of one job: APNs apns-id and
    apns-collapse-id, FCM's Android notification tag and apns-collapse-id for iOS. A re-send
    after a crash (at least once delivery) therefore replaces its first copy on the device
    instead of showing twice, and never replaces a different push (a collapse id per thread
    would let a late re-send cover a newer push of the thread with older text)."""


@dataclass(frozen=True, slots=True)
class Claimed:
    id: int
    community_id: int
    user_id: int
    device_id: int
    kind: str
    attempts: int
    created_at: datetime
    registration_id: str
    platform: str
    wanted: bool
    message: PushMessage
    seq: int = 0
    """A badge job's seq when claimed (see settle_badges)."""


def payload(
    message: PushMessage, check: Mapping[str, Any]
) -> dict[str, Any]:
    """The stored form of a push: what to show, and what the worker re-checks before sending
    (`check`: {"switch", "notification_id"} or {"switch", "conversation_id", "activity_id"})."""
    return {
        "title": message.title,
        "body": message.body,
        "data": dict(message.data),
        "thread": message.thread,
        "check": dict(check),
    }


def push_id(job_id: int) -> str:
    """A job's stable push id, a UUID as APNs wants its apns-id."""
    return str(uuid.uuid5(_PUSH_IDS, str(job_id)))


_PUSH_IDS = uuid.UUID("6f0b4a52-5b1d-4e7e-9a55-1c0d2f4c3a10")


def _message(job_id: int, kind: str, data: Mapping[str, Any], badge: int) -> PushMessage:
    if kind == "badge":
        return PushMessage(title="", body="", data={"type": "badge"}, badge=badge, silent=True,
                           push_id=push_id(job_id))
    return PushMessage(
        title=str(data.get("title") or ""),
        body=str(data.get("body") or ""),
        data={str(k): str(v) for k, v in (data.get("data") or {}).items()},
        thread=data.get("thread"),
        badge=badge,
        push_id=push_id(job_id),
    )


def jobs(
    community_id: int,
    kind: str,
    user_ids: Sequence[int],
    payloads: Sequence[Mapping[str, Any]],
    *,
    notification_type: str,
    switch: str | None,
    delay: timedelta = timedelta(0),
) -> TailInsert | None:
    """A job for every device of type `notification_type` with push_enabled (and `switch` on)
    of each user, written by the last statement of the caller's unit of work (`Work.emit`
    takes it): workers see the jobs once it commits, woken by a NOTIFY on CHANNEL then.
    `payloads` holds one payload per user id, or one shared by all of them (a remark to a
    conversation's members: sent to PostgreSQL once). None when there is no user."""
    if kind not in KINDS:
        raise ValueError(f"unknown push job kind {kind!r}")
    if notification_type not in NOTIFICATION_TYPES:
        raise ValueError(f"unknown notification type {notification_type!r}")
    if switch is not None and switch not in SWITCHES:
        raise ValueError(f"unknown push switch {switch!r}")
    if len(payloads) not in (1, len(user_ids)):
        raise ValueError("one payload per user, or one for all")
    if not user_ids:
        return None
    return TailInsert(
        _INSERT_JOBS.format(switch=f"d.{switch}" if switch else "true"),
        (community_id, kind, list(user_ids), [orjson.dumps(p).decode() for p in payloads],
         notification_type, delay),
        wake=CHANNEL,
    )


async def enqueue_chat(
    conn: asyncpg.Connection,
    community_id: int,
    group_id: int,
    chat_message_id: int,
    author_id: int,
    mentions: Sequence[str],
    message: PushMessage,
    mention_title: str,
) -> None:
    """In the chat message's transaction: ONE row, whatever the group's size, that
    `fan_out` turns into the members' push jobs (`message` for each, titled `mention_title`
    for those @mentioned in `mentions`, usernames)."""
    stored = {**payload(message, {}), "mention_title": mention_title}
    del stored["check"]
    await conn.execute(_ENQUEUE_CHAT, community_id, group_id, chat_message_id, author_id,
                       sorted({m.lower() for m in mentions}), orjson.dumps(stored).decode())


async def fan_out(pool: asyncpg.Pool, chunk: int) -> tuple[int, int] | None:
    """Fan out the next `chunk` members of the oldest chat message waiting to be fanned out,
    in one transaction (one statement) that also moves its cursor, or deletes it with its
    last chunk: so each member is fanned out once, even when a worker dies. Several workers
    take different messages (SKIP LOCKED). (members looked at, jobs made), or None when no
    message is waiting."""
    row = await pool.fetchrow(_FAN_OUT, chunk)
    assert row is not None
    if not row["taken"]:
        return None
    return int(row["members"]), int(row["made"])


async def claim(conn: asyncpg.Connection | asyncpg.Pool, limit: int, lease: timedelta
                ) -> list[Claimed]:
    """Take up to `limit` due jobs for `lease` (one statement, its own transaction)."""
    rows = await conn.fetch(CLAIM, limit, lease)
    out = []
    for r in sorted(rows, key=lambda r: r["id"]):
        data = orjson.loads(r["payload"])
        out.append(Claimed(
            id=r["id"], community_id=r["community_id"], user_id=r["user_id"],
            device_id=r["device_id"], kind=r["kind"], attempts=r["attempts"],
            created_at=r["created_at"], registration_id=r["registration_id"],
            platform=r["platform"], wanted=bool(r["wanted"]),
            message=_message(r["id"], r["kind"], data, int(r["badge"])),
            seq=int(data.get("seq") or 0),
        ))
    return out


async def enqueue_badges(conn: asyncpg.Connection, community_id: int, user_id: int) -> int:
    """Silent badge updates for every device of the user with push on, in the caller's
    transaction (see the module docstring); how many jobs were made or bumped."""
    row = await conn.fetchrow(_ENQUEUE_BADGES, community_id, user_id)
    assert row is not None
    return int(row["n"])


async def settle_badges(
    conn: asyncpg.Connection | asyncpg.Pool, handled: Sequence[tuple[int, int, bool]],
    interval: timedelta,
) -> None:
    """(job id, seq when claimed, whether it was sent) of badge jobs done with for now."""
    if handled:
        await conn.execute(_SETTLE_BADGES, [h[0] for h in handled], [h[1] for h in handled],
                           [h[2] for h in handled], interval)


async def complete(conn: asyncpg.Connection | asyncpg.Pool, ids: Sequence[int]) -> None:
    """Done with these jobs (sent, not wanted any more, dropped or given up)."""
    if ids:
        await conn.execute(COMPLETE, list(ids))


async def retry(
    conn: asyncpg.Connection | asyncpg.Pool,
    retries: Sequence[tuple[int, float, str]],
) -> None:
    """(job id, seconds from now, error) for each job to try again later."""
    if retries:
        await conn.execute(
            RETRY, [r[0] for r in retries], [float(r[1]) for r in retries],
            [r[2][:500] for r in retries],
        )


async def pending(conn: asyncpg.Connection | asyncpg.Pool) -> list[dict[str, Any]]:
    """Every job (for tests and the command line)."""
    out = []
    for r in await conn.fetch(PENDING):
        row = dict(r)
        row["payload"] = orjson.loads(row["payload"])
        out.append(row)
    return out
