"""Messages: the row every message form is rendered from, who may read it, and the feed queries.

Placeholders shared by every query here: `$1` the community id, `$2` the viewer's id, `$3`
whether the viewer is an external contributor. Queries read `messages m LEFT JOIN groups g`.

Who may read a message (the one rule, `READABLE`):
- in a group: whoever may read the group's content (storage.group_visibility.readable_sql);
- with no group: every internal user of the community; an external contributor only when it
  is theirs or addressed to them (a message-level recipient).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import asyncpg

from storage import content_filters, topics
from storage.db import Conn
from storage.group_visibility import listed_sql, readable_sql
from storage.groups import SHORT_COLUMNS as GROUP_SHORT_COLUMNS
from storage.rows import (
    FeedGroupRow,
    MentionableUserRow,
    MessageExtrasRow,
    MessageRow,
    NewMessageRow,
    ReadableMessageRow,
)
from storage.users import BASIC, BASIC_NAMES

STREAM_KINDS = ("home", "mentions", "bookmarked", "sent", "company")

COLUMNS = """
m.id, m.community_id, m.user_id, m.group_id, m.external_system_id, m.title, m.body,
m.html_body, m.action, m.verb, m.message_type, m.external_url, m.source, m.is_announcement,
m.days_of_stickiness, m.sticky_until, m.shared_message_id, m.client_provided_guid,
m.external_resource_ids, m.extensions, m.last_interacted_at, m.created_at, m.updated_at
"""

# Counts and viewer-relative columns, computed in the same statement (viewer = $2).
# share_count counts the messages sharing this one.
COMPUTED = """
(SELECT count(*) FROM comments c WHERE c.message_id = m.id)::int AS comments_count,
(SELECT count(*) FROM likes l WHERE l.message_id = m.id AND l.comment_id IS NULL)::int
    AS likes_count,
(SELECT count(*) FROM messages sh WHERE sh.shared_message_id = m.id)::int AS share_count,
(SELECT f.id FROM flags f WHERE f.message_id = m.id AND f.user_id = $2) AS viewer_flag_id,
EXISTS (SELECT 1 FROM message_hides h WHERE h.message_id = m.id) AS hidden,
(m.is_announcement AND m.sticky_until > now()) AS sticky,
g.state AS group_state, g.permission AS group_permission, g.post_enabled AS group_post_enabled,
(SELECT gm.role FROM group_memberships gm WHERE gm.group_id = m.group_id AND gm.user_id = $2)
    AS viewer_group_role
"""

ROW = f"{COLUMNS}, {COMPUTED}"
FROM = "messages m LEFT JOIN groups g ON g.id = m.group_id"

READABLE = f"""
(CASE WHEN m.group_id IS NULL THEN
    (NOT $3 OR m.user_id = $2 OR EXISTS (
        SELECT 1 FROM message_recipients r_v
        WHERE r_v.message_id = m.id AND r_v.comment_id IS NULL AND r_v.user_id = $2))
 ELSE coalesce({readable_sql("g", "$2", "$3")}, false) END)
"""

# The Company stream leaves out what external systems marked `not_in_company_stream` post.
IN_COMPANY = """
(m.external_system_id IS NULL OR NOT EXISTS (
    SELECT 1 FROM external_systems es_c
    WHERE es_c.id = m.external_system_id AND es_c.not_in_company_stream))
"""

# What each system stream holds, on top of READABLE.
STREAM_CONDITIONS = {
    # groups you belong to, people you follow, messages addressed to you, yours, announcements
    "home": """
(m.user_id = $2
 OR m.is_announcement
 OR EXISTS (SELECT 1 FROM group_memberships gm_h
            WHERE gm_h.group_id = m.group_id AND gm_h.user_id = $2)
 OR EXISTS (SELECT 1 FROM follows f_h WHERE f_h.follower_id = $2 AND f_h.followed_id = m.user_id)
 OR EXISTS (SELECT 1 FROM message_recipients r_h
            WHERE r_h.message_id = m.id AND r_h.user_id = $2))
""",
    # you are @mentioned (or addressed) in the message or one of its comments
    "mentions": """
EXISTS (SELECT 1 FROM message_recipients r_m WHERE r_m.message_id = m.id AND r_m.user_id = $2)
""",
    "bookmarked": """
EXISTS (SELECT 1 FROM flags f_b WHERE f_b.message_id = m.id AND f_b.user_id = $2)
""",
    "sent": "m.user_id = $2",
    "company": IN_COMPANY,
}

NOT_HIDDEN = "NOT EXISTS (SELECT 1 FROM message_hides h_x WHERE h_x.message_id = m.id)"


def group_condition(group_param: str) -> str:
    """A group's stream: its messages that a group admin has not hidden."""
    return f"(m.group_id = {group_param} AND {NOT_HIDDEN})"


BY_ID = f"""
SELECT {ROW}, {READABLE} AS readable FROM {FROM}
WHERE m.community_id = $1 AND m.id = $4
"""

BY_IDS_READABLE = f"""
SELECT {ROW} FROM {FROM}
WHERE m.community_id = $1 AND m.id = ANY($4::bigint[]) AND {READABLE}
"""

