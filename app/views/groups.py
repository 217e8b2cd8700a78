"""Groups: lists and search, show, create, update, archive, destroy, join, leave and pins.

Designed where the spec is silent:
- `GET /api/groups/mutual?user_id=A[&other_user_id=B]`: groups the viewer can read of which
  both A and B (default: the viewer) are members.
- `GET /api/groups/pinned`: the viewer's pinned groups, in the order pinned.
  `POST /api/groups/:group_id/pin` and `DELETE /api/groups/:group_id/pin` pin and unpin a group
  the viewer can see; both answer 200 {"group"} and are idempotent.
- `GET /api/groups/search?q=`: word-prefix search on names over every group the viewer can see
  (private groups that accept requests included); an empty q answers no groups.
"""

from __future__ import annotations

from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, Field, model_validator

from app.access import access_group, access_user
from app.actions import groups as actions
from app.context import community_of, viewer_of
from app.params import (
    LOOSE,
    OptionalId,
    Page,
    PageQuery,
    QueryFlag,
    parse,
    parse_page,
    path_id,
)
from app.render.groups import full_group
from app.resources import hub_of, pool_of
from app.responses import created, json_response, no_content

M = TypeVar("M", bound=PageQuery)
PERMISSION = "^(public|private|external_contributor)$"


class GroupParams(BaseModel):
    model_config = LOOSE

    name: str | None = Field(None, max_length=255)
    description: str | None = Field(None, max_length=10_000)
    permission_mode: str | None = Field(None, pattern=PERMISSION)
    allow_access_request: bool | None = None
    chat: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def aliases(cls, data: Any) -> Any:
        """`permission` for `permission_mode` and `chat_enabled` for `chat` are accepted too."""
        if isinstance(data, dict):
            data = dict(data)
            if "permission_mode" not in data and "permission" in data:
                data["permission_mode"] = data["permission"]
            if "chat" not in data and "chat_enabled" in data:
                data["chat"] = data["chat_enabled"]
        return data

    def to_fields(self) -> actions.GroupFields:
        return actions.GroupFields(
            name=self.name, description=self.description, permission=self.permission_mode,
            allow_access_request=self.allow_access_request, chat_enabled=self.chat,
        )


class GroupCreateBody(BaseModel):
    model_config = LOOSE
    group: GroupParams


class GroupUpdateBody(BaseModel):
    model_config = LOOSE
    group: GroupParams = Field(default_factory=GroupParams)


class GroupListQuery(PageQuery):
    model_config = LOOSE
    can_join_only: QueryFlag = False
    can_request_membership_only: QueryFlag = False
    include_private_requestable_groups: QueryFlag = False
    q: str = Field("", max_length=500)
    user_id: OptionalId = None


class GroupSearchQuery(PageQuery):
    model_config = LOOSE
    q: str = Field("", max_length=500)


class MutualQuery(PageQuery):
    model_config = LOOSE
    user_id: int
    other_user_id: OptionalId = None


async def parse_listing(request: web.Request, model: type[M]) -> tuple[M, Page]:
    """A list's parameters and its page; a malformed page or per_page is a 400 (whatever else
    the model would call a 422)."""
    query = await parse(request, model)
    return query, query.paging


def _render(request: web.Request, rows: list[Any]) -> list[dict[str, Any]]:
    base = community_of(request).base_url
    viewer = viewer_of(request)
    return [full_group(r, base, viewer) for r in rows]


def _one(request: web.Request, row: Any) -> dict[str, Any]:
    return {"group": _render(request, [row])[0]}


async def _list(
    request: web.Request, query: GroupListQuery, page: Page, member_ids: list[int]
) -> web.Response:
    viewer = viewer_of(request)
    tsquery = actions.name_tsquery(query.q)
    if tsquery is None and query.q.strip():
        return json_response({"groups": []})  # a q with no word in it matches nothing
    rows = await actions.list_groups(
        pool_of(request), viewer, page,
        include_requestable=query.include_private_requestable_groups,
        can_join_only=query.can_join_only,
        can_request_only=query.can_request_membership_only,
        tsquery=tsquery, member_ids=member_ids,
    )
    return json_response({"groups": _render(request, rows)})


