"""Users: directory, profiles, search, and admin management."""

from __future__ import annotations

from typing import Annotated, Any

from aiohttp import web
from pydantic import BaseModel, BeforeValidator, Field

from app import authentication
from app.actions import users as actions
from app.actions.attachments import avatar_image, store_avatar
from app.context import Viewer, community_of, viewer_of
from app.params import (
    LOOSE,
    PageQuery,
    StrList,
    UploadedFile,
    parse,
    parse_page,
    path_id,
    read_params,
)
from app.resources import PASSWORDS, blobs_of, hub_of, pool_of
from app.responses import created, json_response


def _manager(value: Any) -> Any:
    # "" clears the manager on update; keep it distinguishable from "absent"
    return -1 if isinstance(value, str) and not value.strip() else value


class UserParams(BaseModel):
    model_config = LOOSE

    first_name: str | None = Field(None, max_length=100)
    last_name: str | None = Field(None, max_length=100)
    email: str | None = Field(None, max_length=254)
    username: str | None = Field(None, max_length=60)
    password: str | None = Field(None, max_length=1024)
    current_password: str | None = Field(None, max_length=1024)
    title: str | None = Field(None, max_length=200)
    company_login: str | None = Field(None, max_length=200)
    manager_id: Annotated[int | None, BeforeValidator(_manager)] = None
    role: str | None = None
    status_message: str | None = Field(None, max_length=500)
    contact_info: dict[str, str] | None = None
    custom_fields: dict[int, str] | None = None
    # `profile_photo[data]`, a multipart file: read by _profile_photo, named here so that a
    # request sending only a photo names a known field
    profile_photo: Any = None

    def to_fields(self) -> actions.UserFields:
        data = self.model_dump(exclude={"manager_id", "profile_photo"})
        clear = self.manager_id == -1
        return actions.UserFields(
            **data, manager_id=None if clear else self.manager_id, clear_manager=clear
        )


class UserCreateBody(BaseModel):
    model_config = LOOSE
    user: UserParams


class UserUpdateBody(BaseModel):
    model_config = LOOSE
    user: UserParams = Field(default_factory=UserParams)


class UserListQuery(PageQuery):
    model_config = LOOSE
    state: str = Field("active", pattern="^(active|inactive|terminated|all)$")
    email: StrList | None = None


class SearchQuery(PageQuery):
    model_config = LOOSE
    q: str = Field("", max_length=500)


async def _render_full(request: web.Request, row: Any) -> dict[str, Any]:
    return (await actions.full_users(
        pool_of(request), viewer_of(request), [row], community_of(request).base_url
    ))[0]


async def _listed(request: web.Request, viewer: Viewer, keys: list[Any]) -> web.Response:
    """A users list page's answer (the directory, search, employees)."""
    base = community_of(request).base_url
    return json_response(
        {"users": await actions.listed_users(pool_of(request), viewer, keys, base)})


async def _render_one(request: web.Request, user_id: int) -> dict[str, Any]:
    row = await actions.full_user_row(pool_of(request), viewer_of(request), user_id)
    return await _render_full(request, row)


async def list_users(request: web.Request) -> web.Response:
    query = await parse(request, UserListQuery)
    page = query.paging
    viewer = viewer_of(request)
    rows = await actions.list_users(
        pool_of(request), viewer, state=query.state, emails=query.email or None,  # blank: any
        page=page,
    )
    return await _listed(request, viewer, rows)


async def show_user(request: web.Request) -> web.Response:
    return json_response({"user": await _render_one(request, path_id(request, "user_id"))})


async def show_by_company_login(request: web.Request) -> web.Response:
    viewer = viewer_of(request)
    row = await actions.full_user_by_company_login(
        pool_of(request), viewer, request.match_info["company_login"]
    )
    return json_response({"user": await _render_full(request, row)})


async def _profile_photo(request: web.Request) -> UploadedFile | None:
    """`user[profile_photo][data]` sent as a multipart file, on create as on update."""
    photo = ((await read_params(request)).get("user") or {}).get("profile_photo")
    upload = photo.get("data") if isinstance(photo, dict) else None
    return upload if isinstance(upload, UploadedFile) else None


async def create_user(request: web.Request) -> web.Response:
    body = await parse(request, UserCreateBody)
    upload = await _profile_photo(request)
    if upload is not None:
        await avatar_image(upload)  # a bad photo is a 422 that creates nobody
    row = await actions.create_user(
        pool_of(request), request.app[PASSWORDS], viewer_of(request), body.user.to_fields()
    )
    if upload is not None:
        await store_avatar(pool_of(request), blobs_of(request), viewer_of(request), row["id"],
                           upload)
    return created({"user": await _render_one(request, row["id"])})


async def update_user(request: web.Request) -> web.Response:
    user_id = path_id(request, "user_id")
    body = await parse(request, UserUpdateBody)
    viewer = viewer_of(request)

    async def confirm(uid: int, password: str) -> None:
        await authentication.confirm_password(request, uid, password)

    updated = await actions.update_user(
        pool_of(request), request.app[PASSWORDS], viewer, user_id, body.user.to_fields(),
        hub=hub_of(request), confirm=confirm,
    )
    if updated.session_epoch is not None and viewer.id == user_id:
        # the session that changed the password goes on; every other one has ended
        await authentication.keep_own_session(request, user_id, updated.session_epoch)
    upload = await _profile_photo(request)
    if upload is not None:
        await store_avatar(pool_of(request), blobs_of(request), viewer_of(request), user_id,
                           upload)
    return json_response({"user": await _render_one(request, user_id)})


async def deactivate_user(request: web.Request) -> web.Response:
    user_id = path_id(request, "user_id")
    await actions.deactivate_user(
        pool_of(request), viewer_of(request), user_id, hub=hub_of(request),
        passwords=request.app[PASSWORDS],
    )
    return json_response({"user": await _render_one(request, user_id)})


def tsquery_of(q: str) -> tuple[str, list[str]]:
    """Word-prefix tsquery text and the whole e-mail addresses in q.

    Words are ANDed; `a or b` (as real clients join several e-mails) ORs them.
    """
    words = [w for w in q.split() if w]
    emails = [w for w in words if "@" in w]
    groups: list[list[str]] = [[]]
    for word in words:
        if word.lower() == "or":
            groups.append([])
            continue
        lexeme = "".join(ch for ch in word.lower() if ch.isalnum() or ch in "@._-")
        if lexeme:
            groups[-1].append("'" + lexeme.replace("'", "") + "':*")
    alternatives = ["(" + " & ".join(g) + ")" for g in groups if g]
    return " | ".join(alternatives), emails


async def _search(request: web.Request, states: tuple[str, ...]) -> web.Response:
    query = await parse(request, SearchQuery)
    page = query.paging
    tsquery, emails = tsquery_of(query.q)
    if not tsquery and not emails:
        return json_response({"users": []})
    viewer = viewer_of(request)
    rows = await actions.search_users(
        pool_of(request), viewer, tsquery=tsquery or "''", emails=emails, states=states,
        page=page,
    )
    return await _listed(request, viewer, rows)


async def search_users(request: web.Request) -> web.Response:
    """Matches active and deactivated users alike, as the original did."""
    return await _search(request, actions.STATE_FILTERS["all"])


async def suggest_users(request: web.Request) -> web.Response:
    """Autocomplete: active users only."""
    return await _search(request, ("active",))


async def list_employees(request: web.Request) -> web.Response:
    page = await parse_page(request)
    viewer = viewer_of(request)
    rows = await actions.employees(pool_of(request), viewer, path_id(request, "user_id"), page)
    return await _listed(request, viewer, rows)

