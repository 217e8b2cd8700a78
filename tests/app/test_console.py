"""`make run` (`commons serve` with nothing configured) keeps the console quiet: two lines, the
address, the admin login and where its password is kept; not the embedded PostgreSQL's
narration, and never the password itself."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import REPO_ROOT, free_port


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """Outside pytest's own temp root: pytest sets that back to 0700 whenever a run starts,
    and the embedded PostgreSQL runs as another user (`pgserver`) that must reach it."""
    path = Path(tempfile.mkdtemp(prefix="commons-console-"))
    yield path / "data"
    postmaster = path / "data" / "postgres" / "postmaster.pid"
    if postmaster.exists():  # serve stops it at exit; if it did not, do it here (fast mode)
        with contextlib.suppress(ValueError, ProcessLookupError):
            os.kill(int(postmaster.read_text().split()[0]), signal.SIGINT)
    shutil.rmtree(path, ignore_errors=True)


async def test_make_run_prints_two_lines(data_dir: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("S3_", "AWS_", "DATABASE_URL", "REDIS_URL", "COMMONS_"))}
    env["COMMONS_DATA_DIR"] = str(data_dir)
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", "serve", "--port", str(port), cwd=REPO_ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(90):
            while not any("serving on" in line for line in lines):
                line = (await proc.stdout.readline()).decode()
                assert line, "serve exited:\n" + "".join(lines)
                lines.append(line)
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = await asyncio.wait_for(proc.communicate(), 60)  # also stops the embedded PG
    output = "".join(lines)
    password_file = data_dir / "admin-password"
    assert lines == [
        f"Created community 'Commons' (localhost). Admin login: admin@localhost "
        f"(password in {password_file.resolve()})\n",
        f"Commons serving on http://127.0.0.1:{port} (1 worker(s))\n",
    ], output
    assert password_file.read_text().strip() not in output + rest.decode()
    assert proc.returncode == 0, rest.decode()
