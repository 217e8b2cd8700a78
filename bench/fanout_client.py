"""Websocket subscribers for bench/fanout.py: one process holds many sockets.

A deliberately small client (an asyncio Protocol per socket, frames parsed by hand) so that
the measuring side costs little CPU: it finds the marker `fnmk.<phase>.<seq>.<ns>.x` in
each text frame (`ns` is the poster's time.monotonic_ns() taken just before the POST; the
monotonic clock is shared by every process on the machine), and counts the latency in a
histogram per phase. It speaks three dialects with the same code: Commons' /api/realtime
(welcome frame, Basic auth), the bare floor (welcome frame) and Socket.IO over engine.io v4
websockets (`0{...}` open, `40` connect, `2`/`3` ping/pong).

The parent drives it through a multiprocessing Pipe: ("connect", stage), ("progress",),
("report", phase), ("close",); every command gets one answer.
"""

from __future__ import annotations

import asyncio
import base64
import os
import resource
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar

BIN_MS = 0.1  # histogram resolution
BINS = 600_000  # up to 60 s
MARKER = b"fnmk."
WELCOME = b'"type":"welcome"'
KEY = base64.b64encode(os.urandom(16))


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    path: str
    headers: dict[str, str]
    dialect: str  # "commons" | "floor" | "socketio"

    def request(self) -> bytes:
        lines = [f"GET {self.path} HTTP/1.1", "Upgrade: websocket", "Connection: Upgrade",
                 f"Sec-WebSocket-Key: {KEY.decode()}", "Sec-WebSocket-Version: 13"]
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()


def masked_frame(opcode: int, payload: bytes) -> bytes:
    """A client frame (masked, with a zero key: the payload stays as is); short payloads."""
    assert len(payload) < 126
    return bytes((0x80 | opcode, 0x80 | len(payload))) + b"\0\0\0\0" + payload


EVENT_PREFIX = b'{"type":"event","id":"'


class Phase:
    __slots__ = ("count", "duplicates", "first", "hist", "last", "out_of_order")

    def __init__(self) -> None:
        self.hist = array("I", bytes(4 * BINS))
        self.count = 0
        self.duplicates = 0  # a remark a socket had already received
        self.out_of_order = 0  # Commons only: an event id not above the socket's previous one
        self.first = 0
        self.last = 0


class Stats:
    def __init__(self) -> None:
        self.phases: dict[bytes, Phase] = {}
        self.closed_by_server = 0
        self.sample: bytes | None = None

    def phase(self, name: bytes) -> Phase:
        phase = self.phases.get(name)
        if phase is None:
            phase = self.phases[name] = Phase()
        return phase


class Subscriber(asyncio.Protocol):
    __slots__ = ("buf", "dialect", "last_id", "phase", "ready", "request", "seen", "stats",
                 "transport", "upgraded")

    def __init__(self, target: Target, stats: Stats, ready: asyncio.Future[None]) -> None:
        self.request = target.request()
        self.dialect = target.dialect
        self.stats = stats
        self.ready = ready
        self.buf = bytearray()
        self.upgraded = False
        self.transport: asyncio.Transport | None = None
        self.phase = b""
        self.seen = bytearray()  # one byte per remark of the current phase
        self.last_id = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.request)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.ready.done():
            self.stats.closed_by_server += 1
        else:
            self.ready.set_exception(ConnectionError(f"closed during the handshake: {exc}"))

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()
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
            start = pos + header
            end = start + length
            if end > size:
                break
            opcode = b0 & 0x0F
            if opcode == 1:
                self.text(buf, start, end, now)
            elif opcode == 9:  # ping
                assert self.transport is not None
                self.transport.write(masked_frame(10, bytes(buf[start:end])))
            elif opcode == 8 and self.transport is not None:
                self.transport.close()
            pos = end
        if pos:
            del buf[:pos]

    def text(self, buf: bytearray, start: int, end: int, now: int) -> None:
        i = buf.find(MARKER, start, end)
        if i >= 0:
            j = buf.find(b".x", i, end)
            phase_name, seq_raw, sent_raw = bytes(buf[i + len(MARKER): j]).split(b".")
            seq, sent = int(seq_raw), int(sent_raw)
            stats = self.stats
            phase = stats.phase(phase_name)
            if phase_name != self.phase:
                self.phase, self.seen = phase_name, bytearray()
            seen = self.seen
            if seq >= len(seen):
                seen.extend(bytes(seq + 64 - len(seen)))
            if seen[seq]:
                phase.duplicates += 1
            seen[seq] = 1
            if self.dialect == "commons":
                k = start + len(EVENT_PREFIX)
                event_id = int(buf[k: buf.find(b'"', k, end)])
                if event_id <= self.last_id:
                    phase.out_of_order += 1
                self.last_id = event_id
            index = int((now - sent) / (BIN_MS * 1e6))
            phase.hist[index if index < BINS else BINS - 1] += 1
            phase.count += 1
            if not phase.first or now < phase.first:
                phase.first = now
            if now > phase.last:
                phase.last = now
            if stats.sample is None:
                stats.sample = bytes(buf[start:end])
            return
        if self.ready.done():
            if self.dialect == "socketio" and end - start == 1 and buf[start] == 0x32:  # "2"
                assert self.transport is not None
                self.transport.write(masked_frame(1, b"3"))
            return
        payload = bytes(buf[start:end])
        if self.dialect == "socketio":
            if payload.startswith(b"0{"):  # engine.io open: connect to the default namespace
                assert self.transport is not None
                self.transport.write(masked_frame(1, b"40"))
            elif payload.startswith(b"40"):
                self.ready.set_result(None)
        elif WELCOME in payload:
            self.ready.set_result(None)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


