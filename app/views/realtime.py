"""GET /api/realtime: the websocket of live events (protocol: spec/decisions.md "Realtime").

The middleware has already resolved the community and authenticated the user (Basic header,
or the session cookie set by POST /api/authentication: browsers cannot put Basic credentials
on a websocket) and counted the request against the rate limit, exactly as for any request.
This view only checks what must be refused before the upgrade (not a websocket, a bad
`since` / `Last-Event-ID`: 400 JSON), then hands the socket to `realtime.websocket`, which
owns everything after the upgrade. The user's channels are read once, with one query, at the
moment the socket asks for them (after it has its position in the event stream).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import cast

from aiohttp import web

from app.config import Settings
from app.context import viewer_of
from app.errors import BadRequest
from app.resources import hub_of, lookups_of, pool_of, presence_of, settings_of
from realtime.channels import channel_names
from realtime.events import CLOSE_DEACTIVATED
from realtime.websocket import (
    RealtimeSettings,
    Refused,
    UnknownSince,
    parse_since,
    serve_realtime,
)


@functools.lru_cache(maxsize=8)
def _realtime_settings(
    heartbeat: float, queue_frames: int, queue_bytes: int
) -> RealtimeSettings:
    # One object shared by every socket of the process (each connection keeps a reference).
    return RealtimeSettings(
        heartbeat=heartbeat, max_queue_frames=queue_frames, max_queue_bytes=queue_bytes
    )


def realtime_settings(settings: Settings) -> RealtimeSettings:
    """The websocket settings the app's configuration asks for."""
    return _realtime_settings(
        float(settings.realtime_heartbeat_seconds), int(settings.realtime_queue_frames),
        int(settings.realtime_queue_bytes),
    )


def _since(request: web.Request) -> int | None:
    try:
        return parse_since(request)
    except UnknownSince:
        raise BadRequest("since (or Last-Event-ID) is not an event id of this server") from None
    except ValueError:
        raise BadRequest(
            "since (or Last-Event-ID) must be an event id: a non-negative integer"
        ) from None


class _Socket:
    """What the view keeps of one socket (a few slots: no closures, no task of its own): its
    channel loader, and its hold on the user's presence (app.presence: online while the socket
    lives, from when it is accepted)."""

    __slots__ = ("_lookups", "_presence", "community_id", "held", "user_id")

    def __init__(self, request: web.Request, community_id: int, user_id: int) -> None:
        self._lookups = lookups_of(request)
        self._presence = presence_of(request)
        self.community_id = community_id
        self.user_id = user_id
        self.held = False

    async def __call__(self) -> list[str]:
        """The socket's ChannelLoader (the object itself: no bound method to keep)."""
        # Read after the socket has its place in the event stream: a deactivation committed
        # before is seen here, one committed after arrives as its close event.
        # batched: the channels of many sockets connecting at once are read in one query
        ids = await self._lookups.channel_ids_if_active(self.community_id, self.user_id)
        if ids is None:
            raise Refused(CLOSE_DEACTIVATED, "deactivated")
        if not self.held:
            self._presence.hold(self.community_id, self.user_id)
            self.held = True
        return channel_names(ids)

    def release(self) -> None:
        if self.held:
            self.held = False
            self._presence.release(self.community_id, self.user_id)


def _frameless(
    view: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """`view`, a plain function that returns the awaitable serving the request, marked as
    aiohttp wants a handler (a coroutine function), so that aiohttp neither warns nor wraps
    it in a coroutine of its own: an idle socket then holds no frame of the view (about 400
    bytes of its memory, issue 13's RSS per idle websocket)."""
    mark = getattr(inspect, "markcoroutinefunction", None)
    if mark is not None:  # Python 3.12 and later
        return cast("Callable[[web.Request], Awaitable[web.StreamResponse]]", mark(view))
    # Python 3.11: what its asyncio.iscoroutinefunction (which aiohttp asks) looks for
    setattr(view, "_is_coroutine", asyncio.coroutines._is_coroutine)  # type: ignore[attr-defined]  # noqa: B010
    return view


@_frameless
def realtime(request: web.Request) -> Awaitable[web.StreamResponse]:
    """Checks what must be refused before the upgrade (raised before anything is awaited,
    so the error layers answer it as any view's), then returns the socket's one coroutine;
    the presence hold is released when it ends, however it ends."""
    viewer = viewer_of(request)
    if not web.WebSocketResponse().can_prepare(request).ok:
        raise BadRequest(
            "GET /api/realtime is a websocket: connect with Upgrade: websocket"
        )
    since = _since(request)
    socket = _Socket(request, viewer.community_id, viewer.id)
    return serve_realtime(
        request,
        hub=hub_of(request),
        pool=pool_of(request),
        community_id=socket.community_id,
        user_id=socket.user_id,
        load_channels=socket,
        since=since,
        settings=realtime_settings(settings_of(request)),
        on_close=socket.release,
    )
