"""Who is asking: HTTP Basic (e-mail or username) or the session cookie.

Failed logins are throttled per (client address, login); over the limit the answer is 429
with Retry-After, before any password is checked.
"""

from __future__ import annotations

import base64
import binascii

import asyncpg
from aiohttp import web
from aiohttp_session import get_session

from app.context import Viewer
from app.errors import RateLimited, Unauthorized
from app.resources import LIMITER, PASSWORDS, POOL, SETTINGS
from storage import users
from storage.communities import Community

SESSION_USER = "uid"
SESSION_COMMUNITY = "cid"


def basic_credentials(request: web.Request) -> tuple[str, str] | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value:
        return None
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise Unauthorized("Malformed Basic credentials") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    login, sep, password = text.partition(":")
    if not sep:
        raise Unauthorized("Malformed Basic credentials")
    return login.strip(), password


def client_address(request: web.Request) -> str:
    if request.app[SETTINGS].trust_forwarded:
        forwarded = request.headers.get("X-Forwarded-For", "")
        if forwarded:
            return forwarded.split(",")[0].strip()
    return request.remote or "unknown"


async def check_password(
    request: web.Request, community: Community, login: str, password: str
) -> asyncpg.Record:
    """The active user with these credentials, or Unauthorized / RateLimited."""
    app = request.app
    limiter = app[LIMITER]
    limit = app[SETTINGS].rate_limit_failed_logins
    key = f"login:{client_address(request)}:{community.id}:{login.lower()}"
    retry = await limiter.peek(key, limit)
    if retry is not None:
        raise RateLimited(retry, "Too many failed logins; try again later")
    row = await users.by_login(app[POOL], community.id, login) if login else None
    if row is None or row["state"] != "active":
        # Same cost as a wrong password, so timing does not tell which logins exist.
        await app[PASSWORDS].verify_nothing(password)
        ok = False
    else:
        ok = await app[PASSWORDS].verify(row["id"], row["password_hash"], password)
    if not ok or row is None:
        await limiter.hit(key, limit)
        raise Unauthorized("Invalid login or password")
    return row


async def check_password_everywhere(
    request: web.Request, login: str, password: str
) -> list[asyncpg.Record]:
    """The active users of every community with these credentials (the central API host,
    which serves no community); Unauthorized when none, RateLimited as check_password."""
    app = request.app
    limiter = app[LIMITER]
    limit = app[SETTINGS].rate_limit_failed_logins
    key = f"login:{client_address(request)}:central:{login.lower()}"
    retry = await limiter.peek(key, limit)
    if retry is not None:
        raise RateLimited(retry, "Too many failed logins; try again later")
    rows = await users.by_login_everywhere(app[POOL], login) if login else []
    matched = [
        row for row in rows
        if await app[PASSWORDS].verify(row["id"], row["password_hash"], password)
    ]
    if not rows:
        await app[PASSWORDS].verify_nothing(password)
    if not matched:
        await limiter.hit(key, limit)
        raise Unauthorized("Invalid login or password")
    return matched


def _viewer(row: asyncpg.Record) -> Viewer:
    return Viewer(id=row["id"], community_id=row["community_id"], role=row["role"], row=row)


async def authenticate(request: web.Request, community: Community) -> Viewer:
    credentials = basic_credentials(request)
    if credentials is not None:
        return _viewer(await check_password(request, community, *credentials))
    session = await get_session(request)
    uid = session.get(SESSION_USER)
    if isinstance(uid, int) and session.get(SESSION_COMMUNITY) == community.id:
        row = await users.by_id(request.app[POOL], community.id, uid)
        if row is not None and row["state"] == "active":
            return _viewer(row)
        session.invalidate()
    raise Unauthorized()


async def remember(request: web.Request, row: asyncpg.Record) -> None:
    """Start a browser session for this user (used by websockets from browsers)."""
    session = await get_session(request)
    session[SESSION_USER] = row["id"]
    session[SESSION_COMMUNITY] = row["community_id"]
