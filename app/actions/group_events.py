"""What a change of group membership tells others, appended in the changing transaction and
published after commit: the members' live sockets (un)subscribe the group's chat channel, and
people added by someone else get a `groups` notification.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from app.actions.notifications import notify_group_membership
from app.context import Viewer
from realtime.events import Event, NewEvent, control_event
from realtime.hub import Hub
from storage import events as event_store


def group_channel(group_id: int) -> str:
    return f"group:{group_id}"


async def membership_events(
    conn: asyncpg.Connection,
    viewer: Viewer,
    group_id: int,
    *,
    joined: Sequence[int] = (),
    left: Sequence[int] = (),
    notify: Sequence[int] = (),
    approved: bool = False,
) -> list[Event]:
    """Append the events of a membership change; call it as the transaction's last step."""
    channel = group_channel(group_id)
    events: list[NewEvent] = [control_event(uid, subscribe=[channel]) for uid in joined]
    events += [control_event(uid, unsubscribe=[channel]) for uid in left]
    others = [uid for uid in notify if uid != viewer.id]
    if others:
        events += await notify_group_membership(conn, viewer, group_id, others,
                                                approved=approved)
    if not events:
        return []
    return await event_store.append_events(conn, viewer.community_id, events)


async def publish(hub: Hub | None, events: Sequence[Event]) -> None:
    """After commit. Without a hub the events are only stored: sockets catch up from
    PostgreSQL."""
    if hub is not None and events:
        await hub.publish(events)
