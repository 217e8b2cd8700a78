"""The `commons` command: serve, migrate, create-community, create-user, routes, worker,
seed-demo."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import multiprocessing
import os
import secrets
import shutil
import signal
import sys
from collections.abc import Awaitable, Callable
from multiprocessing import connection as mp_connection
from pathlib import Path
from typing import Any

import asyncpg
import orjson
from aiohttp import web

from app import server
from app.checks import SettingsError, check_services, check_static
from app.config import Settings
from app.errors import ApiError
from app.logs import configure_logging, redact
from app.passwords import Passwords
from migrations import MigrationError, apply_migrations
from storage.communities import Community

log = logging.getLogger("commons")


def _print_json(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")


def resolve_database(settings: Settings) -> Settings:
    """With no DATABASE_URL, start the embedded PostgreSQL under the data directory."""
    if settings.database_url:
        return settings
    from storage.embedded_pg import start_embedded_postgres

    dsn = start_embedded_postgres(settings.data_dir.resolve())
    log.debug("using embedded PostgreSQL under %s", settings.data_dir / "postgres")
    return settings.with_database(dsn)


async def _with_pool(settings: Settings, fn: Callable[[asyncpg.Pool], Awaitable[Any]]) -> Any:
    from storage.db import create_pool

    assert settings.database_url
    await apply_migrations(settings.database_url)
    pool = await create_pool(settings.database_url, size=2)
    try:
        return await fn(pool)
    finally:
        await pool.close()


async def bootstrap_local_admin(settings: Settings, port: int) -> None:
    """A fresh database gets one community with an admin, so `make run` is usable at once.

    The admin password comes from COMMONS_ADMIN_PASSWORD, else is generated and written to
    <data dir>/admin-password; the console says where (never the password itself).
    """
    from app.actions.communities import create_community
    from storage import communities

    path = settings.data_dir / "admin-password"

    async def run(pool: asyncpg.Pool) -> None:
        if await communities.all_communities(pool):
            if path.exists():  # the community made here earlier: say again how to log in
                print(f"Admin login: admin@localhost (password in {path.resolve()})",
                      flush=True)
            return
        password = os.environ.get("COMMONS_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        await create_community(
            pool, Passwords(settings.argon2), name="Commons", domain="localhost",
            base_url=f"http://localhost:{port}", admin_email="admin@localhost",
            admin_password=password,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(password + "\n")
        path.chmod(0o600)
        # The password itself stays out of the console (and of whatever collects it).
        print(f"Created community 'Commons' (localhost). Admin login: admin@localhost "
              f"(password in {path.resolve()})", flush=True)

    await _with_pool(settings, run)


def _event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop (measurably less CPU per request than asyncio's), else asyncio's
    where uvloop is not installed."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - a dependency, absent only on odd platforms
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


async def _freeze_startup_objects(app: web.Application) -> None:
    """Once the app is up (after its cleanup contexts: this runs last), what exists lives as
    long as the process. Leave it out of the cyclic collector's passes (gc.freeze): they would
    otherwise walk it again and again while requests allocate their JSON (measured: a quarter
    of the CPU of rendering a page of messages)."""
    gc.collect()
    gc.freeze()


def _die_with_parent() -> None:
    """Linux: this server process gets SIGTERM when the `commons serve` that started it dies,
    even by SIGKILL, so no orphan keeps serving the port."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


async def _serve(
    settings: Settings, host: str, port: int, reuse_port: bool, announce: str | None = None
) -> None:
    """Serve until SIGTERM or SIGINT, then drain: stop accepting, close websockets (1001, in
    the app's on_shutdown), wait for in-flight requests for at most COMMONS_SHUTDOWN_TIMEOUT
    seconds, close the rest and release the pools."""
    from app.main import create_app

    app = create_app(settings)
    app.on_startup.append(_freeze_startup_objects)
    # aiohttp's own access log is off: it would write raw paths, which can carry secrets
    # (app.observe logs each request by its route template instead).
    # app.server: JSON parser errors, the connection cap and the head deadline
    runner = server.make_runner(app, settings, handle_signals=False,
                                shutdown_timeout=settings.shutdown_timeout)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)  # a second signal changes nothing
    await runner.setup()
    try:
        await web.TCPSite(
            runner, host, port, reuse_port=reuse_port, backlog=server.LISTEN_BACKLOG
        ).start()
        if announce:
            print(announce, flush=True)
        await stop.wait()
        log.info("stopping: draining for at most %s s", settings.shutdown_timeout)
        await _drain(runner, app, settings.shutdown_timeout)
    finally:
        await runner.cleanup()
    log.info("stopped")


