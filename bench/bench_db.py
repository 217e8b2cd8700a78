"""A throwaway database for a benchmark run, dropped at the end whatever happens."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg


def with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + name))


async def create_database(admin_dsn: str, name: str, *, replace: bool = False) -> None:
    """`name`, empty (`replace`: dropped first if it exists)."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        if replace:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


async def drop_databases(admin_dsn: str, names: list[str]) -> None:
    conn = await asyncpg.connect(admin_dsn)
    try:
        for name in names:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def fresh_database(admin_dsn: str, prefix: str) -> AsyncIterator[str]:
    name = f"{prefix}_{secrets.token_hex(6)}"
    await create_database(admin_dsn, name)
    try:
        yield with_database(admin_dsn, name)
    finally:
        await drop_databases(admin_dsn, [name])
