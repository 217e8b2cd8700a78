"""Checking credentials, and who am I."""

from __future__ import annotations

from typing import Any

import asyncpg
from aiohttp import web
from pydantic import BaseModel, ConfigDict

from app import authentication
from app.actions.communities import community_by_id
from app.actions.users import full_user_row, full_users, own_full_row
from app.context import COMMUNITY, Community, Viewer, community_of, viewer_of
from app.errors import Unauthorized
from app.middleware import tenantless
from app.params import parse
from app.render.community import community_summary
from app.resources import COMMUNITIES, pool_of
from app.responses import json_response
from app.views.conditional import conditional


class Credentials(BaseModel):
    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True)
    email: str | None = None
    password: str | None = None


async def _profile(request: web.Request, row: asyncpg.Record, community: Community) -> Any:
    viewer = Viewer(id=row["id"], community_id=community.id, role=row["role"], row=row)
    full = await full_user_row(pool_of(request), viewer, viewer.id)
    return (await full_users(pool_of(request), viewer, [full], community.base_url))[0]


def _entry(community: Community, profile: Any) -> dict[str, Any]:
    return {"id": community.id, "name": community.name, "domain": community.domain,
            "profile": profile}


@tenantless
async def authenticate(request: web.Request) -> web.Response:
    """Basic header, or `email` and `password` as form or JSON; sets the session cookie.

    On a host that serves no community (the original's central API host, the command-line
    client's default domain), answers every community whose credentials match (401 if none).
    Tenantless so that such a host is no 404; the community is resolved here instead."""
    community = await request.app[COMMUNITIES].for_host(request.host or "")
    if community is not None:
        request[COMMUNITY] = community
    credentials = authentication.basic_credentials(request)
    if credentials is None:
        body = await parse(request, Credentials)
        if not body.email or body.password is None:
            raise Unauthorized("Invalid login or password")
        credentials = (body.email.strip(), body.password)
    if community is None:
        rows = await authentication.check_password_everywhere(request, *credentials)
        entries = []
        for row in rows:
            found = await community_by_id(pool_of(request), row["community_id"])
            if found is not None:
                entries.append(_entry(found, await _profile(request, row, found)))
        return json_response({"communities": entries})
    row = await authentication.check_password(request, community, *credentials)
    await authentication.remember(request, row)
    return json_response({"communities": [_entry(community,
                                                 await _profile(request, row, community))]})


@conditional
async def userinfo(request: web.Request) -> web.Response:
    viewer = viewer_of(request)
    pool = pool_of(request)
    full = await own_full_row(pool, viewer)
    community = community_of(request)
    user = (await full_users(pool, viewer, [full], community.base_url))[0]
    # The original command-line client's sync_photos reads user.community.
    user["community"] = community_summary(community)
    return json_response({"user": user})
