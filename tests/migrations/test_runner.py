"""The migration runner: exactly once under concurrency, checksums, rollback of a failure."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import asyncpg
import pytest

from migrations import MigrationError, apply_migrations, discover
from tests.servers import REPO_ROOT

ALL = [m.name for m in discover()]


async def _applied(dsn: str) -> list[tuple[str, str]]:
    conn = await asyncpg.connect(dsn)
    try:
        exists = await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
        if not exists:
            return []
        rows = await conn.fetch("SELECT name, checksum FROM schema_migrations ORDER BY name")
        return [(r["name"], r["checksum"]) for r in rows]
    finally:
        await conn.close()


async def _table_exists(dsn: str, table: str) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        return bool(await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", table))
    finally:
        await conn.close()


def test_the_repository_has_numbered_migrations() -> None:
    assert ALL[0] == "0001_foundation"
    assert ALL == sorted(ALL)
    # a number, optionally with a letter after it (0016b: a second file of 0016's owner)
    numbers = [name.split("_", 1)[0] for name in ALL]
    assert all(n[:4].isdigit() and len(n) in (4, 5) for n in numbers), numbers
    assert len(set(numbers)) == len(ALL), "two migrations share a number"


async def test_concurrent_runs_apply_each_file_once(fresh_database_url: str) -> None:
    results = await asyncio.gather(*(apply_migrations(fresh_database_url) for _ in range(5)))
    applied = [name for result in results for name in result]
    assert sorted(applied) == ALL  # every file by exactly one of the five
    assert sum(1 for r in results if r) == 1  # the first to get the lock did them all
    assert await _applied(fresh_database_url) == [(m.name, m.checksum) for m in discover()]
    assert await apply_migrations(fresh_database_url) == []
    assert await _table_exists(fresh_database_url, "users")


async def test_concurrent_commons_migrate_processes_apply_each_file_once(
    fresh_database_url: str,
) -> None:
    env = {**os.environ, "DATABASE_URL": fresh_database_url}
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app.cli", "migrate", cwd=REPO_ROOT, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(3)
    ]
    outputs = await asyncio.wait_for(
        asyncio.gather(*(p.communicate() for p in procs)), timeout=120
    )
    applied: list[str] = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode()
        line = out.decode().strip()
        assert line.startswith("applied: "), line
        if "up to date" not in line:
            applied.extend(line.removeprefix("applied: ").split(", "))
    assert sorted(applied) == ALL
    assert [name for name, _ in await _applied(fresh_database_url)] == ALL


async def test_an_edited_migration_is_refused(fresh_database_url: str, tmp_path: Path) -> None:
    first = tmp_path / "0001_first.sql"
    first.write_text("CREATE TABLE first_table (id int);\n")
    (tmp_path / "README.txt").write_text("not a migration")
    (tmp_path / "notes.sql").write_text("SELECT 1/0;")  # not numbered: ignored
    assert await apply_migrations(fresh_database_url, tmp_path) == ["0001_first"]
    first.write_text("CREATE TABLE first_table (id int, extra text);\n")
    (tmp_path / "0002_second.sql").write_text("CREATE TABLE second_table (id int);\n")
    with pytest.raises(MigrationError, match="0001_first"):
        await apply_migrations(fresh_database_url, tmp_path)
    assert [name for name, _ in await _applied(fresh_database_url)] == ["0001_first"]
    assert not await _table_exists(fresh_database_url, "second_table")
    # the lock was released: putting the file back lets the next run go on
    first.write_text("CREATE TABLE first_table (id int);\n")
    again = await asyncio.wait_for(apply_migrations(fresh_database_url, tmp_path), 30)
    assert again == ["0002_second"]


async def test_a_failing_migration_rolls_back(fresh_database_url: str, tmp_path: Path) -> None:
    bad = tmp_path / "0001_bad.sql"
    bad.write_text(
        "CREATE TABLE half_done (id int);\n"
        "INSERT INTO half_done VALUES (1);\n"
        "SELECT 1 / 0;\n"
    )
    with pytest.raises(asyncpg.DivisionByZeroError):
        await apply_migrations(fresh_database_url, tmp_path)
    assert await _applied(fresh_database_url) == []
    assert not await _table_exists(fresh_database_url, "half_done")

    # files before the failing one stay applied; the failing one and those after it do not
    bad.rename(tmp_path / "0002_bad.sql")
    (tmp_path / "0001_good.sql").write_text("CREATE TABLE good (id int);\n")
    (tmp_path / "0003_later.sql").write_text("CREATE TABLE later (id int);\n")
    with pytest.raises(asyncpg.DivisionByZeroError):
        await asyncio.wait_for(apply_migrations(fresh_database_url, tmp_path), 30)
    assert [name for name, _ in await _applied(fresh_database_url)] == ["0001_good"]
    assert await _table_exists(fresh_database_url, "good")
    assert not await _table_exists(fresh_database_url, "half_done")
    assert not await _table_exists(fresh_database_url, "later")

    # fixed, it applies (a failed file was never recorded, so its checksum is free to change)
    (tmp_path / "0002_bad.sql").write_text("CREATE TABLE half_done (id int);\n")
    assert await asyncio.wait_for(apply_migrations(fresh_database_url, tmp_path), 30) == [
        "0002_bad", "0003_later"]
