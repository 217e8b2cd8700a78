"""The one explicit table of every route (`commons routes` prints it).

Paths are written as the interface spec writes them (`:name` parameters). Every path is also
served with a `.json` suffix, and a path parameter may not contain `/`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from pydantic import BaseModel

from app.views import auth as auth_views
from app.views import custom_fields as custom_field_views
from app.views import follows as follow_views
from app.views import meta as meta_views
from app.views import users as user_views

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str = ""
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None


def _r(
    method: str,
    path: str,
    handler: Handler,
    summary: str = "",
    *,
    body: type[BaseModel] | None = None,
    query: type[BaseModel] | None = None,
) -> Route:
    return Route(method, path, handler, summary, body, query)


ROUTES: list[Route] = [
    # meta
    _r("GET", "/api/openapi", meta_views.openapi, "The OpenAPI 3.1 document of this API"),
    # authentication
    _r("POST", "/api/authentication", auth_views.authenticate, "Check credentials",
       body=auth_views.Credentials),
    _r("GET", "/api/userinfo", auth_views.userinfo, "The authenticated user"),
    # users
    _r("GET", "/api/users", user_views.list_users, "List users", query=user_views.UserListQuery),
    _r("POST", "/api/users", user_views.create_user, "Create a user (community admin)",
       body=user_views.UserCreateBody),
    _r("GET", "/api/users/search", user_views.search_users, "Search users",
       query=user_views.SearchQuery),
    _r("GET", "/api/users/suggest", user_views.suggest_users, "Suggest users (autocomplete)",
       query=user_views.SearchQuery),
    _r("GET", "/api/users/company_login/:company_login", user_views.show_by_company_login,
       "Show a user by company login"),
    _r("GET", "/api/users/:user_id", user_views.show_user, "Show a user"),
    _r("PUT", "/api/users/:user_id", user_views.update_user,
       "Update yourself, or anyone as community admin", body=user_views.UserUpdateBody),
    _r("DELETE", "/api/users/:user_id", user_views.deactivate_user, "Deactivate a user"),
    _r("GET", "/api/users/:user_id/employees", user_views.list_employees,
       "Users managed by the user"),
    # follows
    _r("GET", "/api/users/:user_id/followers", follow_views.list_followers, "Followers"),
    _r("POST", "/api/users/:user_id/followers", follow_views.follow, "Follow the user"),
    _r("DELETE", "/api/users/:user_id/followers/:my_user_id", follow_views.unfollow_follower,
       "Stop following the user"),
    _r("GET", "/api/users/:user_id/following", follow_views.list_following, "Users followed"),
    _r("DELETE", "/api/users/:user_id/following/:id", follow_views.unfollow_following,
       "Stop following a user"),
    # custom profile fields
    _r("GET", "/api/custom_fields", custom_field_views.list_fields, "List custom fields"),
    _r("POST", "/api/custom_fields", custom_field_views.create_field, "Create a custom field",
       body=custom_field_views.CustomFieldBody),
    _r("GET", "/api/custom_fields/:id", custom_field_views.show_field, "Show a custom field"),
    _r("PUT", "/api/custom_fields/:id", custom_field_views.update_field,
       "Update a custom field", body=custom_field_views.CustomFieldBody),
    _r("DELETE", "/api/custom_fields/:id", custom_field_views.delete_field,
       "Delete a custom field"),
]

_PARAM_RE = re.compile(r":([A-Za-z_][A-Za-z0-9_]*)")


def aiohttp_path(path: str) -> str:
    """`/api/users/:user_id` -> `/api/users/{user_id:[^/]+?}{_ext:(?:\\.json)?}`."""
    return _PARAM_RE.sub(r"{\1:[^/]+?}", path) + r"{_ext:(?:\.json)?}"


def _specificity(route: Route) -> tuple[int, ...]:
    # Literal segments before parameters, so /api/users/search wins over /api/users/:user_id.
    return tuple(1 if seg.startswith(":") else 0 for seg in route.path.strip("/").split("/"))


def add_routes(app: web.Application, routes: list[Route] | None = None) -> None:
    table = routes if routes is not None else ROUTES
    resources: dict[str, web.Resource] = {}
    for route in sorted(table, key=_specificity):
        resource = resources.get(route.path)
        if resource is None:
            resource = app.router.add_resource(aiohttp_path(route.path))
            resources[route.path] = resource
        resource.add_route(route.method, route.handler)


def route_lines(routes: list[Route] | None = None) -> list[str]:
    return [f"{r.method} {r.path}" for r in (routes if routes is not None else ROUTES)]
