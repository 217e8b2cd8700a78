"""Notifications (spec "Notifications"): the viewer's list, and marking them read."""

from __future__ import annotations

from typing import Annotated, Any

from aiohttp import web
from pydantic import BeforeValidator

from app.actions import notifications as actions
from app.actions.notifications import Filter
from app.context import community_of, viewer_of
from app.params import LOOSE, PageQuery, parse, path_id
from app.resources import hub_of, pool_of
from app.responses import json_response, no_content
from app.views.conditional import conditional


def _blank_to_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


class NotificationListQuery(PageQuery):
    """page, per_page (default 20, at most 500) and filter (one of the eight kinds)."""

    model_config = LOOSE
    filter: Annotated[Filter | None, BeforeValidator(_blank_to_none)] = None


async def _list(request: web.Request, filter_: str | None) -> web.Response:
    query = await parse(request, NotificationListQuery)
    page = query.paging
    rendered = await actions.list_notifications(
        pool_of(request), viewer_of(request), community_of(request).base_url,
        filter_ if filter_ is not None else query.filter, page.offset, page.limit,
    )
    return json_response(rendered)


@conditional
async def list_notifications(request: web.Request) -> web.Response:
    """GET /api/notifications: {notifications_count, unread_notifications_count,
    notifications} (most recent first; ?filter= restricts, counts included)."""
    return await _list(request, None)


@conditional
async def list_filtered_notifications(request: web.Request) -> web.Response:
    """GET /api/notifications/:filter: the same, for one filter (an unknown filter is a 404)."""
    return await _list(request, actions.check_filter(request.match_info["filter"]))


async def mark_all_read(request: web.Request) -> web.Response:
    await actions.mark_all_read(pool_of(request), hub_of(request), viewer_of(request))
    return no_content()


async def mark_read(request: web.Request) -> web.Response:
    await actions.mark_read(
        pool_of(request), hub_of(request), viewer_of(request), path_id(request, "id")
    )
    return no_content()
