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

from fanout_client import Stats, Subscriber, Target, connect_until_ready

WELCOME = b'"type":"welcome"'
LAST_EVENT_ID = re.compile(rb'"last_event_id":"?(\d+)')


class Socket(Subscriber):
    """fanout_client's subscriber (its handshake and frame parsing), ready once it has the
    welcome and `expect` more text frames."""

    __slots__ = ("expect", "frames", "ready_at", "welcome_id", "welcomed")

    def __init__(
        self, target: Target, stats: Stats, expect: int, ready: asyncio.Future[None]
    ) -> None:
        super().__init__(target, stats, ready)
        self.expect = expect
        self.welcomed = False
        self.frames = 0
        self.welcome_id = 0
        self.ready_at = 0.0

    def text(self, buf: bytearray, start: int, end: int, now: int) -> None:
        if not self.welcomed:
            payload = bytes(buf[start:end])
            if WELCOME in payload:
                self.welcomed = True
                found = LAST_EVENT_ID.search(payload)
                self.welcome_id = int(found.group(1)) if found else 0
        else:
            self.frames += 1
        if self.welcomed and self.frames >= self.expect and not self.ready.done():
            self.ready_at = time.monotonic()
            self.ready.set_result(None)


async def storm(
    targets: list[Target], expect: int, start_at: float, concurrency: int,
    sockets: list[Socket],
) -> tuple[int, list[str], float, int]:
    gate = asyncio.Semaphore(concurrency)
    stats = Stats()  # what Subscriber counts; unused here
    errors: list[str] = []
    ready_at: list[float] = []
    await asyncio.sleep(max(0.0, start_at - time.monotonic()))

    async def one(target: Target) -> None:
        async with gate:
            # kept from the moment it connects, so that one never ready is closed too
            socket = await connect_until_ready(
                target, lambda ready: Socket(target, stats, expect, ready), errors,
                sockets.append)
            if socket is not None:
                ready_at.append(socket.ready_at)

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
