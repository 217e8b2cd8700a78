"""Who is asking: HTTP Basic (e-mail or username) or the session cookie.

Failed logins are throttled per (client address, user): the e-mail and the username of one
user, in any case, count in one bucket; a login that names no user counts per (address,
login). Over the limit the answer is 429 with Retry-After, before any password is checked.

A session cookie carries the user's session epoch from when it was issued; a password change
or a deactivation increments the epoch, so every cookie issued before is refused.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import Any

import asyncpg
from aiohttp import web
from aiohttp_session import Session, get_session
from aiohttp_session.cookie_storage import EncryptedCookieStorage
from cryptography.fernet import InvalidToken

from app.context import COMMUNITY, VERSIONS, Viewer
from app.errors import Forbidden, RateLimited, Unauthorized
from app.proxy import client_address, is_https
from app.resources import LIMITER, LOOKUPS, PASSWORDS, POOL, SETTINGS
from storage import users, versions
from storage.communities import Community

__all__ = ["client_address"]  # also imported from here by views that throttle by address

SESSION_USER = "uid"
SESSION_COMMUNITY = "cid"
SESSION_EPOCH = "ep"


# Session cookies whose decryption this process remembers (SessionCookieStorage).
DECODED_COOKIES = 10_000


class SessionCookieStorage(EncryptedCookieStorage):
    """The encrypted session cookie, `Secure` whenever the client is on https: a TLS
    connection, `X-Forwarded-Proto: https` from a trusted proxy, or an https base URL.

    A client sends the same cookie on every request, and decrypting it (Fernet: an HMAC, AES
    and JSON) was about a tenth of a 304's CPU. So the plaintext of each cookie this process
    decrypted is remembered, by the cookie's exact text, until the cookie's own expiry
    (issued at + max_age, as Fernet's `ttl` checks it): the same answer decryption would give,
    for the one client that holds that cookie. Nothing else changes: the user, their state and
    their session epoch are still read from PostgreSQL on every request (`authenticate`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # cookie text -> (expires, decoded data); oldest first out when full
        self._decoded: dict[str, tuple[float, Any]] = {}

    async def load_session(self, request: web.Request) -> Session:
        cookie = self.load_cookie(request)
        if cookie is None:
            return await super().load_session(request)
        known = self._decoded.get(cookie)
        if known is not None and known[0] > time.time():
            # a Session copies the data's mapping: the remembered data is never changed
            return Session(None, data=known[1], new=False, max_age=self.max_age)
        self._decoded.pop(cookie, None)  # expired, if it was there
        try:
            token = cookie.encode()
            data = self._decoder(self._fernet.decrypt(token, ttl=self.max_age).decode())
            issued = self._fernet.extract_timestamp(token)
        except InvalidToken:  # forged, of another secret, or expired: as the library does
            return await super().load_session(request)
        expires = issued + self.max_age if self.max_age is not None else float("inf")
        if len(self._decoded) >= DECODED_COOKIES:
            del self._decoded[next(iter(self._decoded))]
        self._decoded[cookie] = (expires, data)
        return Session(None, data=data, new=False, max_age=self.max_age)

    async def save_session(
        self, request: web.Request, response: web.StreamResponse, session: Session
    ) -> None:
        await super().save_session(request, response, session)
        morsel = response.cookies.get(self.cookie_name)
        if morsel is not None and _secure(request):
            morsel["secure"] = True


def _secure(request: web.Request) -> bool:
    if is_https(request):
        return True
    community = request.get(COMMUNITY)
    return community is not None and community.base_url.lower().startswith("https://")


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


async def check_password(
    request: web.Request, community: Community, login: str, password: str
) -> asyncpg.Record:
    """The active user with these credentials, or Unauthorized / RateLimited."""
    app = request.app
    limiter = app[LIMITER]
    limit = app[SETTINGS].rate_limit_failed_logins
    # batched: the logins of many clients connecting at once are read in one query
    row = await app[LOOKUPS].user_by_login(community.id, login) if login else None
    who = f"u{row['id']}" if row is not None else f"l:{login.lower()}"
    key = f"login:{client_address(request)}:{community.id}:{who}"
    retry = await limiter.peek(key, limit)
    if retry is not None:
        raise RateLimited(retry, "Too many failed logins; try again later")
    if row is None or row["state"] != "active":
        # Same cost as a wrong password, so timing does not tell which logins exist.
        await app[PASSWORDS].verify_nothing(password)
        ok = False
    else:
        ok = await app[PASSWORDS].verify(
            row["id"], row["password_hash"], password, epoch=row["session_epoch"]
        )
    if not ok or row is None:
        await limiter.hit(key, limit)
        raise Unauthorized("Invalid login or password")
    return row


async def confirm_password(request: web.Request, user_id: int, password: str) -> None:
    """The current password of a user changing their own e-mail or password: 403 when wrong.
    Guesses count in the same bucket as that user's failed logins from this address."""
    app = request.app
    limiter = app[LIMITER]
    limit = app[SETTINGS].rate_limit_failed_logins
    community = request[COMMUNITY]
    key = f"login:{client_address(request)}:{community.id}:u{user_id}"
    retry = await limiter.peek(key, limit)
    if retry is not None:
        raise RateLimited(retry, "Too many failed logins; try again later")
    stored, epoch = await users.credentials_of(app[POOL], user_id)
    if not await app[PASSWORDS].verify(user_id, stored, password, epoch=epoch):
        await limiter.hit(key, limit)
        raise Forbidden("Current password is wrong",
                        fields={"user[current_password]": ["is wrong"]})


async def check_password_everywhere(
    request: web.Request, login: str, password: str
) -> list[asyncpg.Record]:
    """The active users of every community with these credentials (the central API host,
    which serves no community); Unauthorized when none, RateLimited as check_password."""
    app = request.app
    limiter = app[LIMITER]
    limit = app[SETTINGS].rate_limit_failed_logins
    address = client_address(request)
    rows = await users.by_login_everywhere(app[POOL], login) if login else []
    # The same buckets as a login on each community's own host, so that going through the
    # central host (or switching between e-mail and username there) gives no extra guesses.
    keys = [f"login:{address}:{row['community_id']}:u{row['id']}" for row in rows] or [
        f"login:{address}:central:l:{login.lower()}"
    ]
    for key in keys:
        retry = await limiter.peek(key, limit)
        if retry is not None:
            raise RateLimited(retry, "Too many failed logins; try again later")
    matched = [
        row for row in rows
        if await app[PASSWORDS].verify(
            row["id"], row["password_hash"], password, epoch=row["session_epoch"]
        )
    ]
    if not rows:
        await app[PASSWORDS].verify_nothing(password)
    if not matched:
        for key in keys:
            await limiter.hit(key, limit)
        raise Unauthorized("Invalid login or password")
    return matched


def _viewer(row: asyncpg.Record) -> Viewer:
    return Viewer(id=row["id"], community_id=row["community_id"], role=row["role"], row=row)


async def authenticate(request: web.Request, community: Community) -> Viewer:
    credentials = basic_credentials(request)
    if credentials is not None:
        row = await check_password(request, community, *credentials)
        request[VERSIONS] = versions.of_user(row)  # read just now, with the user
        return _viewer(row)
    session = await get_session(request)
    uid = session.get(SESSION_USER)
    if isinstance(uid, int) and session.get(SESSION_COMMUNITY) == community.id:
        # batched: the requests of a turn of the event loop share one query
        row = await request.app[LOOKUPS].user_by_session(community.id, uid)
        if (
            row is not None
            and row["state"] == "active"
            # a cookie from before the epoch existed carries none: refused too
            and session.get(SESSION_EPOCH) == row["session_epoch"]
        ):
            request[VERSIONS] = versions.of_user(row)
            return _viewer(row)
        session.invalidate()
    raise Unauthorized()


async def remember(request: web.Request, row: asyncpg.Record, epoch: int | None = None) -> None:
    """Start a browser session for this user (used by websockets from browsers), valid until
    their session epoch changes; `epoch` overrides the row's (just changed by this request)."""
    session = await get_session(request)
    session[SESSION_USER] = row["id"]
    session[SESSION_COMMUNITY] = row["community_id"]
    session[SESSION_EPOCH] = row["session_epoch"] if epoch is None else epoch


async def keep_own_session(request: web.Request, user_id: int, epoch: int) -> None:
    """After the user changed their own password: the session that made the change goes on
    with the new epoch; every other one has ended."""
    session = await get_session(request)
    if session.get(SESSION_USER) == user_id:
        session[SESSION_EPOCH] = epoch
