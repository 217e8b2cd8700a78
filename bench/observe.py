"""What the observe middleware (request metrics + the request log line) costs per request.

    .venv/bin/python bench/observe.py [--seconds 5] [--rounds 3] [--concurrency 16]

1. In isolation: the middleware around a handler that returns at once, called N times on one
   matched request, against calling the handler directly (microseconds per request).
2. End to end: the real app (real PostgreSQL, a fresh database dropped at the end; no Redis)
   served by aiohttp on loopback, driven by an aiohttp client in the same process with N
   concurrent keep-alive connections, with and without the middleware (the floor), rounds
   alternating so that the machine's load hits both alike. Two paths: GET /healthz (the
   cheapest request, where the middleware weighs most) and GET /api/users/:id (authenticated,
   one SQL query, a typical read). Text logs (the request line at DEBUG: not written), as
   `make run`; `--json-logs` writes each request line as JSON to /dev/null instead.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request

from app.config import Argon2Settings, Settings
from app.logs import configure_logging
from app.main import create_app
from app.observe import make_observe_middleware
from app.views.ops import DRAINING
from bench.bench_db import fresh_database
from migrations import apply_migrations

PASSWORD = "bench password"


async def isolated(calls: int) -> tuple[float, float]:
    """(µs per call through the middleware, µs per call straight to the handler)."""
    app = web.Application()
    app[DRAINING] = asyncio.Event()

    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/api/users/{user_id:[^/]+?}{_ext:(?:\\.json)?}", handler)
    observe = make_observe_middleware(logging.DEBUG)
    request = make_mocked_request("GET", "/api/users/12", app=app)
    match = await app.router.resolve(request)
    match.add_app(app)
    request._match_info = match  # what aiohttp does before calling the middlewares

    async def timed(call: Any) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            await call()
        return (time.perf_counter() - start) / calls * 1e6

    with_mw = await timed(lambda: observe(request, handler))
    without = await timed(lambda: handler(request))
    return with_mw, without


async def drive(client: TestClient, path: str, headers: dict[str, str], seconds: float,
                concurrency: int) -> float:
    """Requests per second over `seconds` (after a short warm-up)."""
    count = 0
    stop_at = 0.0

    async def worker() -> None:
        nonlocal count
        while time.perf_counter() < stop_at:
            async with client.get(path, headers=headers) as resp:
                await resp.read()
                assert resp.status == 200, resp.status
            count += 1

    stop_at = time.perf_counter() + 0.5
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    count = 0
    started = time.perf_counter()
    stop_at = started + seconds
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - started)


async def end_to_end(settings: Settings, args: argparse.Namespace) -> dict[str, list[float]]:
    from app.actions.communities import create_community
    from app.passwords import Passwords
    from storage.db import create_pool

    pool = await create_pool(settings.database_url or "", size=2)
    try:
        _, admin = await create_community(
            pool, Passwords(settings.argon2), name="Bench", domain="bench.example",
            admin_email="admin@bench.example", admin_password=PASSWORD,
        )
    finally:
        await pool.close()
    token = base64.b64encode(f"admin@bench.example:{PASSWORD}".encode()).decode()
    paths = {
        "GET /healthz": ("/healthz", {}),
        "GET /api/users/:id": (f"/api/users/{admin['id']}",
                               {"Host": "bench.example", "Authorization": f"Basic {token}"}),
    }
    results: dict[str, list[float]] = {f"{name} {variant}": [] for name in paths
                                       for variant in ("with", "without")}
    for _ in range(args.rounds):
        for variant in ("with", "without"):
            app = create_app(settings)
            if variant == "without":
                app.middlewares.pop(0)  # the observe middleware is the outermost
            client = TestClient(TestServer(app))
            await client.start_server()
            try:
                for name, (path, headers) in paths.items():
                    rps = await drive(client, path, headers, args.seconds, args.concurrency)
                    results[f"{name} {variant}"].append(rps)
            finally:
                await client.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--json-logs", action="store_true")
    args = parser.parse_args()
    if args.json_logs:
        configure_logging("INFO", "json", stream=open(os.devnull, "w"))
    else:
        configure_logging("INFO", "text")
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)  # the test server's own
    asyncio.run(run(args))


async def run(args: argparse.Namespace) -> None:

    with_mw, without = await isolated(args.calls)
    print(f"in isolation ({args.calls} calls): {with_mw:.2f} µs with the middleware, "
          f"{without:.2f} µs without: {with_mw - without:.2f} µs per request")

    from tests.servers import ensure_postgres

    admin_dsn = ensure_postgres()
    async with fresh_database(admin_dsn, "commons_bench_observe") as dsn:
        await apply_migrations(dsn)
        settings = Settings(
            database_url=dsn, data_dir=Path("/tmp/commons-bench-observe"), secret_key="bench",
            argon2=Argon2Settings(), rate_limit_requests=10**9,
            log_format="json" if args.json_logs else "text",
        )
        results = await end_to_end(settings, args)
    print(f"end to end ({args.rounds} alternating rounds of {args.seconds:g} s, "
          f"{args.concurrency} connections; median req/s):")
    for name in ("GET /healthz", "GET /api/users/:id"):
        with_rps = statistics.median(results[f"{name} with"])
        without_rps = statistics.median(results[f"{name} without"])
        cost = (1 / with_rps - 1 / without_rps) * 1e6
        print(f"  {name:22} with {with_rps:8.0f}  without {without_rps:8.0f}  "
              f"({with_rps / without_rps:.1%} of the floor; {cost:+.0f} µs per request)")


if __name__ == "__main__":
    main()
