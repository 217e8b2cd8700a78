"""What a trusted reverse proxy tells us about the client: its address and its scheme.

Only with `COMMONS_TRUST_FORWARDED`, and only the entries the trusted proxies wrote. Each proxy
appends the address of its own peer to `X-Forwarded-For`, so with N trusted hops
(`COMMONS_TRUSTED_PROXY_HOPS`, default 1: one nginx) the client's address is the Nth entry from
the right. Everything to the left of it was written by the client and is never used: taking the
first entry let a client rotate it and get unlimited password guesses.
"""

from __future__ import annotations

from aiohttp import web

from app.resources import SETTINGS


def _entries(request: web.Request, header: str) -> list[str]:
    values = request.headers.getall(header, ())
    return [e.strip() for v in values for e in v.split(",") if e.strip()]


def client_address(request: web.Request) -> str:
    """The address the trusted proxy appended, else the peer's address."""
    settings = request.app[SETTINGS]
    if settings.trust_forwarded:
        hops = max(1, settings.trusted_proxy_hops)
        entries = _entries(request, "X-Forwarded-For")
        if len(entries) >= hops:
            return entries[-hops]
        # Fewer entries than trusted proxies: the request skipped one of them, so no entry is
        # known to be proxy-written; the peer is the best we know.
    return request.remote or "unknown"


def is_https(request: web.Request) -> bool:
    """The client reached us over https: directly, or as a trusted proxy says.

    nginx *sets* X-Forwarded-Proto (a client's value does not survive it); a chain of proxies
    that append gives one entry per hop, and only the rightmost `hops` of them are trusted: the
    leftmost of those is what the outermost trusted proxy saw.
    """
    if request.secure:
        return True
    settings = request.app[SETTINGS]
    if not settings.trust_forwarded:
        return False
    entries = _entries(request, "X-Forwarded-Proto")
    if not entries:
        return False
    hops = max(1, settings.trusted_proxy_hops)
    return entries[-min(hops, len(entries))].lower() == "https"
