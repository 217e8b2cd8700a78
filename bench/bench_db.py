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


@contextlib.asynccontextmanager
async def fresh_database(admin_dsn: str, prefix: str) -> AsyncIterator[str]:
    name = f"{prefix}_{secrets.token_hex(6)}"
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    try:
        yield with_database(admin_dsn, name)
    finally:
        conn = await asyncpg.connect(admin_dsn)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()