async def _drain(runner: web.AppRunner, app: web.Application, seconds: float) -> None:
    """Stop accepting, close idle connections and websockets (1001), and wait (at most
    `seconds`) for the requests in progress, whose bodies are still read.

    aiohttp's own cleanup closes every connection first, and a connection it closed stops
    reading: an upload still arriving would be cut. So this runs before it, and what is left
    after `seconds` is then cut by `runner.cleanup()`."""
    from app.resources import HUB
    from app.views.ops import DRAINING

    app[DRAINING].set()  # /readyz says 503; responses from now on close their connection
    for site in list(runner.sites):
        await site.stop()
    http_server = runner.server
    if HUB in app:
        app[HUB].disconnect_all()
    if http_server is None:
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        # aiohttp has no public view of this: a connection is busy while a request is served
        busy = [c for c in list(http_server.connections)
                if getattr(c, "_request_in_progress", False)]
        for conn in http_server.connections:
            if conn not in busy:
                conn.close()  # idle keep-alive: nothing in flight
        if not busy:
            return
        await asyncio.sleep(0.05)
    log.warning("drain: requests still in progress after %s s are cut", seconds)


def _serve_worker(
    settings: Settings, host: str, port: int, reuse_port: bool, announce: str | None = None
) -> None:
    if reuse_port:  # a child of `serve --workers N`
        _die_with_parent()
    configure_logging(settings.log_level, settings.log_format)
    loop = _event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(_serve(settings, host, port, reuse_port, announce))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def _metrics_dir(settings: Settings, port: int) -> Path:
    """A fresh directory for the server processes' metric files (prometheus multiprocess
    mode): values of a previous run must not add up with this one's."""
    path = (settings.data_dir / "prometheus" / str(port)).resolve()
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def _run_processes(settings: Settings, host: str, port: int, workers: int) -> int:
    """`workers` server processes on one port (SO_REUSEPORT). SIGTERM or SIGINT to this
    process stops them all (each drains); so does one of them dying."""
    from app import metrics

    os.environ[metrics.MULTIPROC_ENV] = str(_metrics_dir(settings, port))
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_serve_worker, args=(settings, host, port, True))
             for _ in range(workers)]
    stopping = False

    def stop_all(signum: int = signal.SIGTERM, frame: object = None) -> None:
        nonlocal stopping
        stopping = True
        for proc in procs:
            if proc.pid is not None and proc.exitcode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop_all)
    signal.signal(signal.SIGINT, stop_all)
    for proc in procs:
        proc.start()
    failed = False
    running = list(procs)
    while running:
        mp_connection.wait([p.sentinel for p in running])
        for proc in [p for p in running if p.exitcode is not None]:
            running.remove(proc)
            metrics.mark_process_dead(proc.pid or 0)
            if not stopping:
                log.error("server process %s exited with %s; stopping the others",
                          proc.pid, proc.exitcode)
                failed = True
                stop_all()
    return 1 if failed else 0


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    check_static(settings)
    settings = resolve_database(settings)
    asyncio.run(check_services(settings))
    host = args.host or settings.host
    port = args.port or settings.port
    assert settings.database_url
    asyncio.run(apply_migrations(settings.database_url))
    if not args.no_bootstrap:
        asyncio.run(bootstrap_local_admin(settings, port))
    workers = max(1, args.workers)
    if workers > 1 and not settings.redis_url:
        print("--workers > 1 needs REDIS_URL: the in-process hub serves one process only",
              file=sys.stderr)
        return 2
    announce = f"Commons serving on http://{host}:{port} ({workers} worker(s))"
    if workers == 1:  # said once listening, so that it can be waited for
        _serve_worker(settings, host, port, reuse_port=False, announce=announce)
        return 0
    print(announce, flush=True)
    return _run_processes(settings, host, port, workers)


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    check_static(settings)
    settings = resolve_database(settings)
    asyncio.run(check_services(settings, s3=False))
    assert settings.database_url
    applied = asyncio.run(apply_migrations(settings.database_url))
    print("applied: " + (", ".join(applied) if applied else "nothing (up to date)"))
    return 0


def cmd_create_community(args: argparse.Namespace, settings: Settings) -> int:
    from app.actions.communities import create_community

    settings = resolve_database(settings)

    async def run(pool: asyncpg.Pool) -> dict[str, Any]:
        community, admin = await create_community(
            pool, Passwords(settings.argon2), name=args.name, domain=args.domain,
            admin_email=args.admin_email, admin_password=args.admin_password,
            base_url=args.base_url, stream_names=args.stream_names,
        )
        return {**_community_json(community),
                "admin": {"id": admin["id"], "email": admin["email"],
                          "username": admin["username"], "role": admin["role"]}}

    _print_json(asyncio.run(_with_pool(settings, run)))
    return 0


def _community_json(community: Community) -> dict[str, Any]:
    return {"id": community.id, "name": community.name, "domain": community.domain,
            "base_url": community.base_url, "stream_names": community.stream_names}


def cmd_update_community(args: argparse.Namespace, settings: Settings) -> int:
    from app.actions.communities import update_community

    settings = resolve_database(settings)

    async def run(pool: asyncpg.Pool) -> dict[str, Any]:
        community = await update_community(
            pool, domain=args.domain, stream_names=args.stream_names)
        return _community_json(community)

    _print_json(asyncio.run(_with_pool(settings, run)))
    return 0