async def list_groups(request: web.Request) -> web.Response:
    """Groups the viewer can read, by name. Filters: can_join_only, can_request_membership_only,
    include_private_requestable_groups, q (word prefixes of the name), user_id (a member)."""
    query, page = await parse_listing(request, GroupListQuery)
    member_ids: list[int] = []
    if query.user_id is not None:
        user = await access_user(pool_of(request), viewer_of(request), query.user_id)
        member_ids = [user["id"]]
    return await _list(request, query, page, member_ids)


async def list_user_groups(request: web.Request) -> web.Response:
    """GET /api/users/:user_id/groups: groups the viewer can read of which the user is a member
    (the same filters as GET /api/groups)."""
    query, page = await parse_listing(request, GroupListQuery)
    user = await access_user(pool_of(request), viewer_of(request), path_id(request, "user_id"))
    return await _list(request, query, page, [user["id"]])


async def search_groups(request: web.Request) -> web.Response:
    query, page = await parse_listing(request, GroupSearchQuery)
    tsquery = actions.name_tsquery(query.q)
    if tsquery is None:
        return json_response({"groups": []})
    viewer = viewer_of(request)
    rows = await actions.list_groups(
        pool_of(request), viewer, page, include_requestable=True, tsquery=tsquery
    )
    return json_response({"groups": _render(request, rows)})


async def mutual_groups(request: web.Request) -> web.Response:
    """Groups shared by user_id and other_user_id (default: the viewer), readable by the viewer."""
    query, page = await parse_listing(request, MutualQuery)
    viewer = viewer_of(request)
    pool = pool_of(request)
    first = await access_user(pool, viewer, query.user_id)
    second_id = query.other_user_id if query.other_user_id is not None else viewer.id
    second = await access_user(pool, viewer, second_id)
    rows = await actions.list_groups(pool, viewer, page, member_ids=[first["id"], second["id"]])
    return json_response({"groups": _render(request, rows)})


async def pinned_groups(request: web.Request) -> web.Response:
    page = await parse_page(request)
    viewer = viewer_of(request)
    rows = await actions.pinned_groups(pool_of(request), viewer, page)
    return json_response({"groups": _render(request, rows)})


async def show_group(request: web.Request) -> web.Response:
    row = await access_group(pool_of(request), viewer_of(request), path_id(request, "group_id"))
    return json_response(_one(request, row))


async def create_group(request: web.Request) -> web.Response:
    body = await parse(request, GroupCreateBody)
    row = await actions.create_group(pool_of(request), viewer_of(request), body.group.to_fields(),
                                     hub=hub_of(request))
    return created(_one(request, row))


async def update_group(request: web.Request) -> web.Response:
    group_id = path_id(request, "group_id")
    body = await parse(request, GroupUpdateBody)
    row = await actions.update_group(
        pool_of(request), viewer_of(request), group_id, body.group.to_fields()
    )
    return json_response(_one(request, row))


async def delete_group(request: web.Request) -> web.Response:
    await actions.delete_group(pool_of(request), viewer_of(request), path_id(request, "group_id"),
                               hub=hub_of(request))
    return no_content()


async def archive_group(request: web.Request) -> web.Response:
    row = await actions.archive_group(
        pool_of(request), viewer_of(request), path_id(request, "group_id")
    )
    return json_response(_one(request, row))


async def join_group(request: web.Request) -> web.Response:
    row = await actions.join_group(pool_of(request), viewer_of(request),
                                   path_id(request, "group_id"), hub=hub_of(request))
    return json_response(_one(request, row))


async def leave_group(request: web.Request) -> web.Response:
    row = await actions.leave_group(pool_of(request), viewer_of(request),
                                    path_id(request, "group_id"), hub=hub_of(request))
    return json_response(_one(request, row))


async def pin_group(request: web.Request) -> web.Response:
    row = await actions.pin_group(pool_of(request), viewer_of(request),
                                  path_id(request, "group_id"), pinned=True)
    return json_response(_one(request, row))


async def unpin_group(request: web.Request) -> web.Response:
    row = await actions.pin_group(pool_of(request), viewer_of(request),
                                  path_id(request, "group_id"), pinned=False)
    return json_response(_one(request, row))

