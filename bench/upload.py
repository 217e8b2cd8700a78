"""Upload benchmark: 100 MB through every endpoint that takes files, memory and time.

    .venv/bin/python bench/upload.py [--mb 100] [--only remark,comment,...]

For each endpoint that takes a file part (a remark, a comment, a message, a group chat
message, an incoming webhook call (multipart, and JSON with the file as a base64 data URI,
which the server decodes as it arrives), a user's and an external system's profile photo, and
POST /api/attachments for comparison) it sends `--runs` requests (3) carrying a file of
`--mb` MB to the real server (`commons serve`, one process, local blob store, on a fresh
database that is dropped at the end), and prints:

- the growth of the server's peak RSS during that request (the kernel's high-water mark,
  VmHWM, reset through /proc/<pid>/clear_refs before each request; else RSS sampled every
  10 ms), against the goal of at most 20 MB;
- the time of the request beside the time of a plain copy of the same bytes: the same
  multipart body sent to a bare aiohttp handler (its own process) that writes the body to a
  file as it arrives. Goal: at most 2x the copy.

The bytes are sent from a file, so the client holds none of them in memory either. The photo
endpoints get a real PNG padded to the size (a decoder reads only its header).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import io
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO_ROOT), str(Path(__file__).resolve().parent)]

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402
from bench_db import fresh_database  # noqa: E402
from rest import basic, commons_server, free_port, stop, wait_until_up  # noqa: E402

DOMAIN = "upload.example"
ADMIN_EMAIL = "admin@upload.example"
PASSWORD = "bench upload password"
BOB_EMAIL = "bob@upload.example"
GOAL_RSS_MB = 20
GOAL_RATIO = 2.0


@dataclass(frozen=True)
class Target:
    name: str
    method: str
    path: str
    fields: dict[str, str]
    file_field: str
    png: bool = False
    anonymous: bool = False
    data_uri: bool = False  # JSON with the file as a base64 data URI, not multipart


# --- set-up ---------------------------------------------------------------------------------


async def seed(dsn: str) -> None:
    from app.actions.communities import create_community
    from app.actions.users import UserFields, create_user
    from app.config import Argon2Settings
    from app.context import Viewer
    from app.passwords import Passwords
    from migrations import apply_migrations
    from storage.db import create_pool

    await apply_migrations(dsn)
    passwords = Passwords(Argon2Settings(time_cost=1, memory_kib=8192, parallelism=1))
    pool = await create_pool(dsn, size=2)
    try:
        community, _admin = await create_community(
            pool, passwords, name="Upload bench", domain=DOMAIN, admin_email=ADMIN_EMAIL,
            admin_password=PASSWORD, base_url=f"http://{DOMAIN}",
        )
        await create_user(
            pool, passwords, Viewer.system(community.id),
            UserFields(email=BOB_EMAIL, password=PASSWORD, first_name="Bob", last_name="B"),
        )
    finally:
        await pool.close()


async def targets(session: aiohttp.ClientSession, base: str) -> list[Target]:
    """Makes what the endpoints need (a group with chat, a webhook, a message, a
    conversation) through the API, and lists the endpoints."""

    async def call(method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        async with session.request(method, base + path, json=body) as resp:
            data: dict[str, Any] = await resp.json()
            if resp.status >= 300:
                raise RuntimeError(f"{method} {path}: {resp.status} {data}")
            return data

    user = await call("GET", "/api/userinfo", {})
    admin_id = user.get("user", user).get("id")
    group = (await call("POST", "/api/groups", {"group": {"name": "Uploads", "chat": True}}))
    gid = group["group"]["id"]
    hook = (await call("POST", f"/api/groups/{gid}/webhooks", {"webhook": {"name": "Bot"}}))
    hook_path = "/" + hook["webhook"]["url"].split("://", 1)[1].split("/", 1)[1]
    message = await call("POST", "/api/messages", {"message": {"body": "Files here"}})
    mid = message["message"]["id"]
    conv = await call("POST", "/api/conversations", {
        "conversation": {"members_emails": BOB_EMAIL}, "remark": {"text": "Hi"}})
    cid = conv["conversation"]["id"]
    return [
        Target("attachments", "POST", "/api/attachments", {}, "attachment"),
        Target("remark", "POST", f"/api/conversations/{cid}/remarks",
               {"remark[text]": "a file"}, "remark[attachments][]"),
        Target("comment", "POST", f"/api/messages/{mid}/comments",
               {"comment[text]": "a file"}, "comment[attachment]"),
        Target("message", "POST", "/api/messages",
               {"message[body]": "a file"}, "message[attachment]"),
        Target("group chat", "POST", f"/api/groups/{gid}/chat_messages",
               {"chat_message[body]": "a file"}, "chat_message[attachment]"),
        Target("webhook", "POST", hook_path, {"message[body]": "a file"},
               "message[attachment]", anonymous=True),
        Target("webhook JSON", "POST", hook_path, {"body": "a file"}, "attachment",
               anonymous=True, data_uri=True),
        Target("profile photo", "PUT", f"/api/users/{admin_id}",
               {"user[title]": "Uploader"}, "user[profile_photo][data]", png=True),
        Target("external system", "POST", "/api/external_systems",
               {"external_system[name]": "Uploads", "external_system[url]": "https://x.example"},
               "external_system[profile_photo][data]", png=True),
    ]


def make_file(path: Path, size: int, png: bool) -> None:
    """`size` bytes: pseudo-random (nothing compresses them on the way), or a real PNG padded
    with zeros after its end."""
    with path.open("wb") as out:
        written = 0
        if png:
            from PIL import Image

            image = io.BytesIO()
            Image.new("RGB", (64, 48), (20, 120, 200)).save(image, format="PNG")
            out.write(image.getvalue())
            written = len(image.getvalue())
        block = os.urandom(1024 * 1024)
        while written < size:
            piece = block[: size - written] if not png else bytes(min(len(block), size - written))
            out.write(piece)
            written += len(piece)


# --- measuring ------------------------------------------------------------------------------


def _status_kb(pid: int, key: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _reset_peak(pid: int) -> bool:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _leftovers(work: Path) -> list[Path]:
    return [p for p in work.rglob("*") if p.is_file() and "uploads" in p.parts]


class PeakRss:
    """Peak RSS growth of a process over a block: VmHWM reset by clear_refs, else sampled."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.start = 0
        self.sampled = 0
        self.exact = False
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> PeakRss:
        self.start = _status_kb(self.pid, "VmRSS") or 0
        self.exact = _reset_peak(self.pid)
        self.sampled = self.start
        self._task = asyncio.create_task(self._sample())
        return self

    async def _sample(self) -> None:
        while True:
            self.sampled = max(self.sampled, _status_kb(self.pid, "VmRSS") or 0)
            await asyncio.sleep(0.01)

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        peak = _status_kb(self.pid, "VmHWM") if self.exact else None
        self.peak = max(peak or 0, self.sampled)

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.start) / 1024