INSERT = """
INSERT INTO messages (community_id, user_id, group_id, external_system_id, title, body,
                      html_body, action, verb, message_type, external_url, source,
                      is_announcement, days_of_stickiness, sticky_until, shared_message_id,
                      client_provided_guid, external_resource_ids, extensions)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
        CASE WHEN $13 AND $14 > 0 THEN now() + make_interval(days => $14) END,
        $15, $16, $17, $18)
RETURNING id
"""

# The same insert, with the message's recipients and topics written by the same statement,
# answering the new message's full row (ROW: its counts are 0, the viewer is its author $2).
# Their last_interacted_at is the message's, given here (migration 0012's trigger would read the
# messages row again for each of them).
# $19-$22 recipients as in INSERT_RECIPIENTS ($4-$7 there), $23 topic names (distinct,
# normalized: topics.distinct_names), upserted here as topics.upsert does.
INSERT_FULL = f"""
WITH tp AS ({topics.upsert_sql("$1", "$23", "$2")}), m AS (
{INSERT.strip().removesuffix("RETURNING id")}RETURNING *
), r AS (
    INSERT INTO message_recipients (community_id, message_id, comment_id, user_id, group_id,
                                    reason, position, last_interacted_at)
    SELECT $1, m.id, NULL, r.user_id, r.group_id, r.reason, r.position, m.last_interacted_at
    FROM m, unnest($19::bigint[], $20::bigint[], $21::text[], $22::int[])
        AS r(user_id, group_id, reason, position)
    ON CONFLICT DO NOTHING
), t AS (
    INSERT INTO message_topics (community_id, message_id, comment_id, topic_id,
                                last_interacted_at)
    SELECT $1, m.id, NULL, tp.id, m.last_interacted_at FROM m, tp
    ON CONFLICT DO NOTHING
)
SELECT {ROW},
       -- its tags' names in the order topics.OF_MESSAGES reads them (the database's collation)
       ARRAY(SELECT tp.name FROM tp ORDER BY tp.name) AS tag_names
FROM m LEFT JOIN groups g ON g.id = m.group_id
"""

UPDATE_CONTENT = """
UPDATE messages SET title = $3, body = $4, html_body = $5, external_url = $6,
                    external_resource_ids = $7, updated_at = now()
WHERE community_id = $1 AND id = $2
"""

DELETE = "DELETE FROM messages WHERE community_id = $1 AND id = $2"

# Recipients: the message's group, @mentions and message[recipients] (comment_id NULL), or the
# @mentions of a comment. $1 community, $2 message, $3 comment (NULL); then aligned arrays:
# $4 user ids, $5 group ids (one of the two NULL per row), $6 reasons, $7 positions.
INSERT_RECIPIENTS = """
INSERT INTO message_recipients (community_id, message_id, comment_id, user_id, group_id,
                                reason, position)
SELECT $1, $2, $3, r.user_id, r.group_id, r.reason, r.position
FROM unnest($4::bigint[], $5::bigint[], $6::text[], $7::int[])
    AS r(user_id, group_id, reason, position)
ON CONFLICT DO NOTHING
"""
# An edit replaces the body's @mentions; the group and addressed recipients stay.
DELETE_MESSAGE_MENTIONS = """
DELETE FROM message_recipients
WHERE message_id = $1 AND comment_id IS NULL AND reason = 'mention'
"""
DELETE_COMMENT_RECIPIENTS = "DELETE FROM message_recipients WHERE comment_id = $1"

RECIPIENTS = """
SELECT message_id, user_id, group_id FROM message_recipients
WHERE message_id = ANY($1::bigint[]) AND comment_id IS NULL
ORDER BY message_id, position, id
"""
# Whom each of these comments ($2) of these messages ($1) addresses, in order (message_id
# first so that the unique index on (message_id, comment_id, ...) serves it).
COMMENT_RECIPIENTS = """
SELECT comment_id, user_id, group_id FROM message_recipients
WHERE message_id = ANY($1::bigint[]) AND comment_id = ANY($2::bigint[])
ORDER BY comment_id, position, id
"""

# Short group rows with the viewer's role and whether the viewer may see the group at all.
GROUPS = f"""
SELECT {GROUP_SHORT_COLUMNS},
       (SELECT gm.role FROM group_memberships gm WHERE gm.group_id = g.id AND gm.user_id = $2)
           AS viewer_role,
       {listed_sql("g", "$2", "$3")} AS listed
FROM groups g WHERE g.community_id = $1 AND g.id = ANY($4::bigint[])
"""

# A group a message names ($4), with what posting into it depends on.
GROUP_FOR_POSTING = f"""
SELECT {GROUP_SHORT_COLUMNS},
       (SELECT gm.role FROM group_memberships gm WHERE gm.group_id = g.id AND gm.user_id = $2)
           AS viewer_role,
       {readable_sql("g", "$2", "$3")} AS readable
FROM groups g WHERE g.community_id = $1 AND g.id = $4
"""

