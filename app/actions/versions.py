"""The validators of the lists clients poll (issue 13, docs/polling.md): a strong ETag made of
the content versions that units of work bump at commit (storage/versions.py), never of the
page itself, so that answering a matching If-None-Match runs no page query and no rendering.

What an ETag covers, and why it is never stale:
- the community's content version and the viewer's own version, read BEFORE the page query: a
  change commits together with its bump, so a page rendered after this read shows at least what
  these versions say (a change committing in between only makes the next request a 200);
- for message lists, the end of the latest sticky period that has passed (announcements stop
  being sticky with no write);
- the viewer (id and role), the community (id, name, base URL: what URLs are built from, as
  cached by this process), the request's format and its path with the query string;
- CODE: a digest of the code and migrations, so a deploy that renders differently changes
  every ETag.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path

import asyncpg

from app.context import Viewer
from storage import versions
from storage.communities import Community

_ROOT = Path(__file__).resolve().parent.parent.parent


def _code_digest() -> str:
    digest = hashlib.blake2b(digest_size=8)
    for folder, pattern in (("app", "*.py"), ("storage", "*.py"), ("migrations", "*.sql")):
        for path in sorted((_ROOT / folder).rglob(pattern)):
            digest.update(path.relative_to(_ROOT).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


CODE = _code_digest()


async def etag(
    pool: asyncpg.Pool, viewer: Viewer, community: Community, request_key: str, *, sticky: bool,
    known: tuple[int, int, datetime | None] | None = None,
) -> str:
    """The strong ETag of what `viewer` is answered for `request_key` (format, path and query)
    right now; `sticky`: the answer lists messages (see the module's docstring). `known`: the
    versions as this request's authentication read them (app.context.VERSIONS), else they are
    read now."""
    if known is None:
        known = await versions.read(pool, viewer.community_id, viewer.id, sticky)
    content, own, sticky_ended = known
    if not sticky:
        sticky_ended = None
    key = (f"{CODE}\0{community.id}\0{community.name}\0{community.base_url}\0"
           f"{community.stream_names}\0{viewer.id}\0{viewer.role}\0{content}\0{own}\0"
           f"{sticky_ended.isoformat() if sticky_ended else ''}\0{request_key}")
    return '"' + hashlib.blake2b(key.encode(), digest_size=16).hexdigest() + '"'