S = TypeVar("S", bound="Subscriber")


async def connect_until_ready(
    target: Target, make: Callable[[asyncio.Future[None]], S], errors: list[str],
    opened: Callable[[S], None] | None = None,
) -> S | None:
    """One socket made by `make(ready)`, `opened` as soon as it is connected, returned once
    `ready` is set; 3 tries, 0.2 s apart (a full backlog refuses at once); the last failure
    goes into `errors`, and None is returned."""
    loop = asyncio.get_running_loop()
    for attempt in range(3):
        ready: asyncio.Future[None] = loop.create_future()
        try:
            _, protocol = await loop.create_connection(
                lambda ready=ready: make(ready),  # type: ignore[misc]
                target.host, target.port,
            )
            if opened is not None:
                opened(protocol)
            await asyncio.wait_for(ready, 60)
            return protocol
        except (OSError, TimeoutError) as exc:
            if attempt == 2:
                errors.append(f"{type(exc).__name__}: {exc}")
            else:
                await asyncio.sleep(0.2)
    return None


async def _connect_all(
    targets: list[Target], stats: Stats, sockets: list[Subscriber], concurrency: int,
) -> tuple[int, list[str], float]:
    gate = asyncio.Semaphore(concurrency)
    errors: list[str] = []
    began = time.monotonic()

    async def one(target: Target) -> None:
        async with gate:
            socket = await connect_until_ready(
                target, lambda ready: Subscriber(target, stats, ready), errors)
            if socket is not None:
                sockets.append(socket)

    await asyncio.gather(*(one(t) for t in targets))
    return len(sockets), errors[:5], time.monotonic() - began


def _report(stats: Stats, name: str) -> dict[str, Any]:
    phase = stats.phases.get(name.encode())
    if phase is None:
        return {"count": 0, "duplicates": 0, "out_of_order": 0, "first": 0, "last": 0,
                "hist": None}
    return {"count": phase.count, "duplicates": phase.duplicates,
            "out_of_order": phase.out_of_order, "first": phase.first, "last": phase.last,
            "hist": phase.hist.tobytes()}


async def _serve(pipe: Connection, targets: list[Target], concurrency: int) -> None:
    loop = asyncio.get_running_loop()
    stats = Stats()
    sockets: list[Subscriber] = []
    done: asyncio.Future[None] = loop.create_future()
    tasks: set[asyncio.Task[None]] = set()

    first_stage = max(1, len(targets) // 10)

    async def connect(stage: int) -> None:
        # stage 0: the first tenth of the sockets, stage 1: the rest
        batch = targets[:first_stage] if stage == 0 else targets[first_stage:]
        before = len(sockets)
        count, errors, seconds = await _connect_all(batch, stats, sockets, concurrency)
        pipe.send(("connected", count - before, errors, seconds))

    def on_command() -> None:
        command = pipe.recv()
        kind = command[0]
        if kind == "connect":
            task = loop.create_task(connect(command[1]))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        elif kind == "progress":
            counts = {k.decode(): p.count for k, p in stats.phases.items()}
            pipe.send(("progress", counts, _cpu_seconds(), stats.closed_by_server))
        elif kind == "report":
            pipe.send(("report", _report(stats, command[1]), stats.sample))
        elif kind == "close":
            for sub in sockets:
                if sub.transport is not None:
                    sub.transport.abort()
            pipe.send(("closed", _cpu_seconds()))
            if not done.done():
                done.set_result(None)

    loop.add_reader(pipe.fileno(), on_command)
    await done


def client_main(pipe: Connection, targets: list[Target], concurrency: int = 64) -> None:
    """Entry point of a client process (multiprocessing, spawn)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(_serve(pipe, targets, concurrency))
