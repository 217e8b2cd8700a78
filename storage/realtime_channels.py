"""What a user's realtime channels are made of: the conversations they belong to (not left)
and the groups they are a member of. Ids only: realtime/channels.py owns the channel names
(storage never imports realtime)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from storage.db import Conn


class ChannelIds(NamedTuple):
    conversation_ids: list[int]
    group_ids: list[int]


# whether each user ($2) is active, and their channel ids
CHANNEL_IDS_IF_ACTIVE_MANY = """
SELECT u.id, u.state = 'active' AS active,
       ARRAY(SELECT conversation_id FROM conversation_members
             WHERE user_id = u.id AND community_id = $1 AND left_at IS NULL) AS conversation_ids,
       ARRAY(SELECT group_id FROM group_memberships
             WHERE user_id = u.id AND community_id = $1) AS group_ids
FROM users u WHERE u.community_id = $1 AND u.id = ANY($2::bigint[])
"""


async def channel_ids_if_active_many(
    conn: Conn, community_id: int, user_ids: Sequence[int]
) -> dict[int, ChannelIds | None]:
    """`channel_ids_if_active` of each user, in one query (absent: no such user). Many users
    at once: storage/batch.py."""
    rows = await conn.fetch(CHANNEL_IDS_IF_ACTIVE_MANY, community_id, list(user_ids))
    return {r["id"]: ChannelIds(list(r["conversation_ids"]), list(r["group_ids"]))
            if r["active"] else None for r in rows}


async def channel_ids_if_active(conn: Conn, community_id: int, user_id: int) -> ChannelIds | None:
    """The user's conversation and group ids, in one query, or None when the user is not (or
    no longer) an active user of the community."""
    return (await channel_ids_if_active_many(conn, community_id, [user_id])).get(user_id)
