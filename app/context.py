"""Who is asking, in which community: set on the request by the middleware."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg
from aiohttp import web

from app.errors import Unauthorized
from storage.communities import Community


@dataclass(frozen=True, slots=True)
class Viewer:
    id: int
    community_id: int
    role: str
    row: asyncpg.Record | None = None

    @classmethod
    def system(cls, community_id: int) -> Viewer:
        """The command line and jobs act with community-admin rights."""
        return cls(id=0, community_id=community_id, role="tenant_admin")

    @property
    def is_admin(self) -> bool:
        """Community admin (also reach admin)."""
        return self.role == "tenant_admin"

    @property
    def is_external(self) -> bool:
        return self.role == "external_contributor"


COMMUNITY = web.RequestKey("community", Community)
VIEWER = web.RequestKey("viewer", Viewer)
# The viewer's content versions (storage/versions.py: content, own, end of the latest sticky
# period), when authentication read them from PostgreSQL in this very request; absent
# otherwise (a validator then reads them itself). Never set from anything cached.
VERSIONS: web.RequestKey[tuple[int, int, datetime | None]] = web.RequestKey("versions")
REQUEST_ID = web.RequestKey("request_id", str)


def community_of(request: web.Request) -> Community:
    return request[COMMUNITY]


def viewer_of(request: web.Request) -> Viewer:
    viewer = request.get(VIEWER)
    if viewer is None:
        raise Unauthorized()
    return viewer
