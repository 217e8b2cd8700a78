"""Reconnect-storm clients for bench/fanout_storm.py: one process opens many websockets at once.

The parent sends ("storm", targets, expect, start_at, concurrency): at `start_at` (the
monotonic clock, shared by every process on the machine) the process opens every target, at
most `concurrency` handshakes in flight, and a socket is *ready* once it has the welcome frame
and then `expect` more text frames (its replay). It answers ("stormed", ready, errors, last,
max_event_id): `last` is the monotonic time the last socket became ready, `max_event_id` the
highest `last_event_id` of the welcomes. ("close",) aborts every socket; ("quit",) ends.
"""

from __future__ import annotations

import asyncio
import re
import resource
import time
from multiprocessing.connection import Connection
from typing import Any

from fanout_client import Target, masked_frame

WELCOME = b'"type":"welcome"'
LAST_EVENT_ID = re.compile(rb'"last_event_id":"?(\d+)')


class Socket(asyncio.Protocol):
    __slots__ = ("buf", "expect", "frames", "ready", "request", "transport", "upgraded",
                 "welcome_id", "welcomed")

    def __init__(self, target: Target, expect: int, ready: asyncio.Future[float]) -> None:
        self.request = target.request()
        self.expect = expect
        self.ready = ready
        self.buf = bytearray()
        self.upgraded = False
        self.welcomed = False
        self.frames = 0
        self.welcome_id = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.request)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            self.ready.set_exception(ConnectionError(f"closed before ready: {exc}"))

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        if not self.upgraded:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            status = bytes(buf[: buf.find(b"\r\n")])
            if b" 101 " not in status:
                if not self.ready.done():
                    self.ready.set_exception(ConnectionError(status.decode(errors="replace")))
                assert self.transport is not None
                self.transport.close()
                return
            del buf[: end + 4]
            self.upgraded = True
        pos, size = 0, len(buf)
        while size - pos >= 2:
            b0, b1 = buf[pos], buf[pos + 1]
            length, header = b1 & 0x7F, 2
            if length == 126:
                if size - pos < 4:
                    break
                length, header = int.from_bytes(buf[pos + 2: pos + 4], "big"), 4
            elif length == 127:
                if size - pos < 10:
                    break
                length, header = int.from_bytes(buf[pos + 2: pos + 10], "big"), 10
            start, end = pos + header, pos + header + length
            if end > size:
                break
            opcode = b0 & 0x0F
            if opcode == 1:
                self.text(bytes(buf[start:end]))
            elif opcode == 9 and self.transport is not None:  # ping
                self.transport.write(masked_frame(10, bytes(buf[start:end])))
            elif opcode == 8 and self.transport is not None:
                self.transport.close()
            pos = end
        if pos:
            del buf[:pos]

    def text(self, payload: bytes) -> None:
        if not self.welcomed:
            if WELCOME in payload:
                self.welcomed = True
                found = LAST_EVENT_ID.search(payload)
                self.welcome_id = int(found.group(1)) if found else 0
        else:
            self.frames += 1
        if self.welcomed and self.frames >= self.expect and not self.ready.done():
            self.ready.set_result(time.monotonic())


async def storm(
    targets: list[Target], expect: int, start_at: float, concurrency: int,
    sockets: list[Socket],
) -> tuple[int, list[str], float, int]:
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(concurrency)
    errors: list[str] = []
    ready_at: list[float] = []
    await asyncio.sleep(max(0.0, start_at - time.monotonic()))

    async def one(target: Target) -> None:
        async with gate:
            for attempt in range(3):
                ready: asyncio.Future[float] = loop.create_future()
                try:
                    _, protocol = await loop.create_connection(
                        lambda ready=ready: Socket(target, expect, ready),  # type: ignore[misc]
                        target.host, target.port,
                    )
                    sockets.append(protocol)
                    ready_at.append(await asyncio.wait_for(ready, 60))
                    return
                except (OSError, TimeoutError) as exc:
                    if attempt == 2:
                        errors.append(f"{type(exc).__name__}: {exc}")
                    else:
                        await asyncio.sleep(0.2)

    await asyncio.gather(*(one(t) for t in targets))
    max_id = max((s.welcome_id for s in sockets), default=0)
    return len(ready_at), errors[:5], max(ready_at, default=start_at), max_id


def client_main(pipe: Connection) -> None:
    """Entry point of a client process (multiprocessing, spawn)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    async def serve() -> None:
        sockets: list[Socket] = []
        while True:
            command: Any = await asyncio.to_thread(pipe.recv)
            if command[0] == "storm":
                _, targets, expect, start_at, concurrency = command
                pipe.send(("stormed", *await storm(targets, expect, start_at, concurrency,
                                                   sockets)))
            elif command[0] == "close":
                for sock in sockets:
                    if sock.transport is not None:
                        sock.transport.abort()
                sockets.clear()
                await asyncio.sleep(0.2)
                pipe.send(("closed",))
            else:
                pipe.send(("quit",))
                return

    asyncio.run(serve())
