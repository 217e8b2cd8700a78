"""Test helpers: a small API client and builders for communities and users.

Tests read as examples of the API: `resp = await alice.get("/api/users")`, then assert on
`resp.status` and `resp.json`.
"""

from __future__ import annotations

import base64
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from aiohttp.test_utils import TestClient

from app.actions.communities import create_community
from app.actions.users import UserFields, create_user
from app.context import Viewer
from app.passwords import Passwords
from storage import users as user_storage
from storage.communities import Community
from storage.db import transaction

PASSWORD = "correct horse battery"
_counter = itertools.count(1)


@dataclass
class Response:
    status: int
    json: Any
    headers: Any
    text: str
    raw: bytes = b""


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
            raw = await resp.read()
            text = raw.decode("utf-8", errors="replace")
            body: Any = None
            if resp.content_type == "application/json" and raw:
                body = json.loads(raw)
            return Response(resp.status, body, resp.headers, text, raw)

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

    async def group(
        self, owner: Member, name: str | None = None, *, members: tuple[Member, ...] = (),
        admins: tuple[Member, ...] = (), **params: Any,
    ) -> dict[str, Any]:
        """A group made by `owner` (its admin) through POST /api/groups, with `params` as
        group[...] (e.g. permission_mode="private", allow_access_request=True, chat=True), then
        `members` and `admins` added by the owner. Returns the group JSON as `owner` sees it."""
        name = name or f"Group {next(_counter)}"
        resp = await owner.api.post("/api/groups", json={"group": {"name": name, **params}})
        assert resp.status == 201, resp.text
        group: dict[str, Any] = resp.json["group"]
        entries = [{"user_id": m.id, "role": "member"} for m in members]
        entries += [{"user_id": m.id, "role": "admin"} for m in admins]
        if entries:
            added = await owner.api.post(
                f"/api/groups/{group['id']}/memberships/add_members",
                json={"group_memberships": entries},
            )
            assert added.status == 201, added.text
            group = (await owner.api.get(f"/api/groups/{group['id']}")).json["group"]
        return group

    async def many_users(self, admin: Member, count: int, **fields: Any) -> list[Member]:
        """`count` members at once (one transaction, one password hash), for list tests."""
        password_hash = await self.passwords.hash(PASSWORD)
        out: list[Member] = []
        async with transaction(self.pool) as conn:
            for _ in range(count):
                n = next(_counter)
                email = f"user{n}@{admin.community.domain}"
                row = await user_storage.insert(
                    conn, admin.community.id, email=email, username=f"user{n}",
                    first_name="User", last_name=f"Number{n}", password_hash=password_hash,
                    **fields,
                )
                api = Api(self.client, admin.community.domain, email, PASSWORD)
                out.append(Member(row["id"], email, row["username"], admin.community, api, row))
        return out
