"""Several server processes on one PostgreSQL and one Redis: real `commons serve` subprocesses
on free ports, a websocket client on each, remarks posted through one reaching the other."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from app.config import Settings
from realtime.channels import conversation_channel
from tests.app.views.conversations_support import start
from tests.servers import REPO_ROOT, free_port
from tests.support import PASSWORD, Member, World

START_TIMEOUT = 60.0


class ServerProcess:
    """`commons serve` in a subprocess (its own process group, so that `--workers` children
    are stopped with it)."""

    def __init__(
        self, settings: Settings, data_dir: Path, *args: str,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("S3_", "AWS_"))}
        env.update({
            "DATABASE_URL": settings.database_url or "",
            "REDIS_URL": settings.redis_url or "",
            "COMMONS_REDIS_PREFIX": settings.redis_prefix,
            "COMMONS_SECRET_KEY": settings.secret_key or "test-secret",
            "COMMONS_DATA_DIR": str(data_dir),
            "COMMONS_LOG_LEVEL": os.environ.get("TEST_SERVER_LOG_LEVEL", "WARNING"),
            **(extra_env or {}),
        })
        self.log = data_dir / f"server-{self.port}.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1",
                 "--port", str(self.port), "--no-bootstrap", *args],
                cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )

    async def wait_until_up(self, session: aiohttp.ClientSession) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"server exited with {self.process.returncode}:\n{self.tail()}")
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
                async with session.get(f"{self.base}/api/openapi.json",
                                       timeout=aiohttp.ClientTimeout(total=2)) as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.1)
        pytest.fail(f"server on port {self.port} did not answer in {START_TIMEOUT} s:\n"
                    f"{self.tail()}")

    def stop(self) -> None:
        """SIGINT to its group (a graceful stop), SIGKILL after 10 s."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)

    def tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return ""


@pytest.fixture
def spawn(settings: Settings, tmp_path: Path) -> Iterator[Any]:
    """`spawn(*serve_args)` starts a server process; every one is stopped after the test."""
    started: list[ServerProcess] = []

    def run(*args: str) -> ServerProcess:
        server = ServerProcess(settings, tmp_path / f"data-{len(started)}", *args)
        started.append(server)
        return server

    yield run
    for server in started:
        server.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def headers(member: Member) -> dict[str, str]:
    token = base64.b64encode(f"{member.email}:{PASSWORD}".encode()).decode()
    return {"Host": member.community.domain, "Authorization": f"Basic {token}"}


async def connect(
    http: aiohttp.ClientSession, server: ServerProcess, member: Member
) -> aiohttp.ClientWebSocketResponse:
    ws = await http.ws_connect(f"{server.base}/api/realtime", headers=headers(member))
    welcome = await ws.receive_json(timeout=10)
    assert welcome["type"] == "welcome" and welcome["user_id"] == member.id
    return ws


async def remark(
    http: aiohttp.ClientSession, server: ServerProcess, member: Member, cid: int, text: str
) -> dict[str, Any]:
    async with http.post(f"{server.base}/api/conversations/{cid}/remarks",
                         json={"remark": {"text": text}}, headers=headers(member)) as resp:
        assert resp.status == 201, await resp.text()
        activity: dict[str, Any] = (await resp.json())["activity"]
        return activity


