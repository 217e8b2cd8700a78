"""The realtime channels a user may read, besides their own `user:<id>`.

`conversation:<id>` for every conversation they currently belong to (not left), and
`group:<id>` for every group they are a member of. Groups are listed whatever their chat
setting: a group's membership is what app/actions/group_events.py subscribes and unsubscribes
live, and turning a group's chat on later sends no subscription change, so a socket must
already hold the channel of every group it belongs to. A group without chat simply carries no
events on it.

The names match `app.actions.remarks.conversation_channel` and
`app.actions.group_events.group_channel` (storage never imports app; a test checks they agree).
"""

from __future__ import annotations

from collections.abc import Sequence

from storage.db import Conn

CHANNELS_OF_USER = """
SELECT 'conversation:' || conversation_id AS channel FROM conversation_members
WHERE user_id = $2 AND community_id = $1 AND left_at IS NULL
UNION ALL
SELECT 'group:' || group_id FROM group_memberships
WHERE user_id = $2 AND community_id = $1
"""


async def channels_of_user(conn: Conn, community_id: int, user_id: int) -> list[str]:
    """Every conversation and group channel of the user, in one query."""
    rows = await conn.fetch(CHANNELS_OF_USER, community_id, user_id)
    return [r["channel"] for r in rows]


# whether each user ($2) is active, and their channels
CHANNELS_IF_ACTIVE_MANY = f"""
SELECT u.id, u.state = 'active' AS active,
       ARRAY({CHANNELS_OF_USER.replace("$2", "u.id")}) AS channels
FROM users u WHERE u.community_id = $1 AND u.id = ANY($2::bigint[])
"""


async def channels_if_active_many(
    conn: Conn, community_id: int, user_ids: Sequence[int]
) -> dict[int, list[str] | None]:
    """`channels_if_active` of each user, in one query (absent: no such user). Many users at
    once: storage/batch.py."""
    rows = await conn.fetch(CHANNELS_IF_ACTIVE_MANY, community_id, list(user_ids))
    return {r["id"]: list(r["channels"]) if r["active"] else None for r in rows}


async def channels_if_active(conn: Conn, community_id: int, user_id: int) -> list[str] | None:
    """`channels_of_user`, or None when the user is no longer active (deactivated after the
    socket authenticated, before it attached: the close event is then already behind it)."""
    return (await channels_if_active_many(conn, community_id, [user_id])).get(user_id)
