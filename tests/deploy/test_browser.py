"""The front door in a real browser: Debian's chromium (installed by the test set-up when
absent), headless, loads `/` and `/api/docs` from a running Commons and the operations list
renders, with nothing fetched from another host.

The page is driven over the DevTools protocol (aiohttp's websocket client): the test waits
until the list is rendered rather than for a fixed time."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import tempfile
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient

from app.routes import ROUTES
from tests.servers import ensure_debian_package, free_port


@pytest.fixture(scope="module")
def chromium() -> str:
    try:
        return ensure_debian_package("chromium")
    except RuntimeError as exc:  # no root and no sudo: say so, do not pass silently
        pytest.fail(f"chromium is needed for this test: {exc}")


class Page:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self.failed_requests: list[str] = []

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self._ids)
        await self._ws.send_json({"id": call_id, "method": method, "params": params})
        while True:
            message = await self._ws.receive_json(timeout=30)
            if message.get("method") == "Network.loadingFailed":
                self.failed_requests.append(str(message["params"]))
            if message.get("id") == call_id:
                assert "error" not in message, message
                result: dict[str, Any] = message.get("result", {})
                return result

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    async def open(self, url: str) -> None:
        await self.call("Page.navigate", url=url)
        await self.until("document.readyState === 'complete'")

    async def until(self, expression: str, seconds: float = 30) -> None:
        deadline = time.monotonic() + seconds
        while not await self.evaluate(expression):
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {expression}")
            await asyncio.sleep(0.2)


@pytest.fixture
async def page(chromium: str) -> AsyncIterator[Page]:
    port = free_port()
    # chromium's helper processes can still be writing the profile as the directory goes:
    # they are killed with it (their own process group), and what is left is not an error
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        proc = await asyncio.create_subprocess_exec(
            chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
            "--disable-dev-shm-usage", "--no-first-run", f"--user-data-dir={profile}",
            # tall enough for every operation: Swagger UI renders only the rows in view
            "--window-size=1280,20000",
            # any request to another host fails, as it would on an offline deployment
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            f"--remote-debugging-port={port}", "about:blank",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            async with aiohttp.ClientSession() as http:
                targets: list[dict[str, Any]] = []
                for _ in range(150):
                    with contextlib.suppress(aiohttp.ClientError):
                        async with http.get(f"http://127.0.0.1:{port}/json/list") as resp:
                            targets = [t for t in await resp.json() if t["type"] == "page"]
                    if targets:
                        break
                    await asyncio.sleep(0.2)
                assert targets, "chromium did not start"
                async with http.ws_connect(targets[0]["webSocketDebuggerUrl"],
                                           max_msg_size=0) as ws:
                    page = Page(ws)
                    await page.call("Network.enable")
                    yield page
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


async def test_front_page_and_api_docs_render_in_chromium(
    page: Page, client: TestClient
) -> None:
    base = str(client.make_url("/")).rstrip("/")
    await page.open(f"{base}/")
    assert await page.evaluate("document.querySelector('h1').textContent") == "Commons"
    assert await page.evaluate("!!document.querySelector('a[href=\"/api/docs\"]')")

    await page.open(f"{base}/api/docs")
    # One block per operation, each showing its path.
    await page.until(f"document.querySelectorAll('.opblock-summary-path').length >= "
                     f"{len(ROUTES)}")
    paths = await page.evaluate(
        "[...document.querySelectorAll('.opblock-summary-path')].map(e => e.dataset.path)")
    assert "/api/users/{user_id}" in paths
    assert "Failed to load API definition" not in await page.evaluate("document.body.innerText")
    assert page.failed_requests == []
