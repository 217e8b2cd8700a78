"""What a change of group membership tells others, emitted into the changing unit of work: the
members' live sockets (un)subscribe the group's chat channel, and people added by someone else
get a `groups` notification (with its push jobs).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.actions.notifications import notify_group_membership
from app.actions.work import Emitted, Work
from app.context import Viewer
from realtime.channels import group_channel
from realtime.events import control_event


async def membership_events(
    w: Work,
    viewer: Viewer,
    group_id: int,
    *,
    joined: Sequence[int] = (),
    left: Sequence[int] = (),
    notify: Sequence[int] = (),
    approved: bool = False,
) -> None:
    """Emit the events of a membership change (and write its notifications)."""
    channel = group_channel(group_id)
    events: list[Emitted] = [control_event(uid, subscribe=[channel]) for uid in joined]
    events += [control_event(uid, unsubscribe=[channel]) for uid in left]
    others = [uid for uid in notify if uid != viewer.id]
    if others:
        events += await notify_group_membership(w.conn, viewer, group_id, others,
                                                approved=approved)
    w.emit(*events)
