"""Attachments: the rows describing uploaded files, and what claimed them.

Who may read an attachment (see app.actions.attachments.can_read_attachment): its uploader,
and whoever may read what claimed it, as answered in SQL by attachment_subject_readable()
(migrations/0004_attachments.sql): an avatar is read by everyone in its community, a message's
by the readers of the message, and other subject types by the readers their own migration's
attachment_readable_<type>() names. An unclaimed upload is read by its uploader only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from storage.db import Conn
from storage.group_visibility import listed_sql, readable_sql

SUBJECT_TYPES = ("message", "comment", "remark", "chat_message", "avatar")

COLUMNS = """
a.id, a.community_id, a.uploader_id, a.filename, a.content_type, a.byte_size, a.storage_key,
a.width, a.height, a.thumbnails, a.subject_type, a.subject_id, a.created_at
"""


def viewer_reads_sql(alias: str, viewer: str, external: str) -> str:
    """SQL: may the viewer ($viewer bigint, $external boolean) read attachment `alias`?"""
    return (
        f"({alias}.uploader_id = {viewer} OR ({alias}.subject_type IS NOT NULL AND "
        f"attachment_subject_readable({alias}.subject_type, {alias}.subject_id, "
        f"{alias}.community_id, {viewer}, {external})))"
    )


INSERT = f"""
INSERT INTO attachments AS a (community_id, uploader_id, filename, content_type, byte_size,
                              storage_key, width, height, subject_type, subject_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
RETURNING {COLUMNS}
"""

BY_ID = f"SELECT {COLUMNS} FROM attachments a WHERE a.community_id = $1 AND a.id = $2"

# $1 community, $2 id, $3 viewer, $4 viewer is external
BY_ID_FOR_VIEWER = f"""
SELECT {COLUMNS}, {viewer_reads_sql("a", "$3", "$4")} AS readable
FROM attachments a WHERE a.community_id = $1 AND a.id = $2
"""

SUBJECT_READABLE = "SELECT attachment_subject_readable($1, $2, $3, $4, $5)"

# GET /api/users/:user_id/attachments: $2 viewer, $3 external, $4 uploader, $5 offset, $6 limit
BY_UPLOADER = f"""
SELECT {COLUMNS} FROM attachments a
WHERE a.community_id = $1 AND a.uploader_id = $4 AND {viewer_reads_sql("a", "$2", "$3")}
ORDER BY a.id DESC
OFFSET $5 LIMIT $6
"""

# A group as the viewer sees it: $1 community, $2 group, $3 viewer, $4 external
GROUP_FOR_VIEWER = f"""
SELECT g.id, {listed_sql("g", "$3", "$4")} AS listed, {readable_sql("g", "$3", "$4")} AS readable
FROM groups g WHERE g.community_id = $1 AND g.id = $2
"""

# GET /api/groups/:group_id/attachments: what the group's messages carry. The caller has
# checked that the viewer reads the group's content. $3 offset, $4 limit.
BY_GROUP = f"""
SELECT {COLUMNS} FROM attachments a
JOIN messages m ON a.subject_type = 'message' AND a.subject_id = m.id
WHERE a.community_id = $1 AND m.community_id = $1 AND m.group_id = $2
ORDER BY a.id DESC
OFFSET $3 LIMIT $4
"""

CLAIM = f"""
UPDATE attachments a SET subject_type = $4, subject_id = $5
WHERE a.community_id = $1 AND a.uploader_id = $2 AND a.id = ANY($3::bigint[])
  AND a.subject_type IS NULL
RETURNING {COLUMNS}
"""

FOR_SUBJECTS = f"""
SELECT {COLUMNS} FROM attachments a
WHERE a.subject_type = $1 AND a.subject_id = ANY($2::bigint[])
ORDER BY a.subject_id, a.id
"""

# The attachments of the messages $1 and of the comments $2 (a page of the feed), at once.
FOR_MESSAGES_AND_COMMENTS = f"""
SELECT {COLUMNS} FROM attachments a
WHERE (a.subject_type = 'message' AND a.subject_id = ANY($1::bigint[]))
   OR (a.subject_type = 'comment' AND a.subject_id = ANY($2::bigint[]))
ORDER BY a.subject_type, a.subject_id, a.id
"""

DELETE = f"DELETE FROM attachments a WHERE a.community_id = $1 AND a.id = $2 RETURNING {COLUMNS}"

DELETE_FOR_SUBJECTS = f"""
DELETE FROM attachments a
WHERE a.community_id = $1 AND a.subject_type = $2 AND a.subject_id = ANY($3::bigint[])
RETURNING {COLUMNS}
"""

# Abandoned uploads: never claimed, older than $1; at most $2 at a time, across communities.
# The outer `subject_type IS NULL` is re-checked against a row claimed meanwhile.
DELETE_UNCLAIMED = f"""
DELETE FROM attachments a
WHERE a.subject_type IS NULL AND a.id IN (
    SELECT u.id FROM attachments u WHERE u.subject_type IS NULL AND u.created_at < $1
    ORDER BY u.created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
RETURNING {COLUMNS}
"""

ADD_THUMBNAILS = """
UPDATE attachments SET thumbnails = thumbnails || $3::jsonb
WHERE community_id = $1 AND id = $2
"""


async def insert(
    conn: Conn,
    community_id: int,
    uploader_id: int,
    *,
    filename: str,
    content_type: str,
    byte_size: int,
    storage_key: str,
    width: int | None = None,
    height: int | None = None,
    subject_type: str | None = None,
    subject_id: int | None = None,
) -> asyncpg.Record:
    row = await conn.fetchrow(
        INSERT, community_id, uploader_id, filename, content_type, byte_size, storage_key,
        width, height, subject_type, subject_id,
    )
    assert row is not None
    return row


async def by_id(conn: Conn, community_id: int, attachment_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(BY_ID, community_id, attachment_id)


async def by_id_for_viewer(
    conn: Conn, community_id: int, attachment_id: int, viewer_id: int, external: bool
) -> asyncpg.Record | None:
    """The row with a `readable` column: may this viewer read it."""
    return await conn.fetchrow(BY_ID_FOR_VIEWER, community_id, attachment_id, viewer_id,
                               external)


async def subject_readable(
    conn: Conn,
    subject_type: str,
    subject_id: int,
    community_id: int,
    viewer_id: int,
    external: bool,
) -> bool:
    return bool(await conn.fetchval(
        SUBJECT_READABLE, subject_type, subject_id, community_id, viewer_id, external
    ))


async def by_uploader(
    conn: Conn,
    community_id: int,
    viewer_id: int,
    external: bool,
    uploader_id: int,
    offset: int,
    limit: int,
) -> list[asyncpg.Record]:
    """The uploader's attachments that the viewer may read, newest first."""
    return await conn.fetch(
        BY_UPLOADER, community_id, viewer_id, external, uploader_id, offset, limit
    )


async def group_for_viewer(
    conn: Conn, community_id: int, group_id: int, viewer_id: int, external: bool
) -> asyncpg.Record | None:
    """(id, listed, readable) of a group for this viewer, or None."""
    return await conn.fetchrow(GROUP_FOR_VIEWER, community_id, group_id, viewer_id, external)


async def by_group(
    conn: Conn, community_id: int, group_id: int, offset: int, limit: int
) -> list[asyncpg.Record]:
    """Attachments of the group's messages, newest first (needs the messages table)."""
    return await conn.fetch(BY_GROUP, community_id, group_id, offset, limit)


async def claim(
    conn: Conn,
    community_id: int,
    uploader_id: int,
    ids: Sequence[int],
    subject_type: str,
    subject_id: int,
) -> list[asyncpg.Record]:
    """Attach the uploader's unclaimed attachments `ids` to a subject; the rows claimed (in the
    order of ids). Others' attachments, claimed ones and unknown ids are left alone: compare
    the count with the ids asked for."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return []
    rows = await conn.fetch(CLAIM, community_id, uploader_id, wanted, subject_type, subject_id)
    order = {attachment_id: i for i, attachment_id in enumerate(wanted)}
    return sorted(rows, key=lambda r: order[r["id"]])


async def for_subjects(
    conn: Conn, subject_type: str, subject_ids: Sequence[int]
) -> dict[int, list[asyncpg.Record]]:
    """The attachments of each subject (oldest first), in one query; subjects without any are
    absent from the result."""
    out: dict[int, list[asyncpg.Record]] = {}
    if not subject_ids:
        return out
    for row in await conn.fetch(FOR_SUBJECTS, subject_type, list(set(subject_ids))):
        out.setdefault(row["subject_id"], []).append(row)
    return out


async def for_messages_and_comments(
    conn: Conn, message_ids: Sequence[int], comment_ids: Sequence[int]
) -> dict[tuple[str, int], list[asyncpg.Record]]:
    """for_subjects of messages and of comments in one query, keyed by (subject type, id)."""
    out: dict[tuple[str, int], list[asyncpg.Record]] = {}
    if not message_ids and not comment_ids:
        return out
    for row in await conn.fetch(
        FOR_MESSAGES_AND_COMMENTS, list(set(message_ids)), list(set(comment_ids))
    ):
        out.setdefault((row["subject_type"], row["subject_id"]), []).append(row)
    return out


async def delete(conn: Conn, community_id: int, attachment_id: int) -> asyncpg.Record | None:
    """Remove the row; returns it (its blobs are the caller's to delete after commit)."""
    return await conn.fetchrow(DELETE, community_id, attachment_id)


async def delete_for_subjects(
    conn: Conn, community_id: int, subject_type: str, subject_ids: Sequence[int]
) -> list[asyncpg.Record]:
    """Remove the attachments of deleted subjects; the rows (delete their blobs after commit
    with app.actions.attachments.delete_blobs)."""
    if not subject_ids:
        return []
    return await conn.fetch(DELETE_FOR_SUBJECTS, community_id, subject_type, list(subject_ids))


async def delete_unclaimed(conn: Conn, before: datetime, limit: int) -> list[asyncpg.Record]:
    """Remove up to `limit` uploads never claimed and created before `before`; the rows."""
    return await conn.fetch(DELETE_UNCLAIMED, before, limit)


async def add_thumbnails(
    conn: Conn, community_id: int, attachment_id: int, thumbnails: Mapping[str, Any]
) -> None:
    await conn.execute(ADD_THUMBNAILS, community_id, attachment_id, dict(thumbnails))


def blob_keys(row: Mapping[str, Any]) -> list[str]:
    """Every blob of an attachment: the original and the thumbnails made so far."""
    keys = [row["storage_key"]]
    keys.extend(t["key"] for t in (row["thumbnails"] or {}).values() if t.get("key"))
    return keys
