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

from aiohttp import web

from app.config import Settings
from app.context import viewer_of
from app.errors import BadRequest
from app.presence import REFRESH_SECONDS
from app.resources import hub_of, pool_of, presence_of, settings_of
from realtime.channels import channels_if_active
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


async def realtime(request: web.Request) -> web.StreamResponse:
    viewer = viewer_of(request)
    if not web.WebSocketResponse().can_prepare(request).ok:
        raise BadRequest(
            "GET /api/realtime is a websocket: connect with Upgrade: websocket"
        )
    since = _since(request)
    pool = pool_of(request)
    community_id, user_id = viewer.community_id, viewer.id

    presence = presence_of(request)
    marking: list[asyncio.Task[None]] = []

    async def keep_marked_online() -> None:
        while True:
            await presence.seen(community_id, user_id)
            await asyncio.sleep(REFRESH_SECONDS)

    async def load_channels() -> list[str]:
        # Read after the socket has its place in the event stream: a deactivation committed
        # before is seen here, one committed after arrives as its close event.
        channels = await channels_if_active(pool, community_id, user_id)
        if channels is None:
            raise Refused(CLOSE_DEACTIVATED, "deactivated")
        # online while the socket lives (app.presence), from when it is accepted
        marking.append(asyncio.get_running_loop().create_task(keep_marked_online()))
        return channels

    try:
        return await serve_realtime(
            request,
            hub=hub_of(request),
            pool=pool,
            community_id=community_id,
            user_id=user_id,
            load_channels=load_channels,
            since=since,
            settings=realtime_settings(settings_of(request)),
        )
    finally:
        for task in marking:
            task.cancel()
