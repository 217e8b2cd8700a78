"""Group memberships and membership requests.

Shapes decided where the spec is silent:
- A membership (GET/POST/PUT .../memberships, approve) is `{"id", "user_id", "role",
  "role_key", "user": <full User>}`; add_members answers the same without `user` (exactly the
  captured shape), and `{"id": null, "user_id": null, "role", "role_key", "invite": "<email>"}`
  for an invited address that is not a user yet.
- GET /api/groups/:group_id/members: `role=member` (the default) lists every member,
  `role=admin` only the admins; a viewer who may see a private group but not read it (it accepts
  requests) may list its admins only (403 otherwise).
- Membership requests: `POST .../membership_requests` answers 201 {"membership_request":
  {"id", "group_id", "user_id", "created_at", "user"}}; group admins list them with
  `GET /api/groups/:group_id/membership_requests` (oldest first), and answer them with
  `POST .../membership_requests/:request_id/approve` (200 {"group_membership"}) or
  `POST .../membership_requests/:request_id/reject` (204).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import BaseModel, BeforeValidator, Field

from app.actions import memberships as actions
from app.actions.users import full_users
from app.context import community_of, viewer_of
from app.params import (
    LOOSE,
    OptionalId,
    OptionalStr,
    PageQuery,
    QueryFlag,
    as_list,
    parse,
    parse_page,
    path_id,
)
from app.render.groups import (
    group_membership,
    invitation,
    membership,
    membership_request,
    membership_with_user,
)
from app.resources import hub_of, pool_of, presence_of
from app.responses import created, json_response, no_content
from app.views.groups import parse_listing


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


Role = Annotated[Literal["member", "admin"], BeforeValidator(_lower)]


class MembershipParams(BaseModel):
    model_config = LOOSE
    user_id: int
    role: Role = "member"


class MembershipBody(BaseModel):
    model_config = LOOSE
    group_membership: MembershipParams


class RoleParams(BaseModel):
    model_config = LOOSE
    role: Role


class MembershipUpdateBody(BaseModel):
    model_config = LOOSE
    group_membership: RoleParams


class NewMemberParams(BaseModel):
    model_config = LOOSE
    user_id: OptionalId = None
    email: OptionalStr = Field(None, max_length=254)
    invite: bool = False
    role: Role = "member"


class AddMembersBody(BaseModel):
    model_config = LOOSE
    group_memberships: Annotated[list[NewMemberParams], BeforeValidator(as_list)]


class RemoveMemberQuery(BaseModel):
    model_config = LOOSE
    user_id: int


class MembersQuery(PageQuery):
    model_config = LOOSE
    role: Role = "member"
    separate_roles: QueryFlag = False
    send_user_presence: QueryFlag = False


class MembershipsQuery(PageQuery):
    model_config = LOOSE
    separate_roles: QueryFlag = False


async def _users(request: web.Request, rows: list[Any]) -> list[dict[str, Any]]:
    return await full_users(pool_of(request), viewer_of(request), rows,
                            community_of(request).base_url)


async def _member_json(request: web.Request, row: Any) -> dict[str, Any]:
    return membership_with_user(row, (await _users(request, [row]))[0])


async def list_my_memberships(request: web.Request) -> web.Response:
    """GET /api/group_memberships: the viewer's groups, by name, with their role in each."""
    page = await parse_page(request)
    viewer = viewer_of(request)
    rows = await actions.my_memberships(pool_of(request), viewer, page)
    base = community_of(request).base_url
    return json_response({"group_memberships": [group_membership(r, base, viewer) for r in rows]})


async def list_members(request: web.Request) -> web.Response:
    query, page = await parse_listing(request, MembersQuery)
    viewer = viewer_of(request)
    rows = await actions.list_members(
        pool_of(request), viewer, path_id(request, "group_id"), page,
        admins_only=query.role == "admin", admins_first=query.separate_roles,
    )
    users = await _users(request, rows)
    if query.send_user_presence:
        # each user's `online` (last key): a live realtime connection lately (app.presence)
        online = await presence_of(request).online(viewer.community_id,
                                                   [u["id"] for u in users])
        users = [{**u, "online": u["id"] in online} for u in users]
    return json_response({"users": users})


