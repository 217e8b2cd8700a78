"""Every realtime channel name, in one place.

A client reads its own `user:<id>`, `conversation:<id>` for every conversation it belongs to
(not left) and `group:<id>` for every group it is a member of. Groups are listed whatever their
chat setting: a group's membership is what app/actions/group_events.py subscribes and
unsubscribes live, and turning a group's chat on later sends no subscription change, so a
socket must already hold the channel of every group it belongs to (a group without chat simply
carries no events on it).

Storage hands out ids only (storage/realtime_channels.py); the names are built here.
"""

from __future__ import annotations

from storage import realtime_channels as store
from storage.db import Conn


def user_channel(user_id: int) -> str:
    return f"user:{user_id}"


def conversation_channel(conversation_id: int) -> str:
    return f"conversation:{conversation_id}"


def group_channel(group_id: int) -> str:
    return f"group:{group_id}"


def _names(ids: store.ChannelIds) -> list[str]:
    return ([conversation_channel(i) for i in ids.conversation_ids]
            + [group_channel(i) for i in ids.group_ids])


async def channels_of_user(conn: Conn, community_id: int, user_id: int) -> list[str]:
    """Every conversation and group channel of the user, in one query."""
    return _names(await store.channel_ids_of_user(conn, community_id, user_id))


async def channels_if_active(conn: Conn, community_id: int, user_id: int) -> list[str] | None:
    """`channels_of_user`, or None when the user is no longer active (deactivated after the
    socket authenticated, before it attached: the close event is then already behind it)."""
    ids = await store.channel_ids_if_active(conn, community_id, user_id)
    return None if ids is None else _names(ids)
