"""Provisioning benchmark: POST /api/users/provision with a large directory export.

    .venv/bin/python bench/provision.py [--users 100000]

1. Creates a fresh database `commons_provision_<random>` (dropped at the end, whatever
   happens), migrates it and creates one community with its admin.
2. Writes a gzipped export of --users users in the original command-line client's form
   (`<export><users type="array"><user>`: names, e-mail, unique identifier, employee number,
   contact info, two custom fields, account type, roles), streamed to a temporary file.
3. The floor, in this process: gunzip and parse the same file with the same incremental
   parser and reader (app.actions.provisioning.ExportReader), without a database. What
   provisioning costs above it is matching and writing.
4. Starts the real server (`commons serve`, one process) and uploads the file as the client
   does (multipart `file`, streamed from disk), three times: the first run creates every user,
   the second finds every user unchanged, the third changes 10% of them and leaves 1% out
   (deactivated). Reports each run's wall time, the server's CPU seconds, and its memory: RSS
   before the runs and each run's peak (VmHWM, reset before each run), from /proc.

The requirement (issue 9): 100,000 users in under a minute, with bounded memory; each run of
100,000 users prints whether it met that goal.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO_ROOT), str(Path(__file__).resolve().parent)]

import aiohttp  # noqa: E402
from bench_db import fresh_database  # noqa: E402
from rest import (  # noqa: E402
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    DOMAIN,
    basic,
    commons_server,
    cpu_time,
    free_port,
    wait_until_up,
)

GOAL_SECONDS = 60.0  # for GOAL_USERS users (issue 9)
GOAL_USERS = 100_000


def goal_verdict(seconds: float, users: int) -> str:
    """`met` or `missed` against the goal; a smaller run says nothing about it (its fixed costs
    would dominate a scaled limit)."""
    if users != GOAL_USERS:
        return f"goal ({GOAL_USERS} users < {GOAL_SECONDS:.0f} s): not measured at this size"
    return f"goal < {GOAL_SECONDS:.0f} s: {'met' if seconds < GOAL_SECONDS else 'missed'}"


def write_export(path: Path, users: int, *, changed_every: int = 0, skip_every: int = 0) -> None:
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) as out:
        out.write('<?xml version="1.0" encoding="UTF-8"?>\n<export>\n <users type="array">\n')
        for n in range(users):
            if skip_every and n % skip_every == 0:
                continue
            title = "Senior Engineer" if changed_every and n % changed_every == 0 else "Engineer"
            out.write(
                f"<user>\n  <unique-identifier>u{n}</unique-identifier>\n"
                f"  <first-name>First{n}</first-name>\n  <last-name>Last{n}</last-name>\n"
                f"  <employee-number>{100000 + n}</employee-number>\n"
                f"  <contact-info>\n    <email>user{n}@{DOMAIN}</email>\n"
                f"    <location>Office {n % 40}</location>\n"
                f"    <office-phone nil=\"true\"/>\n  </contact-info>\n"
                f'  <custom-fields type="array">\n'
                f"    <custom-field>\n      <id>title</id>\n      <label>title</label>\n"
                f"      <value>{title}</value>\n    </custom-field>\n"
                f"    <custom-field>\n      <id>department</id>\n      <label>Department</label>\n"
                f"      <value>Dept {n % 25}</value>\n    </custom-field>\n"
                f"  </custom-fields>\n  <account-type>member</account-type>\n"
                f'  <roles type="array"/>\n</user>\n'
            )
        out.write(" </users>\n</export>\n")


def parse_floor(path: Path) -> tuple[float, int]:
    """Seconds to gunzip and parse the file with the server's reader, and the users seen."""
    from defusedxml.ElementTree import DefusedXMLParser

    from app.actions.provisioning import ExportReader

    started = time.perf_counter()
    reader = ExportReader()
    parser = DefusedXMLParser(target=reader, forbid_dtd=True)
    with gzip.open(path, "rb") as data:
        while chunk := data.read(64 * 1024):
            parser.feed(chunk)
            reader.take()
    parser.close()
    return time.perf_counter() - started, reader.count


