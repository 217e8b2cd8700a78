"""POST /api/users/provision (the original command-line client's `provision`).

Multipart: `file` = the directory export (gzip or plain XML), optional `skip_emails`, `test`,
`add_only` = "true". Callers: a community admin (Basic or session), or an external system
(`Authorization: SocialcastApiClient <id>:<secret>`, or ServiceApiClient). Answers
200 {"provision": {"created", "updated", "deactivated", "reactivated", "unchanged", "errors"}}.
The file is streamed from the socket into the parser: it is never held whole in memory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import BodyPartReader, web

from app import authentication
from app.access import require_admin
from app.actions import provisioning as actions
from app.actions.external_systems import authenticate_system, client_credentials
from app.context import VIEWER, community_of
from app.errors import TooLarge, UnsupportedMediaType
from app.middleware import public
from app.params import parse_query
from app.resources import HUB, LIMITER, PASSWORDS, POOL, SETTINGS
from app.responses import json_response
from app.uploads import multipart_reader, next_part, read_chunk

CHUNK = 64 * 1024


async def _caller_id(request: web.Request) -> int:
    """The calling admin's id, or 0 for an external system; else 401 / 403."""
    community = community_of(request)
    header = request.headers.get("Authorization", "")
    if client_credentials(header) is not None:
        settings = request.app[SETTINGS]
        await authenticate_system(
            request.app[POOL], request.app[LIMITER], community.id,
            community.name.replace('"', "'"), header,
            client_address=authentication.client_address(request),
            failed_limit=settings.rate_limit_failed_logins,
        )
        return 0
    viewer = await authentication.authenticate(request, community)
    request[VIEWER] = viewer
    require_admin(viewer)
    return viewer.id


async def _parts(request: web.Request) -> AsyncIterator[actions.Part]:
    limit = request.app[SETTINGS].max_upload_bytes
    total = 0
    for name, value in parse_query(request.rel_url.raw_query_string).items():
        if isinstance(value, str):
            yield name, value
    reader = await multipart_reader(request)  # a missing boundary is a 400, not a 500
    while (part := await next_part(reader)) is not None:
        if not isinstance(part, BodyPartReader) or not part.name:
            continue
        if part.filename is None and part.name != "file":
            text = await part.text()
            yield part.name, text
            continue

        async def chunks(part: BodyPartReader = part) -> AsyncIterator[bytes]:
            nonlocal total
            while chunk := await read_chunk(part, CHUNK):
                total += len(chunk)
                if total > limit:
                    raise TooLarge()
                yield chunk

        yield part.name, chunks()


@public
async def provision(request: web.Request) -> web.Response:
    caller_id = await _caller_id(request)
    if not request.content_type.startswith("multipart/"):
        raise UnsupportedMediaType("Send multipart/form-data with the export as the field file")
    report = await actions.provision(
        request.app[POOL], community_of(request).id, caller_id, _parts(request),
        hub=request.app.get(HUB), passwords=request.app[PASSWORDS],
    )
    return json_response({"provision": report.as_json()})