# @mentions of a remark or a chat message: users by username, $2 lower-case names.
MENTIONABLE_USERS = """
SELECT u.id, u.username FROM users u
WHERE u.community_id = $1 AND lower(u.username) = ANY($2::text[])
"""
# The users and readable groups these names ($4, lower case) may mean: `kind`, `name`, then a
# user's BASIC columns (a group: its id, the rest null).
_NULLS = ", ".join(["NULL"] * (len(BASIC_NAMES) - 1))  # BASIC but its first column, id
MENTIONABLE = f"""
SELECT 'user' AS kind, u.username AS name, {BASIC} FROM users u
WHERE u.community_id = $1 AND lower(u.username) = ANY($4::text[])
UNION ALL
SELECT 'group', g.groupname, g.id, {_NULLS} FROM groups g
WHERE g.community_id = $1 AND lower(g.groupname) = ANY($4::text[])
  AND {readable_sql("g", "$2", "$3")}
"""
# MENTIONABLE and the community's blocked words (kind 'word', in `name`): what a body needs to
# know before it is written, in one query.
BODY_LOOKUP = f"""{MENTIONABLE}
UNION ALL
SELECT 'word', w.word, NULL, {_NULLS} FROM ({content_filters.WORDS}) w
"""

UPSERT_RESOURCES = """
INSERT INTO external_resources AS r (community_id, url)
SELECT $1, u.url FROM unnest($2::text[]) AS u(url)
ON CONFLICT (community_id, url) DO UPDATE SET url = r.url
RETURNING id, url
"""

# What the messages $1 show besides their rows, in one statement: their message-level
# recipients (user and group ids, aligned, in RECIPIENTS' order), tags (by name, as
# topics.of_messages sorts them), poll ids and whether they have attachments (load_feed skips
# the polls and attachments queries when none has any). Only the messages with any of these,
# NULL for what they lack. Set-based: each table is read once for the page.
EXTRAS = """
WITH r AS (
    SELECT r.message_id, array_agg(r.user_id ORDER BY r.position, r.id) AS user_ids,
           array_agg(r.group_id ORDER BY r.position, r.id) AS group_ids
    FROM message_recipients r
    WHERE r.message_id = ANY($1::bigint[]) AND r.comment_id IS NULL
    GROUP BY r.message_id
), t AS (
    SELECT mt.message_id, array_agg(t.name ORDER BY t.name) AS names
    FROM message_topics mt JOIN topics t ON t.id = mt.topic_id
    WHERE mt.message_id = ANY($1::bigint[]) AND mt.comment_id IS NULL
    GROUP BY mt.message_id
), p AS (
    SELECT p.message_id, p.id FROM polls p WHERE p.message_id = ANY($1::bigint[])
), a AS (
    SELECT DISTINCT a.subject_id AS message_id FROM attachments a
    WHERE a.subject_type = 'message' AND a.subject_id = ANY($1::bigint[])
)
SELECT m.id, r.user_ids AS recipient_user_ids, r.group_ids AS recipient_group_ids,
       t.names AS tag_names, p.id AS poll_id, a.message_id IS NOT NULL AS has_attachments
FROM unnest($1::bigint[]) AS m(id)
LEFT JOIN r ON r.message_id = m.id LEFT JOIN t ON t.message_id = m.id
LEFT JOIN p ON p.message_id = m.id LEFT JOIN a ON a.message_id = m.id
WHERE r.message_id IS NOT NULL OR t.message_id IS NOT NULL OR p.id IS NOT NULL
   OR a.message_id IS NOT NULL
"""
# EXTRAS' columns on each row of a page (`MessageQuery.build`), so that the page needs no
# statement of its own for them: correlated to the message `m`, each an index probe (the page
# has per_page + 1 rows); `rx` is a lateral join (one read of the recipients for both arrays).
# Same values as EXTRAS' (a message with none: NULL recipients, empty tags). Then the GROUPS
# columns of the message's group that the row lacks (`page_group`), so that a page whose groups
# are all its messages' own reads no group. Then whether the viewer likes it or one of its
# comments, and the versions of its thread and of its community's directory (migration 0021):
# what app.render.page_messages keeps its JSON under.
PAGE_EXTRAS = f"""
g.name AS group_name, g.groupname AS group_groupname, g.chat_enabled AS group_chat_enabled,
g.avatar_id AS group_avatar_id, {listed_sql("g", "$2", "$3")} AS group_listed,
rx.user_ids AS recipient_user_ids, rx.group_ids AS recipient_group_ids,
ARRAY(SELECT t.name FROM message_topics mt JOIN topics t ON t.id = mt.topic_id
      WHERE mt.message_id = m.id AND mt.comment_id IS NULL ORDER BY t.name) AS tag_names,
(SELECT p.id FROM polls p WHERE p.message_id = m.id) AS poll_id,
EXISTS (SELECT 1 FROM attachments a WHERE a.subject_type = 'message' AND a.subject_id = m.id)
    AS has_attachments,
EXISTS (SELECT 1 FROM likes l WHERE l.message_id = m.id AND l.user_id = $2) AS viewer_liked,
coalesce(tv.version, 0) AS thread_version,
coalesce((SELECT d.version FROM directory_versions d WHERE d.community_id = $1), 0)
    AS directory_version
"""
PAGE_EXTRAS_JOIN = """
LEFT JOIN LATERAL (
    SELECT array_agg(r.user_id ORDER BY r.position, r.id) AS user_ids,
           array_agg(r.group_id ORDER BY r.position, r.id) AS group_ids
    FROM message_recipients r WHERE r.message_id = m.id AND r.comment_id IS NULL) rx ON true
LEFT JOIN thread_versions tv ON tv.message_id = m.id
"""
RESOURCES = """
SELECT id, url, title, description, resource_type, oembed FROM external_resources
WHERE community_id = $1 AND id = ANY($2::bigint[])
"""