async def test_a_remark_posted_through_one_process_reaches_a_socket_on_the_other(
    world: World, spawn: Any, http: aiohttp.ClientSession
) -> None:
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    conversation = await start(ann, bob)
    cid = conversation["id"]
    one, two = spawn(), spawn()
    async with asyncio.timeout(2 * START_TIMEOUT + 30):
        await asyncio.gather(one.wait_until_up(http), two.wait_until_up(http))
        ann_on_one = await connect(http, one, ann)
        bob_on_two = await connect(http, two, bob)

        for writer, author, text in ((one, ann, "from one"), (two, bob, "from two"),
                                     (one, bob, "one again"), (two, ann, "two again")):
            activity = await remark(http, writer, author, cid, text)
            for ws in (ann_on_one, bob_on_two):
                frame = await ws.receive_json(timeout=10)
                assert frame["type"] == "event"
                assert frame["channel"] == conversation_channel(cid)
                assert frame["event"] == "remark.created"
                assert frame["data"] == activity

        # Membership changed through one process moves the subscriptions on the other.
        cat = await world.user(ann, "Cat")
        group = await start(ann, bob, cat, text=None)
        cat_conversation = await start(ann, cat, text=None)
        cat_on_two = await connect(http, two, cat)
        async with http.delete(f"{one.base}/api/conversations/{group['id']}/members/me",
                               headers=headers(cat)) as resp:
            assert resp.status in (200, 204), await resp.text()
        frame = await cat_on_two.receive_json(timeout=10)
        assert frame["event"] == "conversation.member_removed"
        # down to two, the conversation became one-to-one (conversations.md); the leaver is
        # unsubscribed only after that event, so it hears it too
        frame = await cat_on_two.receive_json(timeout=10)
        assert frame["event"] == "conversation.updated"
        await remark(http, one, ann, group["id"], "cat is gone")
        marker = await remark(http, two, ann, cat_conversation["id"], "only cat")
        assert (await cat_on_two.receive_json(timeout=10))["data"] == marker
        for ws in (ann_on_one, bob_on_two, cat_on_two):
            await ws.close()


async def test_serve_with_two_workers_sharing_one_port(
    world: World, spawn: Any, http: aiohttp.ClientSession, settings: Settings
) -> None:
    ann = await world.community("Acme")
    members = [ann, *[await world.user(ann, f"User{n}") for n in range(3)]]
    conversation = await start(ann, *members[1:])
    server = spawn("--workers", "2")
    async with asyncio.timeout(START_TIMEOUT + 30):
        await server.wait_until_up(http)  # one worker answers: the other may still be starting
        children = _children(server.process.pid)  # the workers (and spawn's resource tracker)
        # Each worker holds one pub/sub connection (named after its pid), made when its first
        # socket of the community arrived. SO_REUSEPORT spreads connections over the workers
        # listening (all 16 of a round on one: p = 2**-15), so sockets are opened in rounds
        # until both workers have some.
        admin = aioredis.Redis.from_url(settings.redis_url or "")
        sockets: list[aiohttp.ClientWebSocketResponse] = []
        try:
            subscribed: set[int] = set()
            while len(subscribed) < 2:
                sockets += [await connect(http, server, members[n % len(members)])
                            for n in range(16 if not sockets else 4)]
                for _ in range(20):  # a worker subscribes just after its first socket arrives
                    clients = await admin.client_list(_type="pubsub")
                    subscribed = {pid for c in clients if (pid := _realtime_pid(c)) in children
                                  and int(c["sub"]) > 0}
                    if len(subscribed) == 2:
                        break
                    await asyncio.sleep(0.05)
        finally:
            await admin.aclose()
        activity = await remark(http, server, ann, conversation["id"], "to every worker")
        for ws in sockets:
            frame = await ws.receive_json(timeout=10)
            assert frame["data"] == activity
            await ws.close()


def _children(pid: int) -> set[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return {int(p) for p in path.read_text().split()}


def _realtime_pid(client: dict[str, Any]) -> int | None:
    """The pid in a hub's pub/sub client name `commons-realtime-<pid>-<random>`."""
    parts = str(client.get("name", "")).split("-")
    if len(parts) == 4 and parts[:2] == ["commons", "realtime"] and parts[2].isdigit():
        return int(parts[2])
    return None


async def test_serve_answers_parser_errors_in_json(
    spawn: Any, http: aiohttp.ClientSession
) -> None:
    """`commons serve` runs app.server's runner: an HTTP parser error is the JSON error, and
    nothing of the request comes back."""
    server = spawn()
    await server.wait_until_up(http)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n"
                     b"Authorization: Basic c2VjcmV0\r\n\r\n")
        raw = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"400", head
    assert b"application/json" in head and b"X-Request-Id" in head
    assert b"c2VjcmV0" not in raw and b"aaaa" not in raw
    assert b'"code":"bad_request"' in body
