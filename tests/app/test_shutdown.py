"""`commons serve --workers N` stops as a whole (issue 8 defect 9), with real processes: SIGTERM
or SIGINT to the first process stops every worker; each stops accepting, finishes the request
it is serving, closes its websockets with 1001, and nothing is left listening."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from app.config import Settings
from tests.app.test_multiprocess import (
    START_TIMEOUT,
    ServerProcess,
    _children,
    connect,
    headers,
    http,  # noqa: F401 - a fixture
    spawn,  # noqa: F401 - a fixture
)
from tests.support import World


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _alive(pid)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def _slow_body(seconds: float) -> AsyncIterator[bytes]:
    """A multipart upload whose last bytes come `seconds` after the first."""
    yield (b"--b\r\nContent-Disposition: form-data; name=\"attachment\"; filename=\"a.txt\""
           b"\r\nContent-Type: text/plain\r\n\r\nhello ")
    await asyncio.sleep(seconds)
    yield b"world\r\n--b--\r\n"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_to_serve_stops_every_worker_after_draining(
    world: World, spawn: Any, http: aiohttp.ClientSession, signum: int  # noqa: F811
) -> None:
    ann = await world.community("Acme")
    server = spawn("--workers", "2")
    async with asyncio.timeout(START_TIMEOUT + 60):
        await server.wait_until_up(http)
        workers = _children(server.process.pid)
        assert len(workers) >= 2
        sockets = [await connect(http, server, ann) for _ in range(6)]

        # An upload still arriving when the signal comes is finished, not cut.
        upload = asyncio.create_task(http.post(
            f"{server.base}/api/attachments", data=_slow_body(2.0),
            headers={**headers(ann), "Content-Type": "multipart/form-data; boundary=b"},
        ))
        await asyncio.sleep(0.5)
        os.kill(server.process.pid, signum)  # the first process only, as an init system does

        for ws in sockets:
            message = await ws.receive(timeout=15)
            assert message.type == aiohttp.WSMsgType.CLOSE, message
            # the code in the server's close frame (close_code may say 1006 when the server
            # has hung up before the client's reply went out)
            assert message.data == aiohttp.WSCloseCode.GOING_AWAY, server.tail()
        try:
            resp = await upload
        except aiohttp.ClientError as exc:
            pytest.fail(f"the upload was cut ({exc!r}):\n{server.tail()}")
        assert resp.status == 201, await resp.text()
        resp.release()

        assert await asyncio.to_thread(server.process.wait, 30) == 0, server.tail()
        for pid in workers:
            assert await asyncio.to_thread(_gone, pid, 10), f"worker {pid} outlived serve"
        assert not _listening(server.port)


async def test_a_request_outlasting_the_shutdown_timeout_is_cut(
    world: World, settings: Settings, tmp_path: Path, http: aiohttp.ClientSession,  # noqa: F811
) -> None:
    """The drain is bounded: an upload that would take a minute more is cut once
    COMMONS_SHUTDOWN_TIMEOUT has passed, and the process exits rather than waiting for it."""
    ann = await world.community("Acme")
    server = ServerProcess(settings, tmp_path / "data", extra_env={
        "COMMONS_SHUTDOWN_TIMEOUT": "2", "COMMONS_LOG_LEVEL": "INFO"})
    try:
        async with asyncio.timeout(START_TIMEOUT + 60):
            await server.wait_until_up(http)
            upload = asyncio.create_task(http.post(
                f"{server.base}/api/attachments", data=_slow_body(60.0),
                headers={**headers(ann), "Content-Type": "multipart/form-data; boundary=b"},
            ))
            await asyncio.sleep(0.5)
            began = time.monotonic()
            os.kill(server.process.pid, signal.SIGTERM)
            with pytest.raises(aiohttp.ClientError):
                resp = await upload
                pytest.fail(f"the upload was answered {resp.status}:\n{server.tail()}")
            code = await asyncio.to_thread(server.process.wait, 30)
            took = time.monotonic() - began
        assert code == 0, server.tail()
        assert 2 <= took < 30, took  # it waited for the drain, not for the upload
        assert "drain: requests still in progress after 2.0 s are cut" in server.tail()
        assert not _listening(server.port)
    finally:
        server.stop()
