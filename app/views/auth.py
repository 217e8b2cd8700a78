"""Checking credentials, and who am I."""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel, ConfigDict

from app import authentication
from app.actions.users import full_users
from app.context import Viewer, community_of, viewer_of
from app.errors import Unauthorized
from app.middleware import public
from app.params import parse
from app.render.community import community_summary
from app.resources import pool_of
from app.responses import json_response
from storage import users


class Credentials(BaseModel):
    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True)
    email: str | None = None
    password: str | None = None


@public
async def authenticate(request: web.Request) -> web.Response:
    """Basic header, or `email` and `password` as form or JSON; sets the session cookie."""
    community = community_of(request)
    credentials = authentication.basic_credentials(request)
    if credentials is None:
        body = await parse(request, Credentials)
        if not body.email or body.password is None:
            raise Unauthorized("Invalid login or password")
        credentials = (body.email.strip(), body.password)
    row = await authentication.check_password(request, community, *credentials)
    await authentication.remember(request, row)
    viewer = Viewer(id=row["id"], community_id=community.id, role=row["role"], row=row)
    full = await users.full_by_id(pool_of(request), community.id, viewer.id, viewer.id)
    assert full is not None
    profile = (await full_users(pool_of(request), viewer, [full], community.base_url))[0]
    return json_response({
        "communities": [
            {"id": community.id, "name": community.name, "domain": community.domain,
             "profile": profile}
        ]
    })


async def userinfo(request: web.Request) -> web.Response:
    viewer = viewer_of(request)
    pool = pool_of(request)
    full = await users.full_by_id(pool, viewer.community_id, viewer.id, viewer.id)
    assert full is not None
    community = community_of(request)
    user = (await full_users(pool, viewer, [full], community.base_url))[0]
    # The original command-line client's sync_photos reads user.community.
    user["community"] = community_summary(community)
    return json_response({"user": user})
