"""The session cookie's storage remembers what it decrypted (app.authentication): the same
answer as decrypting again, for the same cookie text only, and never past the cookie's expiry.
And the authentication layer (app.middleware) writes a session a view changed."""

from __future__ import annotations

import time
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from aiohttp_session import Session, get_session
from multidict import CIMultiDict

from app.authentication import SessionCookieStorage
from app.config import Settings
from app.errors import Unauthorized
from app.middleware import auth_middleware, errors_middleware, tenantless
from app.resources import SETTINGS

NAME = "commons_session"


def _storage(max_age: int = 3600, secret: bytes = b"k" * 32) -> SessionCookieStorage:
    return SessionCookieStorage(secret, cookie_name=NAME, max_age=max_age)


async def _issue(storage: SessionCookieStorage, data: dict[str, Any]) -> str:
    session = Session(None, data=None, new=True, max_age=storage.max_age)
    session.update(data)
    response = web.Response()
    app = web.Application()
    app[SETTINGS] = Settings()
    await storage.save_session(make_mocked_request("GET", "/", app=app), response, session)
    return response.cookies[NAME].value


async def _load(storage: SessionCookieStorage, cookie: str) -> Session:
    request = make_mocked_request("GET", "/", headers=CIMultiDict({"Cookie": f"{NAME}={cookie}"}))
    return await storage.load_session(request)


class _CountingFernet:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.decrypts = 0

    def decrypt(self, token: bytes, ttl: int | None = None) -> bytes:
        self.decrypts += 1
        return bytes(self.inner.decrypt(token, ttl=ttl))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_cookie_is_decrypted_once_and_each_request_gets_its_own_session() -> None:
    storage = _storage()
    cookie = await _issue(storage, {"uid": 7, "cid": 1, "ep": 0})
    counting = _CountingFernet(storage._fernet)
    storage._fernet = counting  # type: ignore[assignment]
    first = await _load(storage, cookie)
    first["uid"] = 99  # a request changing its session changes no other's
    second = await _load(storage, cookie)
    assert counting.decrypts == 1
    assert not second.new and dict(second) == {"uid": 7, "cid": 1, "ep": 0}


async def test_other_cookies_are_decrypted_for_themselves() -> None:
    storage = _storage()
    ann = await _issue(storage, {"uid": 1, "cid": 1, "ep": 0})
    bob = await _issue(storage, {"uid": 2, "cid": 1, "ep": 3})
    assert (await _load(storage, ann))["uid"] == 1
    assert dict(await _load(storage, bob)) == {"uid": 2, "cid": 1, "ep": 3}
    assert (await _load(storage, ann))["uid"] == 1


async def test_a_forged_cookie_or_one_of_another_secret_is_a_new_session() -> None:
    storage = _storage()
    good = await _issue(storage, {"uid": 1, "cid": 1, "ep": 0})
    await _load(storage, good)
    forged = good[:-6] + ("A" if good[-6] != "A" else "B") + good[-5:]
    assert (await _load(storage, forged)).new
    other = await _issue(_storage(secret=b"o" * 32), {"uid": 1, "cid": 1, "ep": 0})
    session = await _load(storage, other)
    assert session.new and dict(session) == {}


async def test_a_remembered_cookie_expires_when_the_cookie_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    storage = _storage(max_age=60)
    cookie = await _issue(storage, {"uid": 1, "cid": 1, "ep": 0})
    assert (await _load(storage, cookie))["uid"] == 1  # remembered now
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + 30)
    assert (await _load(storage, cookie))["uid"] == 1
    monkeypatch.setattr(time, "time", lambda: now + 120)
    session = await _load(storage, cookie)
    assert session.new and dict(session) == {}


# --- the authentication layer writes a changed session into the answer (no aiohttp_session
# middleware: app.middleware.auth_middleware does it) -------------------------------------------


async def _sessions_app(aiohttp_client: Any) -> Any:
    storage = _storage()
    app = web.Application(middlewares=[errors_middleware, auth_middleware(storage)])
    app[SETTINGS] = Settings()

    @tenantless
    async def write(request: web.Request) -> web.Response:
        (await get_session(request))["uid"] = 5
        if request.query.get("redirect"):
            raise web.HTTPFound("/read")
        if request.query.get("error"):
            raise Unauthorized()
        return web.Response(text="ok")

    @tenantless
    async def read(request: web.Request) -> web.Response:
        return web.Response(text=str((await get_session(request)).get("uid")))

    app.router.add_get("/write", write)
    app.router.add_get("/read", read)
    return await aiohttp_client(app)


async def test_a_changed_session_is_written_into_the_answer_or_a_raised_redirect(
    aiohttp_client: Any,
) -> None:
    client = await _sessions_app(aiohttp_client)
    resp = await client.get("/write")
    assert NAME in resp.cookies
    assert await (await client.get("/read")).text() == "5"  # the client's jar sent it back
    redirect = await client.get("/write", params={"redirect": "1"}, allow_redirects=False)
    assert redirect.status == 302 and NAME in redirect.cookies
    untouched = await client.get("/read")
    assert NAME not in untouched.cookies  # unchanged: no Set-Cookie


async def test_a_session_changed_by_a_request_that_ends_in_an_api_error_is_not_written(
    aiohttp_client: Any,
) -> None:
    client = await _sessions_app(aiohttp_client)
    resp = await client.get("/write", params={"error": "1"})
    assert resp.status == 401
    assert NAME not in resp.cookies  # as aiohttp_session's middleware left it
