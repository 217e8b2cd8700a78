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


CHANNELS_IF_ACTIVE = f"""
SELECT u.state = 'active' AS active, ARRAY({CHANNELS_OF_USER}) AS channels
FROM users u WHERE u.community_id = $1 AND u.id = $2
"""


async def channels_if_active(conn: Conn, community_id: int, user_id: int) -> list[str] | None:
    """`channels_of_user`, or None when the user is no longer active (deactivated after the
    socket authenticated, before it attached: the close event is then already behind it)."""
    row = await conn.fetchrow(CHANNELS_IF_ACTIVE, community_id, user_id)
    if row is None or not row["active"]:
        return None
    return list(row["channels"])
