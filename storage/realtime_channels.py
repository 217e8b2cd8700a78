"""What a user's realtime channels are made of: the conversations they belong to (not left)
and the groups they are a member of. Ids only: realtime/channels.py owns the channel names
(storage never imports realtime)."""

from __future__ import annotations

from typing import NamedTuple

from storage.db import Conn


class ChannelIds(NamedTuple):
    conversation_ids: list[int]
    group_ids: list[int]


CHANNEL_IDS = """
ARRAY(SELECT conversation_id FROM conversation_members
      WHERE user_id = $2 AND community_id = $1 AND left_at IS NULL) AS conversation_ids,
ARRAY(SELECT group_id FROM group_memberships
      WHERE user_id = $2 AND community_id = $1) AS group_ids
"""

CHANNEL_IDS_OF_USER = f"SELECT {CHANNEL_IDS}"

CHANNEL_IDS_IF_ACTIVE = f"""
SELECT u.state = 'active' AS active, {CHANNEL_IDS}
FROM users u WHERE u.community_id = $1 AND u.id = $2
"""


async def channel_ids_of_user(conn: Conn, community_id: int, user_id: int) -> ChannelIds:
    """The user's conversation and group ids, in one query."""
    row = await conn.fetchrow(CHANNEL_IDS_OF_USER, community_id, user_id)
    assert row is not None  # a SELECT without FROM always has its row
    return ChannelIds(list(row["conversation_ids"]), list(row["group_ids"]))


async def channel_ids_if_active(conn: Conn, community_id: int, user_id: int) -> ChannelIds | None:
    """`channel_ids_of_user`, or None when the user is not (or no longer) active."""
    row = await conn.fetchrow(CHANNEL_IDS_IF_ACTIVE, community_id, user_id)
    if row is None or not row["active"]:
        return None
    return ChannelIds(list(row["conversation_ids"]), list(row["group_ids"]))
