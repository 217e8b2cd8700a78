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


def user_channel(user_id: int) -> str:
    return f"user:{user_id}"


def conversation_channel(conversation_id: int) -> str:
    return f"conversation:{conversation_id}"


def group_channel(group_id: int) -> str:
    return f"group:{group_id}"


def channel_names(ids: store.ChannelIds) -> list[str]:
    """The names of a user's conversation and group channels."""
    return ([conversation_channel(i) for i in ids.conversation_ids]
            + [group_channel(i) for i in ids.group_ids])

