"""Helpers for the realtime websocket tests: open GET /api/realtime as a member, read frames."""

from __future__ import annotations

import base64
from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient

from tests.support import PASSWORD, Member

Frame = dict[str, Any]


def basic_headers(member: Member) -> dict[str, str]:
    """The Host of the member's community and their Basic credentials."""
    token = base64.b64encode(f"{member.email}:{PASSWORD}".encode()).decode()
    return {"Host": member.community.domain, "Authorization": f"Basic {token}"}


async def open_socket(
    member: Member,
    *,
    since: int | str | None = None,
    headers: dict[str, str] | None = None,
    client: TestClient | None = None,
) -> tuple[aiohttp.ClientWebSocketResponse, Frame]:
    """Connect as `member` (Basic auth) and read the welcome frame."""
    path = "/api/realtime" if since is None else f"/api/realtime?since={since}"
    http = client or member.api.client
    ws = await http.ws_connect(path, headers={**basic_headers(member), **(headers or {})})
    welcome = await next_frame(ws)
    assert welcome["type"] == "welcome", welcome
    return ws, welcome


async def next_frame(ws: aiohttp.ClientWebSocketResponse, within: float = 5) -> Frame:
    message = await ws.receive(timeout=within)
    assert message.type is aiohttp.WSMsgType.TEXT, message
    frame: Frame = message.json()
    return frame


async def next_event(ws: aiohttp.ClientWebSocketResponse, within: float = 5) -> Frame:
    frame = await next_frame(ws, within)
    assert frame["type"] == "event", frame
    return frame


async def next_events(ws: aiohttp.ClientWebSocketResponse, count: int) -> list[Frame]:
    return [await next_event(ws) for _ in range(count)]


def names(frames: list[Frame]) -> list[tuple[str, str]]:
    return [(f["channel"], f["event"]) for f in frames]


async def read_until_closed(
    ws: aiohttp.ClientWebSocketResponse, within: float = 10
) -> tuple[list[Frame], aiohttp.WSMessage]:
    """Every frame until the server closes the socket, and the closing message."""
    frames: list[Frame] = []
    while True:
        message = await ws.receive(timeout=within)
        if message.type is not aiohttp.WSMsgType.TEXT:
            return frames, message
        frames.append(message.json())