def cmd_create_user(args: argparse.Namespace, settings: Settings) -> int:
    from app.actions import users as user_actions
    from app.context import Viewer
    from app.render.users import embedded_user
    from storage import communities

    settings = resolve_database(settings)

    async def run(pool: asyncpg.Pool) -> dict[str, Any]:
        community = await communities.by_domain(pool, args.domain)
        if community is None:
            raise SystemExit(f"no community with domain {args.domain}")
        actor = Viewer.system(community.id)
        fields = user_actions.UserFields(
            email=args.email, password=args.password, first_name=args.first_name,
            last_name=args.last_name, username=args.username, role=args.role,
        )
        row = await user_actions.create_user(pool, Passwords(settings.argon2), actor, fields)
        return {**embedded_user(row, community.base_url), "email": row["email"]}

    _print_json(asyncio.run(_with_pool(settings, run)))
    return 0


def cmd_routes(args: argparse.Namespace, settings: Settings) -> int:
    from app.routes import route_lines

    for line in route_lines():
        print(line)
    return 0


def cmd_seed_demo(args: argparse.Namespace, settings: Settings) -> int:
    from app.seed import seed_demo

    settings = resolve_database(settings)

    async def run(pool: asyncpg.Pool) -> dict[str, Any]:
        return await seed_demo(pool, Passwords(settings.argon2), domain=args.domain,
                               users=args.users)

    _print_json(asyncio.run(_with_pool(settings, run)))
    return 0


def cmd_backfill_feed(args: argparse.Namespace, settings: Settings) -> int:
    """Fill what migration 0012 added to existing rows, in batches (safe while serving)."""
    from storage import versions
    from storage.feed_backfill import backfill

    if args.batch < 1:
        print("error: --batch must be at least 1", file=sys.stderr)
        return 2
    settings = resolve_database(settings)

    async def run(pool: asyncpg.Pool) -> dict[str, int]:
        filled = await backfill(pool, args.batch)
        # the filled copies order the message lists: their ETags must change (docs/polling.md)
        await versions.bump_all(pool)
        return filled

    _print_json({"filled": asyncio.run(_with_pool(settings, run))})
    return 0


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from app.worker import run_worker

    check_static(settings)
    settings = resolve_database(settings)
    asyncio.run(check_services(settings))
    configure_logging(settings.log_level, settings.log_format)

    async def run() -> None:
        # SIGTERM/SIGINT: the push loop finishes the batch it holds (jobs it did not get to
        # go back to the queue when their lease ends), then the heartbeat says goodbye.
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await run_worker(settings, once=args.once, stop=stop)

    asyncio.run(run())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="commons", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="run the server (migrates first)")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--workers", type=int, default=1,
                   help="server processes sharing the port (needs REDIS_URL when > 1)")
    p.add_argument("--no-bootstrap", action="store_true",
                   help="do not create the local community on an empty database")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("migrate", help="apply pending migrations")
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("create-community", help="create a community and its first admin")
    p.add_argument("--name", required=True)
    p.add_argument("--domain", required=True)
    p.add_argument("--admin-email", required=True)
    p.add_argument("--admin-password", required=True)
    p.add_argument("--base-url", help="public URL of the community (default https://DOMAIN)")
    p.add_argument("--stream-names", choices=["classic", "current"], default="current",
                   help="classic: Home and Company streams are named 'Home Stream' and "
                        "'Company Stream' (older clients look them up so)")
    p.set_defaults(func=cmd_create_community)

    p = sub.add_parser("update-community", help="change a community's settings")
    p.add_argument("--domain", required=True)
    p.add_argument("--stream-names", choices=["classic", "current"])
    p.set_defaults(func=cmd_update_community)

    p = sub.add_parser("create-user", help="create a user in a community")
    p.add_argument("--domain", required=True)
    p.add_argument("--email", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--first-name")
    p.add_argument("--last-name")
    p.add_argument("--username")
    p.add_argument("--role", choices=["member", "tenant_admin", "external_contributor"])
    p.set_defaults(func=cmd_create_user)

    p = sub.add_parser("routes", help="print every route")
    p.set_defaults(func=cmd_routes)

    p = sub.add_parser("worker", help="run background jobs")
    p.add_argument("--once", action="store_true", help="run pending jobs, then exit")
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("seed-demo", help="fill a community with demo data")
    p.add_argument("--domain", default="localhost")
    p.add_argument("--users", type=int, default=25)
    p.set_defaults(func=cmd_seed_demo)

    p = sub.add_parser("backfill-feed",
                       help="fill the feed's copies of last_interacted_at on existing rows "
                            "(migration 0012), in batches, while serving")
    p.add_argument("--batch", type=int, default=5000, help="rows per transaction")
    p.set_defaults(func=cmd_backfill_feed)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    try:
        return int(args.func(args, settings))
    except SettingsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except MigrationError as error:
        print(f"error: {redact(str(error))}", file=sys.stderr)
        return 1
    except ApiError as error:
        print(f"error: {'; '.join(error.messages)}", file=sys.stderr)
        return 1
    except OSError as error:  # e.g. the port is taken, the data directory is not writable
        print(f"error: {redact(str(error))}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
