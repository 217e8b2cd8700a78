"""The shipped deploy/nginx.conf, run by a real nginx (Debian's package, installed by the test
set-up when absent) in front of two `commons serve` processes on loopback.

Only what a test box must change is changed: the upstream addresses, the listen line (no TLS)
and the file paths of a root-less nginx. Everything else (headers, upgrade, body size, request
buffering, /metrics) is the shipped configuration."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from app.config import Settings
from realtime.channels import conversation_channel
from tests.app.test_multiprocess import START_TIMEOUT, ServerProcess
from tests.app.views.conversations_support import start
from tests.servers import REPO_ROOT, ensure_debian_package, free_port
from tests.support import PASSWORD, Member, World

SHIPPED = REPO_ROOT / "deploy" / "nginx.conf"
CLIENT_ADDRESS = "127.0.0.2"  # the test's own side, so it differs from nginx's 127.0.0.1


def local_config(upstreams: list[int], port: int, workdir: Path) -> str:
    """deploy/nginx.conf with loopback upstreams and a plain-HTTP listener, inside a minimal
    main context of its own."""
    shipped = SHIPPED.read_text()
    servers = "\n".join(f"    server 127.0.0.1:{p};" for p in upstreams)
    conf, count = re.subn(r"(?m)^(\s*server \d+\.\d+\.\d+\.\d+:\d+;\n)+", servers + "\n",
                          shipped)
    assert count == 1, "the upstream block of deploy/nginx.conf changed shape"
    conf, count = re.subn(r"(?m)^\s*listen 443 ssl http2;", f"    listen 127.0.0.1:{port};",
                          conf)
    assert count == 1, "the listen line of deploy/nginx.conf changed"
    user = "user root;\n" if os.geteuid() == 0 else ""
    return f"""{user}daemon off;
