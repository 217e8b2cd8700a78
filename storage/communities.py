"""Communities (tenants)."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg


@dataclass(frozen=True, slots=True)
class Community:
    id: int
    name: str
    domain: str
    base_url: str
    # 'current' or 'classic': the names of the Home and Company streams (decisions.md)
    stream_names: str = "current"


_COLUMNS = "id, name, domain, base_url, stream_names"

BY_DOMAIN = f"SELECT {_COLUMNS} FROM communities WHERE lower(domain) = lower($1)"
# The community whose domain is the host; while a deployment holds a single community, every
# host name serves it (local use). One query either way.
FOR_HOST = f"""
SELECT {_COLUMNS}, lower(domain) = lower($1) AS exact FROM communities
WHERE lower(domain) = lower($1) OR (SELECT count(*) FROM communities) = 1
ORDER BY exact DESC
LIMIT 1
"""
INSERT = f"""
INSERT INTO communities (name, domain, base_url, stream_names) VALUES ($1, $2, $3, $4)
RETURNING {_COLUMNS}
"""
SET_STREAM_NAMES = f"""
UPDATE communities SET stream_names = $2 WHERE lower(domain) = lower($1)
RETURNING {_COLUMNS}
"""


def _of(row: asyncpg.Record | None) -> Community | None:
    return Community(**dict(row)) if row else None


async def by_domain(conn: asyncpg.Connection | asyncpg.Pool, domain: str) -> Community | None:
    return _of(await conn.fetchrow(BY_DOMAIN, domain))


async def for_host(
    conn: asyncpg.Connection | asyncpg.Pool, host: str
) -> tuple[Community, bool] | None:
    """(community, exact) for a request host (port stripped); exact=False for the sole fallback."""
    domain = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    row = await conn.fetchrow(FOR_HOST, domain)
    if row is None:
        return None
    return Community(row["id"], row["name"], row["domain"], row["base_url"],
                     row["stream_names"]), row["exact"]


async def insert(
    conn: asyncpg.Connection, name: str, domain: str, base_url: str,
    stream_names: str = "current",
) -> Community:
    row = await conn.fetchrow(INSERT, name, domain, base_url, stream_names)
    community = _of(row)
    assert community is not None
    return community


async def set_stream_names(
    conn: asyncpg.Connection | asyncpg.Pool, domain: str, stream_names: str
) -> Community | None:
    return _of(await conn.fetchrow(SET_STREAM_NAMES, domain, stream_names))


async def by_id(conn: asyncpg.Connection | asyncpg.Pool, community_id: int) -> Community | None:
    return _of(await conn.fetchrow(f"SELECT {_COLUMNS} FROM communities WHERE id = $1",
                                   community_id))


async def all_communities(conn: asyncpg.Connection | asyncpg.Pool) -> list[Community]:
    rows = await conn.fetch(f"SELECT {_COLUMNS} FROM communities ORDER BY id")
    return [Community(**dict(r)) for r in rows]