async def data_uri_json(target: Target, path: Path) -> AsyncIterator[bytes]:
    """`{"message": {..., "attachment": "data:...;base64,<the file>"}}`, encoded as it is
    sent (the client holds one block of it)."""
    fields = ", ".join(f'"{k}": "{v}"' for k, v in target.fields.items())
    yield (f'{{"message": {{{fields}, "{target.file_field}": '
           f'"data:application/octet-stream;base64,').encode()
    with path.open("rb") as handle:
        while block := handle.read(3 * 256 * 1024):
            yield base64.b64encode(block)
    yield b'"}}'


async def send(session: aiohttp.ClientSession, url: str, method: str, target: Target,
               path: Path, headers: dict[str, str]) -> tuple[int, float, str]:
    if target.data_uri:
        started = time.perf_counter()
        async with session.request(method, url, data=data_uri_json(target, path), headers={
                **headers, "Content-Type": "application/json"}) as resp:
            text = await resp.text()
            return resp.status, time.perf_counter() - started, text
    form = aiohttp.FormData()
    for key, value in target.fields.items():
        form.add_field(key, value)
    with path.open("rb") as handle:
        form.add_field(target.file_field, handle, filename="big.png" if target.png
                       else "big.bin", content_type="image/png" if target.png
                       else "application/octet-stream")
        started = time.perf_counter()
        async with session.request(method, url, data=form, headers=headers) as resp:
            text = await resp.text()
            return resp.status, time.perf_counter() - started, text