async def list_memberships(request: web.Request) -> web.Response:
    """GET /api/groups/:group_id/memberships: group_id is an id or a groupname."""
    query, page = await parse_listing(request, MembershipsQuery)
    viewer = viewer_of(request)
    rows = await actions.list_members(
        pool_of(request), viewer, request.match_info["group_id"], page,
        admins_first=query.separate_roles,
    )
    rendered = await _users(request, rows)
    return json_response({"group_memberships": [
        membership_with_user(row, user) for row, user in zip(rows, rendered, strict=True)
    ]})


async def create_membership(request: web.Request) -> web.Response:
    group_id = path_id(request, "group_id")
    body = await parse(request, MembershipBody)
    row = await actions.add_member(
        pool_of(request), viewer_of(request), group_id, body.group_membership.user_id,
        body.group_membership.role, hub=hub_of(request),
    )
    return created({"group_membership": await _member_json(request, row)})


async def add_members(request: web.Request) -> web.Response:
    group_id = path_id(request, "group_id")
    body = await parse(request, AddMembersBody)
    entries = [
        actions.NewMember(user_id=e.user_id, email=e.email, invite=e.invite, role=e.role)
        for e in body.group_memberships
    ]
    added = await actions.add_members(pool_of(request), viewer_of(request), group_id, entries,
                                      hub=hub_of(request))
    return created({"group_memberships": [
        invitation(a.invite, a.role) if a.invite is not None
        else membership(a.membership_id, a.user_id, a.role, a.user_role)
        for a in added
    ]})


async def update_membership(request: web.Request) -> web.Response:
    group_id = path_id(request, "group_id")
    membership_id = path_id(request, "membership_id")
    body = await parse(request, MembershipUpdateBody)
    row = await actions.update_membership(
        pool_of(request), viewer_of(request), group_id, membership_id,
        body.group_membership.role,
    )
    return json_response({"group_membership": await _member_json(request, row)})


async def delete_membership(request: web.Request) -> web.Response:
    """DELETE /api/groups/:group_id/memberships?user_id=N removes that member (204)."""
    group_id = path_id(request, "group_id")
    query = await parse(request, RemoveMemberQuery)
    await actions.remove_member(pool_of(request), viewer_of(request), group_id, query.user_id,
                                hub=hub_of(request))
    return no_content()


async def create_membership_request(request: web.Request) -> web.Response:
    row = await actions.request_membership(
        pool_of(request), viewer_of(request), path_id(request, "group_id")
    )
    user = (await _users(request, [row]))[0]
    return created({"membership_request": membership_request(row, user)})


async def cancel_membership_request(request: web.Request) -> web.Response:
    await actions.cancel_membership_request(
        pool_of(request), viewer_of(request), path_id(request, "group_id")
    )
    return no_content()


async def list_membership_requests(request: web.Request) -> web.Response:
    """Group admins: pending requests, oldest first."""
    page = await parse_page(request)
    viewer = viewer_of(request)
    rows = await actions.membership_requests(
        pool_of(request), viewer, path_id(request, "group_id"), page
    )
    rendered = await _users(request, rows)
    return json_response({"membership_requests": [
        membership_request(row, user) for row, user in zip(rows, rendered, strict=True)
    ]})


async def approve_membership_request(request: web.Request) -> web.Response:
    row = await actions.approve_request(
        pool_of(request), viewer_of(request), path_id(request, "group_id"),
        path_id(request, "request_id"), hub=hub_of(request),
    )
    return json_response({"group_membership": await _member_json(request, row)})


async def reject_membership_request(request: web.Request) -> web.Response:
    await actions.reject_request(
        pool_of(request), viewer_of(request), path_id(request, "group_id"),
        path_id(request, "request_id"),
    )
    return no_content()
