"""Creating communities and their first admin (used by the command line and tests)."""

from __future__ import annotations

import re

import asyncpg

from app.context import Viewer
from app.errors import Conflict, Invalid, NotFound
from app.passwords import Passwords
from storage import badges, communities, meetings, users
from storage import community_info as community_info_storage
from storage.communities import Community
from storage.db import Conn, transaction

ADMIN_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+$")
DOMAIN_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789.-")
STREAM_NAMES = ("current", "classic")


async def community_by_id(conn: Conn, community_id: int) -> Community | None:
    return await communities.by_id(conn, community_id)


async def community_info(conn: Conn, viewer: Viewer) -> asyncpg.Record:
    """GET /api/community_info's row: the community with the viewer's counts."""
    row = await community_info_storage.info(
        conn, viewer.community_id, viewer.id, viewer.is_external
    )
    if row is None:
        raise NotFound("Community not found")
    return row


def _stream_names(value: str) -> str:
    if value not in STREAM_NAMES:
        raise Invalid.field("stream_names", "must be current or classic")
    return value


def default_base_url(domain: str) -> str:
    return f"http://{domain}" if domain in ("localhost", "127.0.0.1") else f"https://{domain}"


async def create_community(
    pool: asyncpg.Pool,
    passwords: Passwords,
    *,
    name: str,
    domain: str,
    admin_email: str,
    admin_password: str,
    base_url: str | None = None,
    admin_username: str = "admin",
    admin_first_name: str = "Community",
    admin_last_name: str = "Admin",
    stream_names: str = "current",
) -> tuple[Community, asyncpg.Record]:
    stream_names = _stream_names(stream_names)
    domain = domain.strip().lower()
    if not domain or not set(domain) <= DOMAIN_CHARS:
        raise Invalid.field("domain", "must be a host name")
    if not name.strip():
        raise Invalid.field("name", "can't be blank")
    # loose on purpose: the local community's admin is admin@localhost
    if not ADMIN_EMAIL_RE.match(admin_email.strip()):
        raise Invalid.field("admin_email", "is not a valid e-mail address")
    if not admin_password:
        raise Invalid.field("admin_password", "can't be blank")
    admin_email = admin_email.strip()
    password_hash = await passwords.hash(admin_password)
    try:
        async with transaction(pool) as conn:
            community = await communities.insert(
                conn, name.strip(), domain, (base_url or default_base_url(domain)).rstrip("/"),
                stream_names,
            )
            admin = await users.insert(
                conn, community.id, email=admin_email, username=admin_username,
                first_name=admin_first_name, last_name=admin_last_name,
                password_hash=password_hash, role="tenant_admin",
            )
            await badges.create_default_badges(conn, community.id)
            await meetings.create_default_meeting_types(conn, community.id)
    except asyncpg.UniqueViolationError:
        raise Conflict(f"A community with domain {domain} already exists") from None
    return community, admin


async def update_community(
    pool: asyncpg.Pool, *, domain: str, stream_names: str | None = None
) -> Community:
    """The command line's update-community: today only the stream names. The request
    resolver caches communities for a few seconds (app.tenancy), so a running server shows the
    new names within that time."""
    community = await communities.by_domain(pool, domain.strip())
    if community is None:
        raise NotFound(f"no community with domain {domain}")
    if stream_names is not None:
        updated = await communities.set_stream_names(
            pool, community.domain, _stream_names(stream_names))
        assert updated is not None
        community = updated
    return community
