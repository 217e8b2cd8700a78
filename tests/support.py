"""Test helpers: a small API client and builders for communities and users.

Tests read as examples of the API: `resp = await alice.get("/api/users")`, then assert on
`resp.status` and `resp.json`.
"""

from __future__ import annotations

import base64
import itertools
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from aiohttp.test_utils import TestClient

from app.actions.communities import create_community
from app.actions.users import UserFields, create_user
from app.context import Viewer
from app.passwords import Passwords
from storage.communities import Community

PASSWORD = "correct horse battery"
_counter = itertools.count(1)


@dataclass
class Response:
    status: int
    json: Any
    headers: Any
    text: str


@dataclass
class Api:
    """Requests as one user (or anonymously) against one community's host name."""

    client: TestClient
    host: str
    login: str | None = None
    password: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def as_user(self, login: str, password: str = PASSWORD) -> Api:
        return Api(self.client, self.host, login, password, dict(self.headers))

    def anonymous(self) -> Api:
        return Api(self.client, self.host, None, None, dict(self.headers))

    def _headers(self, extra: dict[str, str] | None) -> dict[str, str]:
        headers = {"Host": self.host, **self.headers}
        if self.login is not None:
            token = base64.b64encode(f"{self.login}:{self.password}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        headers.update(extra or {})
        return headers

    async def request(self, method: str, path: str, **kwargs: Any) -> Response:
        headers = self._headers(kwargs.pop("headers", None))
        async with self.client.request(method, path, headers=headers, **kwargs) as resp:
            text = await resp.text()
            body: Any = None
            if resp.content_type == "application/json" and text:
                body = await resp.json()
            return Response(resp.status, body, resp.headers, text)

    async def get(self, path: str, **kwargs: Any) -> Response:
        return await self.request("GET", path, **kwargs)

    async def post(self, path: str, **kwargs: Any) -> Response:
        return await self.request("POST", path, **kwargs)

    async def put(self, path: str, **kwargs: Any) -> Response:
        return await self.request("PUT", path, **kwargs)

    async def patch(self, path: str, **kwargs: Any) -> Response:
        return await self.request("PATCH", path, **kwargs)

    async def delete(self, path: str, **kwargs: Any) -> Response:
        return await self.request("DELETE", path, **kwargs)


@dataclass
class Member:
    """A user of a test community, with an Api acting as them."""

    id: int
    email: str
    username: str
    community: Community
    api: Api
    row: asyncpg.Record


@dataclass
class World:
    """Builds communities and users through the real actions."""

    pool: asyncpg.Pool
    passwords: Passwords
    client: TestClient

    async def community(self, name: str = "Acme", domain: str | None = None) -> Member:
        """A new community; returns its admin."""
        n = next(_counter)
        slug = "".join(ch for ch in name.lower() if ch.isalnum())
        domain = domain or f"{slug}{n}.example"
        community, admin = await create_community(
            self.pool, self.passwords, name=name, domain=domain,
            admin_email=f"admin@{domain}", admin_password=PASSWORD,
            admin_username=f"admin{n}",
        )
        api = Api(self.client, domain, admin["email"], PASSWORD)
        return Member(admin["id"], admin["email"], admin["username"], community, api, admin)

    async def user(
        self, admin: Member, first_name: str = "Pat", last_name: str | None = None,
        **fields: Any,
    ) -> Member:
        n = next(_counter)
        last_name = last_name if last_name is not None else f"Person{n}"
        email = fields.pop("email", f"{first_name.lower()}{n}@{admin.community.domain}")
        row = await create_user(
            self.pool, self.passwords, Viewer.system(admin.community.id),
            UserFields(email=email, password=fields.pop("password", PASSWORD),
                       first_name=first_name, last_name=last_name, **fields),
        )
        api = Api(self.client, admin.community.domain, email, PASSWORD)
        return Member(row["id"], email, row["username"], admin.community, api, row)