worker_processes 1;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {workdir}/body;
    proxy_temp_path {workdir}/proxy;
    fastcgi_temp_path {workdir}/fastcgi;
    uwsgi_temp_path {workdir}/uwsgi;
    scgi_temp_path {workdir}/scgi;
{conf}
}}
"""


class Nginx:
    def __init__(self, binary: str, upstreams: list[int], workdir: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        conf = workdir / "nginx.conf"
        conf.write_text(local_config(upstreams, self.port, workdir))
        check = subprocess.run([binary, "-t", "-p", str(workdir), "-c", str(conf)],
                               capture_output=True, text=True, check=False)
        assert check.returncode == 0, check.stderr
        self.process = subprocess.Popen(
            [binary, "-p", str(workdir), "-c", str(conf)], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )

    async def wait_until_up(self, http: aiohttp.ClientSession) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (self.workdir / "error.log").read_text()
            with contextlib.suppress(aiohttp.ClientError):
                async with http.get(f"{self.base}/healthz") as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.1)
        pytest.fail("nginx did not answer")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


@pytest.fixture(scope="module")
def nginx_binary() -> str:
    try:
        return ensure_debian_package("nginx")
    except RuntimeError as exc:
        pytest.fail(f"nginx is needed for this test: {exc}")


@pytest.fixture
def stack(
    nginx_binary: str, settings: Settings, tmp_path: Path
) -> Iterator[tuple[Nginx, list[ServerProcess]]]:
    env = {"COMMONS_TRUST_FORWARDED": "true", "COMMONS_TRUSTED_PROXY_HOPS": "1",
           "COMMONS_LOG_FORMAT": "json", "COMMONS_LOG_LEVEL": "INFO"}
    servers = [ServerProcess(settings, tmp_path / f"data-{n}", extra_env=env) for n in range(2)]
    nginx = Nginx(nginx_binary, [s.port for s in servers], tmp_path / "nginx")
    yield nginx, servers
    nginx.stop()
    for server in servers:
        server.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    # from 127.0.0.2, so that the client's address is not nginx's
    connector = aiohttp.TCPConnector(local_addr=(CLIENT_ADDRESS, 0))
    async with aiohttp.ClientSession(connector=connector) as session:
        yield session


def auth(member: Member) -> dict[str, str]:
    token = base64.b64encode(f"{member.email}:{PASSWORD}".encode()).decode()
    return {"Host": member.community.domain, "Authorization": f"Basic {token}"}


async def _gauge(http: aiohttp.ClientSession, server: ServerProcess, name: str) -> float:
    async with aiohttp.ClientSession() as direct, direct.get(f"{server.base}/metrics") as resp:
        assert resp.status == 200
        for line in (await resp.text()).splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


async def _big_body(size: int) -> AsyncIterator[bytes]:
    yield (b"--b\r\nContent-Disposition: form-data; name=\"attachment\"; filename=\"big.bin\""
           b"\r\nContent-Type: application/octet-stream\r\n\r\n")
    chunk = b"\0" * (1024 * 1024)
    for _ in range(size // len(chunk)):
        yield chunk
    yield b"\r\n--b--\r\n"


async def test_two_processes_behind_the_shipped_nginx(
    world: World, stack: tuple[Nginx, list[ServerProcess]], http: aiohttp.ClientSession
) -> None:
    nginx, servers = stack
    ann = await world.community("Acme")
    bob = await world.user(ann, "Bob")
    conversation = await start(ann, bob)
    async with asyncio.timeout(2 * START_TIMEOUT + 120):
        async with aiohttp.ClientSession() as direct:
            await asyncio.gather(*(s.wait_until_up(direct) for s in servers))
        await nginx.wait_until_up(http)

        # REST through nginx
        async with http.get(f"{nginx.base}/api/userinfo", headers=auth(ann)) as resp:
            assert resp.status == 200, await resp.text()
            assert (await resp.json())["user"]["id"] == ann.id
        # /metrics is not passed on
        async with http.get(f"{nginx.base}/metrics") as resp:
            assert resp.status == 404

        # Websockets through nginx, spread over both processes by its round robin
        sockets = []
        for n in range(4):
            member = (ann, bob)[n % 2]
            ws = await http.ws_connect(f"{nginx.base}/api/realtime", headers=auth(member))
            assert (await ws.receive_json(timeout=10))["type"] == "welcome"
            sockets.append(ws)
        held = [await _gauge(http, s, "commons_websocket_connections") for s in servers]
        assert held[0] >= 1 and held[1] >= 1, held

        # A remark posted through each process reaches the sockets held by the other
        for server in servers:
            async with http.post(f"{server.base}/api/conversations/{conversation['id']}/remarks",
                                 json={"remark": {"text": f"via {server.port}"}},
                                 headers=auth(ann)) as resp:
                assert resp.status == 201, await resp.text()
                activity = (await resp.json())["activity"]
            for ws in sockets:
                frame = await ws.receive_json(timeout=10)
                assert frame["channel"] == conversation_channel(conversation["id"])
                assert frame["data"] == activity
        for ws in sockets:
            await ws.close()

        # 100 MB through the proxy (streamed: proxy_request_buffering off)
        size = 100 * 1024 * 1024
        async with http.post(
            f"{nginx.base}/api/attachments", data=_big_body(size),
            headers={**auth(ann), "Content-Type": "multipart/form-data; boundary=b"},
        ) as resp:
            assert resp.status == 201, await resp.text()


async def test_the_client_address_is_the_one_nginx_saw(
    world: World, stack: tuple[Nginx, list[ServerProcess]], http: aiohttp.ClientSession
) -> None:
    nginx, servers = stack
    ann = await world.community("Acme")
    async with asyncio.timeout(START_TIMEOUT + 30):
        async with aiohttp.ClientSession() as direct:
            await asyncio.gather(*(s.wait_until_up(direct) for s in servers))
        await nginx.wait_until_up(http)
        # a client writing its own X-Forwarded-For does not choose its address
        async with http.get(f"{nginx.base}/api/userinfo",
                            headers={**auth(ann), "X-Forwarded-For": "6.6.6.6"}) as resp:
            assert resp.status == 200
            request_id = resp.headers["X-Request-Id"]
        deadline = time.monotonic() + 5
        line: dict[str, Any] | None = None
        while line is None and time.monotonic() < deadline:
            for server in servers:
                for raw in server.log.read_text(errors="replace").splitlines():
                    if request_id in raw and raw.startswith("{"):
                        line = json.loads(raw)
            await asyncio.sleep(0.1)
        assert line is not None, "no log line for the request"
        assert line["client"] == CLIENT_ADDRESS