def reset_peak(pid: int) -> None:
    """Start VmHWM over from the current RSS (Linux 4.0+), so each run shows its own peak."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) in KiB."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0])
    return out


async def upload(base: str, path: Path, **flags: str) -> tuple[float, int, Any]:
    form = aiohttp.FormData()
    with path.open("rb") as handle:
        form.add_field("file", handle, filename="users.xml.gz",
                       content_type="application/octet-stream")
        for name, value in flags.items():
            form.add_field(name, value)
        headers = {"Authorization": basic(ADMIN_EMAIL, ADMIN_PASSWORD), "Host": DOMAIN,
                   "Accept": "application/json"}
        started = time.perf_counter()
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(timeout=timeout) as session, session.post(
            f"{base}/api/users/provision", data=form, headers=headers
        ) as resp:
            body = await resp.json(content_type=None)
            return time.perf_counter() - started, resp.status, body


async def run(args: argparse.Namespace) -> int:
    from app.actions.communities import create_community
    from app.config import Settings
    from app.passwords import Passwords
    from migrations import apply_migrations
    from storage.db import create_pool
    from tests.servers import ensure_postgres

    admin_dsn = ensure_postgres()
    async with fresh_database(admin_dsn, "commons_provision") as dsn:
        await apply_migrations(dsn)
        pool = await create_pool(dsn, size=2)
        try:
            await create_community(
                pool, Passwords(Settings().argon2), name="Bench", domain=DOMAIN,
                admin_email=ADMIN_EMAIL, admin_password=ADMIN_PASSWORD,
                base_url=f"https://{DOMAIN}",
            )
        finally:
            await pool.close()
        with tempfile.TemporaryDirectory() as tmp:
            first, third = Path(tmp) / "users.xml.gz", Path(tmp) / "changed.xml.gz"
            started = time.perf_counter()
            write_export(first, args.users)
            write_export(third, args.users, changed_every=10, skip_every=100)
            print(f"export: {args.users} users, {first.stat().st_size / 2**20:.1f} MiB gzipped "
                  f"(written in {time.perf_counter() - started:.1f} s)")
            floor, seen = parse_floor(first)
            print(f"floor (gunzip + parse, no database): {floor:.1f} s for {seen} users")
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            with commons_server(dsn, port, Path(tmp) / "data") as proc:
                await wait_until_up(f"{base}/api/openapi", proc)
                # One authenticated request first: the admin's Argon2id check (64 MiB at the
                # production cost, then cached) is not provisioning's memory.
                async with aiohttp.ClientSession() as session, session.get(
                    f"{base}/api/userinfo", headers={
                        "Authorization": basic(ADMIN_EMAIL, ADMIN_PASSWORD), "Host": DOMAIN},
                ) as warm:
                    assert warm.status == 200, await warm.text()
                before = memory(proc.pid)
                print(f"server RSS before: {before['VmRSS'] / 1024:.1f} MiB")
                runs = (("create all", first), ("all unchanged", first),
                        ("10% changed, 1% absent", third))
                for name, path in runs:
                    cpu0 = cpu_time(proc.pid) or 0.0
                    reset_peak(proc.pid)
                    seconds, status, body = await upload(base, path, skip_emails="true")
                    cpu = (cpu_time(proc.pid) or 0.0) - cpu0
                    mem = memory(proc.pid)
                    report = body.get("provision", body)
                    counts = {k: v for k, v in report.items() if k != "errors"} \
                        if isinstance(report, dict) else report
                    print(f"{name:>24}: {status} in {seconds:5.1f} s (server CPU {cpu:5.1f} s), "
                          f"peak RSS +{(mem['VmHWM'] - before['VmRSS']) / 1024:.1f} MiB; "
                          f"{counts}; {goal_verdict(seconds, args.users)}")
                    if status != 200:
                        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=100_000)
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