HIDE = """
INSERT INTO message_hides (community_id, group_id, message_id, hidden_by)
VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING
"""


# Page order, and the columns each candidate source yields.
ORDER = "m.last_interacted_at DESC, m.id DESC"
CANDIDATE = "m.id, m.last_interacted_at"


HOME_GROUP_COUNT = """
SELECT count(*) FROM group_memberships WHERE community_id = $1 AND user_id = $2
"""


# A Home page is a merge with a branch per group (`_home_merge`) up to this many groups of the
# viewer. Beyond, the statement grows large enough (about 180 bytes and, the first 5 runs on a
# connection, about 2 ms of planning per branch) that it is used only for pages deep enough
# that reading k rows of every group costs more: groups x k above MERGE_DEEP_ROWS.
MERGE_GROUPS = 64
MERGE_DEEP_ROWS = 50_000


def _slots(n: int) -> int:
    """Branches for n groups: the next power of two (then the next multiple of MERGE_GROUPS),
    so that a handful of statement texts (prepared once per connection, their plans cached)
    serve every viewer; a spare slot finds no group and reads nothing."""
    if n <= MERGE_GROUPS:
        return 0 if n == 0 else 1 << (n - 1).bit_length()
    return -(-n // MERGE_GROUPS) * MERGE_GROUPS


def _merges(groups: int, k: int) -> bool:
    """Whether a Home page of the first k rows, for a viewer in `groups` groups, is read as a
    merge (else k rows of each group, sorted)."""
    return groups <= MERGE_GROUPS or groups * k > MERGE_DEEP_ROWS


@dataclass(frozen=True)
class _Parts:
    """SQL fragments a page or a stream's latest activity is built from."""

    stream: str | None
    group: str | None
    author: str | None
    external_system: str | None
    topic: str | None
    since: str | None
    home_slots: int | None = None


def _filters(parts: _Parts, *, with_stream: bool = True, with_topic: bool = True) -> list[str]:
    """Everything a candidate must satisfy (READABLE and the query's narrowing)."""
    where = ["m.community_id = $1", READABLE]
    if with_stream and parts.stream is not None:
        where.append(STREAM_CONDITIONS[parts.stream])
    if parts.group is not None:
        where.append(group_condition(parts.group))
    if parts.author is not None:
        where.append(f"m.user_id = {parts.author}")
    if parts.external_system is not None:
        where.append(f"m.external_system_id = {parts.external_system}")
    if with_topic and parts.topic is not None:
        where.append(
            "EXISTS (SELECT 1 FROM message_topics mt JOIN topics t ON t.id = mt.topic_id "
            f"WHERE mt.message_id = m.id AND t.name = {parts.topic})"
        )
    if parts.since is not None:
        where.append(f"m.last_interacted_at > {parts.since}")
    return where


def _and(where: list[str]) -> str:
    return "\n  AND ".join(where)


def _walk(driver: list[str], where: list[str], k: str, source: str = FROM) -> str:
    """The first k candidates of one source, walking an index in page order."""
    return (
        f"(SELECT {CANDIDATE} FROM {source}\nWHERE {_and(driver + where)}\n"
        f"ORDER BY {ORDER} LIMIT {k})"
    )


def _rows_walk(
    table: str, alias: str, key: str, where: list[str], k: str, *, copies: bool = False
) -> list[str]:
    """The first k distinct messages of rows of `table` (recipients, topics) that carry a copy of
    their message's last_interacted_at, walked through (key, last_interacted_at DESC,
    message_id DESC); plus any row not yet backfilled (none once `commons backfill-feed` ran).

    Each row's message is looked up (and filtered) on its own (`OFFSET 0` keeps the lookup a
    nested loop), so that the walk stops after k readable messages instead of joining all the
    rows of the key.

    With `copies`, the first source yields the rows' own (last_interacted_at, message_id),
    equal to their message's (the triggers keep them so in the same transaction): its output
    is then in index order, so that a merge above it reads it lazily."""
    message = (
        f"CROSS JOIN LATERAL (SELECT {CANDIDATE} FROM {FROM}\n"
        f"WHERE {_and([f'm.id = {alias}.message_id', *where])} OFFSET 0) x"
    )
    filled = (
        f"(SELECT DISTINCT ON ({alias}.last_interacted_at, {alias}.message_id) "
        + (f"{alias}.message_id AS id, {alias}.last_interacted_at" if copies
           else "x.id, x.last_interacted_at")
        + f"\nFROM {table} {alias} {message}\n"
        f"WHERE {key} AND {alias}.last_interacted_at IS NOT NULL\n"
        f"ORDER BY {alias}.last_interacted_at DESC, {alias}.message_id DESC LIMIT {k})"
    )
    unfilled = (
        f"(SELECT x.id, x.last_interacted_at FROM {table} {alias} {message}\n"
        f"WHERE {key} AND {alias}.last_interacted_at IS NULL)"
    )
    return [filled, unfilled]


def _home_merge(parts: _Parts, slots: int, k: str) -> str:
    """Home's first k rows as a k-way merge: one branch per group of the viewer (a walk of
    `messages (group_id, last_interacted_at DESC, id DESC)`, the index alone: a member may read
    their group's messages) and one per other source (`_home_others`), each in page order,
    under one `ORDER BY ... LIMIT k`. PostgreSQL runs it as a Merge Append that reads about k
    rows in all (plus one per branch) and stops, instead of k rows per group and a sort of them
    all. A message reachable from two branches (a followed person's post in one of the viewer's
    groups) comes out of both with the same key, next to each other: `DISTINCT ON` the key keeps
    one without collecting anything.

    Branch i walks the viewer's i-th group, read from group_memberships by the statement itself
    (`mine`): only the number of branches is decided beforehand (`slots`, from the viewer's
    count of groups, rounded up), so a group left meanwhile is not read, and one joined
    meanwhile is read when its slot exists (else from the next page read on)."""
    since = "" if parts.since is None else f" AND m.last_interacted_at > {parts.since}"
    # compact: the statement is prepared and cached per connection (asyncpg caches statements
    # up to storage.db's max_cacheable_statement_size)
    branches = [
        f"(SELECT {CANDIDATE} FROM messages m WHERE m.group_id = "
        f"(SELECT ids[{i}] FROM mine){since} ORDER BY {ORDER} LIMIT {k})"
        for i in range(1, slots + 1)
    ]
    for source, ordered in _home_others(parts, k, copies=True):
        branches.append(source if ordered else (
            f"(SELECT o.id, o.last_interacted_at FROM {source} o\n"
            f"ORDER BY o.last_interacted_at DESC, o.id DESC LIMIT {k})"))
    merged = "\nUNION ALL\n".join(branches)
    mine = (
        "WITH mine AS (SELECT array_agg(group_id ORDER BY group_id) AS ids "
        "FROM group_memberships WHERE community_id = $1 AND user_id = $2)\n"
    )
    return (
        f"({mine if slots else ''}"
        "SELECT DISTINCT ON (h.last_interacted_at, h.id) h.id, h.last_interacted_at\n"
        f"FROM ({merged}) h\nORDER BY h.last_interacted_at DESC, h.id DESC LIMIT {k})"
    )


def _home_groups_lateral(parts: _Parts, k: str) -> str:
    """The viewer's groups read in the statement itself: one walk of (group_id,
    last_interacted_at, id) per group, k rows each (a stream's latest activity, k = 1)."""
    since = [] if parts.since is None else [f"m.last_interacted_at > {parts.since}"]
    return (
        "(SELECT x.id, x.last_interacted_at FROM group_memberships gm_s\nCROSS JOIN LATERAL "
        f"(SELECT {CANDIDATE} FROM messages m\n"
        f"WHERE {_and(['m.group_id = gm_s.group_id', *since])}\n"
        f"ORDER BY {ORDER} LIMIT {k}) x\n"
        "WHERE gm_s.user_id = $2 AND gm_s.community_id = $1)"
    )


def _home_others(parts: _Parts, k: str, *, copies: bool = False) -> list[tuple[str, bool]]:
    """Home's sources besides the viewer's groups, each with whether it comes out in page
    order: the people they follow (one walk of (user_id, last_interacted_at, id) per person),
    their own messages, their recipient rows and the announcements; every row checked against
    READABLE and the filters."""
    where = _filters(parts, with_stream=False)
    filled, unfilled = _rows_walk(
        "message_recipients", "r_s", "r_s.user_id = $2", where, k, copies=copies)
    return [
        ("(SELECT x.id, x.last_interacted_at FROM follows f_s\nCROSS JOIN LATERAL "
         f"{_walk(['m.user_id = f_s.followed_id'], where, k)} x\n"
         "WHERE f_s.follower_id = $2 AND f_s.community_id = $1)", False),
        (_walk(["m.user_id = $2"], where, k), True),
        (filled, copies),
        (unfilled, False),
        (_walk(["m.is_announcement"], where, k), True),
    ]


def _sources(parts: _Parts, k: str) -> list[str]:
    """Candidate sources whose union holds the first k rows of the page (in page order).

    The most selective narrowing drives (topic, author, external system, group), with every
    other condition applied as a filter while walking its index; otherwise the stream's own
    sources: Home is the union of the viewer's groups, the people they follow, their own
    messages, their recipient rows and announcements.
    """
    if parts.topic is not None:
        topic_id = (
            f"(SELECT t.id FROM topics t WHERE t.community_id = $1 AND t.name = {parts.topic})"
        )
        return _rows_walk("message_topics", "mt_s", f"mt_s.topic_id = {topic_id}",
                          _filters(parts, with_topic=False), k)
    where = _filters(parts)
    if parts.author is not None:
        return [_walk([f"m.user_id = {parts.author}"], where, k)]
    if parts.external_system is not None:
        return [_walk([f"m.external_system_id = {parts.external_system}"], where, k)]
    if parts.group is not None:
        return [_walk([f"m.group_id = {parts.group}"], where, k)]
    if parts.stream == "home" and parts.home_slots is not None:
        return [_home_merge(parts, parts.home_slots, k)]
    if parts.stream == "home":
        return [_home_groups_lateral(parts, k), *(s for s, _ in _home_others(parts, k))]
    if parts.stream == "mentions":
        return _rows_walk("message_recipients", "r_s", "r_s.user_id = $2", where, k)
    if parts.stream == "bookmarked":
        # a user's bookmarks: as many as they flagged, whatever the community's size
        source = "flags f_s JOIN messages m ON m.id = f_s.message_id " \
            "LEFT JOIN groups g ON g.id = m.group_id"
        return [_walk(["f_s.user_id = $2"], where, k, source)]
    if parts.stream == "sent":
        return [_walk(["m.user_id = $2"], where, k)]
    # Company (or everything readable): the community's (community_id, last_interacted_at, id)
    return [_walk([], where, k)]


def _union(sources: list[str]) -> str:
    return "\nUNION\n".join(sources)


def latest_sql(stream: str | None = None, group: str | None = None) -> str:
    """The newest last_interacted_at of a stream (SQL over $1..$3; `group` an SQL expression)."""
    parts = _Parts(stream, group, None, None, None, None)
    return f"(SELECT max(c.last_interacted_at) FROM ({_union(_sources(parts, '1'))}) c)"


@dataclass(frozen=True)
class MessageQuery:
    """What a message list selects (on top of READABLE), built into one SQL statement.

    `stream` is a system stream kind (STREAM_KINDS) or None; `group_id` a group's stream;
    `topic` a lower-case topic name used anywhere in the thread; `search` full-text search
    (websearch syntax; results ranked); `since` keeps what was interacted with after it;
    `sticky_first` puts sticky announcements first (Home, Company).

    Pages are read as an indexed union (docs/feed.md): each source yields its first
    offset + limit rows through an index in page order, and only their union is sorted. The
    sticky announcements, few, are read apart, so that the page needs no sort by `sticky`.
    """

    stream: str | None = None
    group_id: int | None = None
    author_id: int | None = None
    external_system_id: int | None = None
    topic: str | None = None
    since: datetime | None = None
    search: str | None = None
    sticky_first: bool = False

    @property
    def merges_home(self) -> bool:
        """Whether the page is Home's own union (then `build` wants the viewer's groups)."""
        return (self.stream == "home" and self.search is None and self.group_id is None
                and self.author_id is None and self.external_system_id is None
                and self.topic is None)

    def build(
        self, offset: int, limit: int, home_groups: int | None = None
    ) -> tuple[str, list[Any]]:
        """The page's SQL and its arguments after $1..$3. For Home (`merges_home`),
        `home_groups` is how many groups the viewer is in (`home_group_count()`): each becomes
        a branch of a k-way merge; without it, k rows of each group are read and sorted."""
        args: list[Any] = []

        def param(value: Any) -> str:
            args.append(value)
            return f"${len(args) + 3}"

        def optional(value: Any) -> str | None:
            return None if value is None else param(value)

        slots = None
        if home_groups is not None and self.merges_home \
                and _merges(home_groups, offset + limit):
            slots = _slots(home_groups)
        parts = _Parts(
            self.stream, optional(self.group_id), optional(self.author_id),
            optional(self.external_system_id), optional(self.topic), optional(self.since),
            slots,
        )
        if self.search is not None:
            return self._build_search(parts, param, offset, limit), args
        k = param(offset + limit)
        candidates = _union(_sources(parts, k))
        if self.sticky_first:
            # Sticky announcements (a handful, through messages_announcement_idx) first; the
            # rest of the page comes from the candidates that are not sticky.
            sticky = (
                f"SELECT m.id, m.last_interacted_at FROM {FROM}\nWHERE "
                + _and(["m.is_announcement", "m.sticky_until > now()", *_filters(parts)])
            )
            ranked = (
                f"SELECT s.id, s.last_interacted_at, true AS sticky FROM sticky s\nUNION ALL\n"
                f"SELECT c.id, c.last_interacted_at, false FROM ({candidates}) c\n"
                "WHERE c.id NOT IN (SELECT id FROM sticky)"
            )
            head = f"WITH sticky AS MATERIALIZED ({sticky}),\n"
            order = "p.sticky DESC, p.last_interacted_at DESC, p.id DESC"
        else:
            ranked = f"SELECT c.id, c.last_interacted_at, false AS sticky FROM ({candidates}) c"
            head = "WITH "
            order = "p.last_interacted_at DESC, p.id DESC"
        sql = (
            f"{head}page AS (\nSELECT p.* FROM ({ranked}) p\nORDER BY {order}\n"
            f"OFFSET {param(offset)} LIMIT {param(limit)})\n"
            f"SELECT {ROW}, {PAGE_EXTRAS} FROM page p JOIN messages m ON m.id = p.id\n"
            f"LEFT JOIN groups g ON g.id = m.group_id{PAGE_EXTRAS_JOIN}ORDER BY {order}"
        )
        return sql, args

    def _build_search(
        self, parts: _Parts, param: Any, offset: int, limit: int
    ) -> str:
        """Search: ranked by relevance, so read through the GIN index and sorted by rank."""
        where = _filters(parts)
        query = f"websearch_to_tsquery('english', {param(self.search)})"
        where.append(f"m.search_vector @@ {query}")
        order = ["rank DESC", "m.last_interacted_at DESC", "m.id DESC"]
        if self.sticky_first:
            order.insert(0, "sticky DESC")
        return (
            f"SELECT {ROW}, ts_rank_cd(m.search_vector, {query}) AS rank FROM {FROM}\nWHERE "
            + _and(where)
            + f"\nORDER BY {', '.join(order)}\nOFFSET {param(offset)} LIMIT {param(limit)}"
        )


async def home_group_count(conn: Conn, community_id: int, viewer_id: int) -> int:
    """How many groups the viewer is in: the branches of a Home page's merge."""
    count: int = await conn.fetchval(HOME_GROUP_COUNT, community_id, viewer_id)
    return count


async def list_page(
    conn: Conn,
    community_id: int,
    viewer_id: int,
    external: bool,
    query: MessageQuery,
    *,
    offset: int,
    limit: int,
    home_groups: int | None = None,
) -> list[MessageRow]:
    """A page of `query`. `home_groups`: the viewer's count of groups when the caller has just
    read it (`home_group_count`, or a statement that also answers it); a Home page reads it
    otherwise."""
    groups = home_groups
    if groups is None and query.merges_home:
        groups = await home_group_count(conn, community_id, viewer_id)
    sql, args = query.build(offset, limit, groups)
    return cast("list[MessageRow]", await conn.fetch(sql, community_id, viewer_id, external, *args))


async def by_id(
    conn: Conn, community_id: int, viewer_id: int, external: bool, message_id: int
) -> ReadableMessageRow | None:
    """The message row plus `readable` for this viewer; None when not in the community."""
    return cast("ReadableMessageRow | None", await conn.fetchrow(
        BY_ID, community_id, viewer_id, external, message_id,
    ))


async def readable_by_ids(
    conn: Conn, community_id: int, viewer_id: int, external: bool, ids: Sequence[int]
) -> list[MessageRow]:
    if not ids:
        return []
    return cast("list[MessageRow]", await conn.fetch(
        BY_IDS_READABLE, community_id, viewer_id, external, list(ids),
    ))


async def insert(
    conn: asyncpg.Connection,
    community_id: int,
    *,
    user_id: int,
    group_id: int | None,
    external_system_id: int | None,
    title: str,
    body: str,
    html_body: str,
    action: str,
    verb: str | None,
    message_type: str,
    external_url: str | None,
    source: str | None,
    is_announcement: bool,
    days_of_stickiness: int,
    shared_message_id: int | None,
    client_provided_guid: str | None,
    external_resource_ids: Sequence[int],
    extensions: list[Any],
    recipients: Sequence[Recipient] = (),
    topic_names: Sequence[str] = (),
) -> NewMessageRow:
    """A new message with its recipients (as add_recipients adds them) and its topics (upserted
    by name as topics.upsert does), in one statement; its
    row as `by_id` reads it for its author (`user_id`), without `readable`, plus `tag_names`
    (sorted as topics.of_messages sorts)."""
    row = await conn.fetchrow(
        INSERT_FULL, community_id, user_id, group_id, external_system_id, title, body, html_body,
        action, verb, message_type, external_url, source, is_announcement, days_of_stickiness,
        shared_message_id, client_provided_guid, list(external_resource_ids), extensions,
        *recipient_arrays(recipients), topics.distinct_names(topic_names),
    )
    assert row is not None
    return cast("NewMessageRow", row)


async def update_content(
    conn: asyncpg.Connection,
    community_id: int,
    message_id: int,
    *,
    title: str,
    body: str,
    html_body: str,
    external_url: str | None,
    external_resource_ids: Sequence[int],
) -> None:
    await conn.execute(
        UPDATE_CONTENT, community_id, message_id, title, body, html_body, external_url,
        list(external_resource_ids),
    )


async def delete(conn: asyncpg.Connection, community_id: int, message_id: int) -> bool:
    return bool((await conn.execute(DELETE, community_id, message_id)).endswith(" 1"))


# Position bases: the group first, then the body's mentions, then the addressed recipients.
POSITION_BASE = {"group": 0, "mention": 1000, "addressed": 100000}


@dataclass(frozen=True)
class Recipient:
    user_id: int | None = None
    group_id: int | None = None
    reason: str = "mention"


async def add_recipients(
    conn: asyncpg.Connection,
    community_id: int,
    message_id: int,
    recipients: Sequence[Recipient],
    comment_id: int | None = None,
) -> None:
    """Add recipients in order (duplicates of one already there are skipped)."""
    if not recipients:
        return
    await conn.execute(
        INSERT_RECIPIENTS, community_id, message_id, comment_id, *recipient_arrays(recipients)
    )


def recipient_arrays(recipients: Sequence[Recipient]) -> tuple[list[Any], ...]:
    """User ids, group ids, reasons and positions: the aligned arrays of INSERT_RECIPIENTS."""
    return (
        [r.user_id for r in recipients], [r.group_id for r in recipients],
        [r.reason for r in recipients],
        [POSITION_BASE[r.reason] + i for i, r in enumerate(recipients)],
    )


def stored_recipients(recipients: Sequence[Recipient]) -> list[dict[str, int | None]]:
    """What `recipients` reads back right after these were added to a new message: in order,
    a repeated user or group once (the unique key skips it)."""
    out: dict[tuple[int | None, int | None], dict[str, int | None]] = {}
    for r in recipients:
        out.setdefault((r.user_id, r.group_id), {"user_id": r.user_id, "group_id": r.group_id})
    return list(out.values())


async def clear_message_mentions(conn: asyncpg.Connection, message_id: int) -> None:
    await conn.execute(DELETE_MESSAGE_MENTIONS, message_id)


async def clear_comment_recipients(conn: asyncpg.Connection, comment_id: int) -> None:
    await conn.execute(DELETE_COMMENT_RECIPIENTS, comment_id)


async def recipients(conn: Conn, message_ids: Sequence[int]) -> list[asyncpg.Record]:
    """Message-level recipients of these messages, in order."""
    return await conn.fetch(RECIPIENTS, list(message_ids))


def has_extras(row: asyncpg.Record) -> bool:
    """Whether a message row carries its EXTRAS columns and its group's (a page's rows do:
    PAGE_EXTRAS)."""
    return "has_attachments" in row


def page_group(row: asyncpg.Record) -> FeedGroupRow:
    """The GROUPS row of the group of a message row that `has_extras` (and a group)."""
    return {
        "id": row["group_id"], "name": row["group_name"], "groupname": row["group_groupname"],
        "permission": row["group_permission"], "chat_enabled": row["group_chat_enabled"],
        "post_enabled": row["group_post_enabled"], "avatar_id": row["group_avatar_id"],
        "state": row["group_state"], "viewer_role": row["viewer_group_role"],
        "listed": row["group_listed"],
    }


async def extras(conn: Conn, message_ids: Sequence[int]) -> list[MessageExtrasRow]:
    """EXTRAS of these messages (a row for each that has any)."""
    if not message_ids:
        return []
    return cast("list[MessageExtrasRow]", await conn.fetch(EXTRAS, list(message_ids)))


async def comment_recipients(
    conn: Conn, message_ids: Sequence[int], comment_ids: Sequence[int]
) -> list[asyncpg.Record]:
    """Recipients of these comments (of these messages), in order."""
    if not comment_ids:
        return []
    return await conn.fetch(COMMENT_RECIPIENTS, list(set(message_ids)), list(comment_ids))


async def groups(
    conn: Conn, community_id: int, viewer_id: int, external: bool, group_ids: Sequence[int]
) -> list[asyncpg.Record]:
    """Short group rows plus the viewer's role in each and whether they may see it."""
    if not group_ids:
        return []
    return await conn.fetch(GROUPS, community_id, viewer_id, external, list(group_ids))


async def group_for_posting(
    conn: Conn, community_id: int, viewer_id: int, external: bool, group_id: int
) -> asyncpg.Record | None:
    return await conn.fetchrow(GROUP_FOR_POSTING, community_id, viewer_id, external, group_id)


async def mentionable_users(
    conn: Conn, community_id: int, names: Sequence[str]
) -> list[asyncpg.Record]:
    if not names:
        return []
    return await conn.fetch(MENTIONABLE_USERS, community_id, [n.lower() for n in names])


@dataclass(frozen=True, slots=True)
class Mentionable:
    """What @names may mean (each row with `id` and `name`; a user's has its BASIC columns),
    and, when asked for, the community's blocked words."""

    users: list[MentionableUserRow]
    groups: list[asyncpg.Record]
    words: list[str]


async def mentionable(
    conn: Conn, community_id: int, viewer_id: int, external: bool, names: Sequence[str],
    *, words: bool = False,
) -> Mentionable:
    """The users and readable groups @names may mean (MENTIONABLE), with the blocked words
    (content_filters.words) when `words`, in one query."""
    if not names and not words:
        return Mentionable([], [], [])
    rows = await conn.fetch(
        BODY_LOOKUP if words else MENTIONABLE,
        community_id, viewer_id, external, [n.lower() for n in names],
    )
    return Mentionable(
        cast("list[MentionableUserRow]", [r for r in rows if r["kind"] == "user"]),
        [r for r in rows if r["kind"] == "group"],
        [r["name"] for r in rows if r["kind"] == "word"],
    )


async def upsert_resources(
    conn: asyncpg.Connection, community_id: int, urls: Sequence[str]
) -> list[int]:
    """Ids of the external resources of these URLs (created when new), in the URLs' order."""
    distinct = list(dict.fromkeys(urls))
    if not distinct:
        return []
    rows = await conn.fetch(UPSERT_RESOURCES, community_id, distinct)
    ids = {r["url"]: r["id"] for r in rows}
    return [ids[u] for u in distinct]


async def resources(
    conn: Conn, community_id: int, ids: Sequence[int]
) -> list[asyncpg.Record]:
    if not ids:
        return []
    return await conn.fetch(RESOURCES, community_id, list(ids))


async def hide(
    conn: asyncpg.Connection, community_id: int, group_id: int, message_id: int, user_id: int
) -> None:
    await conn.execute(HIDE, community_id, group_id, message_id, user_id)