def _copy_main(port: int, directory: str) -> None:
    """The floor: a bare aiohttp handler writing the request body to a file as it arrives."""

    async def copy(request: web.Request) -> web.Response:
        with tempfile.TemporaryFile(dir=directory) as out:
            async for chunk in request.content.iter_chunked(256 * 1024):
                await asyncio.to_thread(out.write, chunk)
        return web.Response(status=201)

    app = web.Application(client_max_size=2**40)
    app.router.add_route("*", "/{tail:.*}", copy)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


@contextlib.asynccontextmanager
async def copy_server(port: int, directory: Path) -> AsyncIterator[Callable[[], int | None]]:
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_copy_main, args=(port, str(directory)), daemon=True)
    proc.start()
    try:
        await wait_until_up(f"http://127.0.0.1:{port}/", proc)
        yield lambda: proc.pid
    finally:
        stop(proc)


async def run(args: argparse.Namespace) -> int:
    from tests.servers import ensure_postgres

    size = args.mb * 1000 * 1000
    admin_dsn = ensure_postgres()
    work = Path(tempfile.mkdtemp(prefix="commons-upload-bench-"))
    failures = 0
    os.environ["COMMONS_MAX_UPLOAD_MB"] = str(args.mb + 8)
    async with fresh_database(admin_dsn, "commons_upload") as dsn:
        await seed(dsn)
        plain, png = work / "plain.bin", work / "photo.png"
        make_file(plain, size, png=False)
        make_file(png, size, png=True)
        port, copy_port = free_port(), free_port()
        base = f"http://127.0.0.1:{port}"
        headers = {"Authorization": basic(ADMIN_EMAIL, PASSWORD), "Host": DOMAIN}
        timeout = aiohttp.ClientTimeout(total=600)
        with commons_server(dsn, port, work / "data") as server:
            await wait_until_up(base + "/api/openapi.json", server)
            async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session, \
                    aiohttp.ClientSession(timeout=timeout) as anonymous, \
                    copy_server(copy_port, work) as _copy_pid:
                chosen = [t for t in await targets(session, base)
                          if not args.only or t.name in args.only]
                print(f"{args.mb} MB per request; server pid {server.pid}; goal: peak RSS "
                      f"growth <= {GOAL_RSS_MB} MB, time <= {GOAL_RATIO}x a plain copy")
                print(f"{'endpoint':<17}{'status':>7}{'RSS +MB':>9}{'time s':>8}"
                      f"{'copy s':>8}{'ratio':>7}  goals")
                for target in chosen:
                    path = png if target.png else plain
                    client = anonymous if target.anonymous else session
                    # the best of --runs each (the machine is shared: the best run is the
                    # one least disturbed), alternating upload and copy
                    seconds = copy_seconds = float("inf")
                    growth = 0.0
                    for _ in range(args.runs):
                        async with PeakRss(server.pid) as rss:
                            status, took, text = await send(
                                client, base + target.path, target.method, target,
                                path, {"Host": DOMAIN})
                        growth = max(growth, rss.growth_mb)
                        seconds = min(seconds, took)
                        _, took, _ = await send(
                            anonymous, f"http://127.0.0.1:{copy_port}/copy", "POST", target,
                            path, {})
                        copy_seconds = min(copy_seconds, took)
                    ratio = seconds / copy_seconds if copy_seconds else float("inf")
                    served = 200 <= status < 300
                    ok = served and growth <= GOAL_RSS_MB and ratio <= GOAL_RATIO
                    failures += not ok
                    goals = "memory " + ("met" if growth <= GOAL_RSS_MB else "MISSED") \
                        + ", time " + ("met" if ratio <= GOAL_RATIO else "MISSED")
                    print(f"{target.name:<17}{status:>7}{growth:>9.1f}{seconds:>8.2f}"
                          f"{copy_seconds:>8.2f}{ratio:>6.2f}x  {goals}"
                          f"{'' if served else '  <- ' + text[:200]}")
    for leftover in _leftovers(work):
        print(f"temp file left behind: {leftover}")
        failures += 1
    with contextlib.suppress(OSError):
        import shutil

        shutil.rmtree(work)
    print(f"load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="file size in MB (10^6 bytes)")
    parser.add_argument("--runs", type=int, default=3, help="requests per endpoint (best "
                        "time and largest growth are shown)")
    parser.add_argument("--only", type=lambda s: s.split(","), default=None,
                        help="comma-separated endpoint names")
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
