"""Migration 0012 on a database that already holds messages: the copies of last_interacted_at
are filled (inline, the tables being small), later comments move them, and group chat read rows
lose their stored counter."""

from __future__ import annotations

import asyncpg

from migrations import apply_on, discover
from tests.migrations.support import old_community

BEFORE = [m for m in discover() if m.name < "0012"]
REST = [m for m in discover() if m.name >= "0012"]


async def test_0012_fills_existing_rows_and_keeps_them_in_step(fresh_database_url: str) -> None:
    conn = await asyncpg.connect(fresh_database_url)
    try:
        await apply_on(conn, BEFORE)
        cid = await old_community(conn)
        uid = await conn.fetchval(
            "INSERT INTO users (community_id, email, username) "
            "VALUES ($1, 'a@old.example', 'alice') RETURNING id", cid)
        mid = await conn.fetchval(
            "INSERT INTO messages (community_id, user_id, body, last_interacted_at) "
            "VALUES ($1, $2, 'hi @alice #old', '2020-01-01') RETURNING id", cid, uid)
        await conn.execute(
            "INSERT INTO message_recipients (community_id, message_id, user_id) "
            "VALUES ($1, $2, $3)", cid, mid, uid)
        tid = await conn.fetchval(
            "INSERT INTO topics (community_id, name) VALUES ($1, 'old') RETURNING id", cid)
        await conn.execute(
            "INSERT INTO message_topics (community_id, message_id, topic_id) "
            "VALUES ($1, $2, $3)", cid, mid, tid)

        await apply_on(conn, REST)

        copies = await conn.fetch(
            "SELECT last_interacted_at FROM message_recipients WHERE message_id = $1 "
            "UNION ALL SELECT last_interacted_at FROM message_topics WHERE message_id = $1", mid)
        assert [str(r[0].date()) for r in copies] == ["2020-01-01", "2020-01-01"]
        await conn.execute(
            "UPDATE messages SET last_interacted_at = '2021-06-01' WHERE id = $1", mid)
        copies = await conn.fetch(
            "SELECT last_interacted_at FROM message_recipients WHERE message_id = $1 "
            "UNION ALL SELECT last_interacted_at FROM message_topics WHERE message_id = $1", mid)
        assert [str(r[0].date()) for r in copies] == ["2021-06-01", "2021-06-01"]
        assert not await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns "
            "WHERE table_name = 'group_chat_reads' AND column_name = 'unread_count')")
    finally:
        await conn.close()
