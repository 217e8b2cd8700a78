"""External systems: the business systems a reach admin (a community admin) registers, their API
client credentials, and the messages posted as one of them.

Rules:
- Every operation but the credentials check is for community admins (reach admins): 403 for
  anyone else, 404 for another community's system.
- `name` and `url` (an absolute http or https address) are required on create and on update
  (422 on `external_system[name]` / `external_system[url]`). `external_system_type` is html
  (the default), sharepoint or google_gadget; `sharepoint_version` (2007 or 2010) only for a
  sharepoint system (422 otherwise; it is cleared when the type changes away from sharepoint).
  On update, a parameter not given keeps its value (the type too: "default html" is the value
  a new system takes).
- The profile photo: `profile_photo[data]` (an image upload, 422 otherwise) becomes the
  system's avatar, served like a user's; `profile_photo_url` (http or https) is stored as given
  and never fetched (there is no fetching from the server): clients show that address. An
  upload wins over an address; giving a new address drops the uploaded photo.
- DELETE deactivates (state inactive). PUT with activate=true reactivates an inactive system
  (ignored when active; activate=false never deactivates).
- Credentials: a random client identifier and a random 256-bit client secret, made on create;
  the secret is shown only in the create response and kept as its SHA-256, compared in constant
  time. `POST /api/external_systems/authentication` takes `Authorization: ServiceApiClient
  <client_identifier>:<client_secret>` (or the `SocialcastApiClient` scheme of the original
  command-line client); an unknown identifier, a wrong secret or an inactive system is a 401.
  Failed attempts are throttled per (client address, identifier) like failed logins.
- `POST /api/external_systems/:id/messages`: a community admin posts a message "as" an active
  system (403 for an inactive one). Messages need a real author: it is the admin who calls,
  with `external_system_id` set (so the system's message list shows it) and source
  `external_system`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from app.access import require_admin
from app.actions.attachments import claim_attachments, delete_blobs, store_file
from app.actions.messages import NewMessage, insert_message
from app.actions.work import work
from app.context import Viewer
from app.errors import Forbidden, Invalid, NotFound, RateLimited, Unauthorized
from app.images import SNIFF_BYTES, sniff
from app.params import Page, UploadedFile
from app.ratelimit import RateLimiter
from realtime.hub import Hub
from storage import attachments as attachment_storage
from storage import external_systems as storage
from storage.blobs import BlobStore
from storage.db import connection

TYPES = ("html", "sharepoint", "google_gadget")
SHAREPOINT_VERSIONS = ("2007", "2010")
SCHEMES = ("serviceapiclient", "socialcastapiclient")
SOURCE = "external_system"

# --- secrets (also used by the group webhooks) ------------------------------------------------


def new_secret() -> str:
    """A random 256-bit secret, URL-safe (no `:` and no `/`)."""
    return secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


# Compared against when nothing matches, so that a miss costs what a hit costs.
_NOTHING = hash_secret(new_secret())


def secret_matches(secret: str, stored_hash: str | None) -> bool:
    """Constant-time comparison of a given secret with a stored hash (None: nothing stored)."""
    same = hmac.compare_digest(hash_secret(secret), stored_hash or _NOTHING)
    return same and stored_hash is not None


# --- parameters -------------------------------------------------------------------------------


@dataclass
class SystemFields:
    """Parameters of a create or an update; None: not given ("" clears description and
    profile_photo_url)."""

    name: str | None = None
    description: str | None = None
    url: str | None = None
    profile_photo_url: str | None = None
    not_in_company_stream: bool | None = None
    external_system_type: str | None = None
    sharepoint_version: str | None = None
    activate: bool = False


def _param(name: str) -> str:
    return f"external_system[{name}]"


def is_web_address(value: str) -> bool:
    parts = urlsplit(value)
    return parts.scheme.lower() in ("http", "https") and bool(parts.netloc) and " " not in value


def _changes(fields: SystemFields, current: asyncpg.Record | None) -> dict[str, Any]:
    """The columns to write, every rule checked (create: current is None)."""
    name = (fields.name or "").strip()
    if not name:
        raise Invalid.field(_param("name"), "can't be blank")
    url = (fields.url or "").strip()
    if not url:
        raise Invalid.field(_param("url"), "can't be blank")
    if not is_web_address(url):
        raise Invalid.field(_param("url"), "must be an http or https address")
    out: dict[str, Any] = {"name": name, "system_url": url}
    if fields.description is not None:
        out["description"] = fields.description.strip() or None
    elif current is None:
        out["description"] = None
    kind = (fields.external_system_type or "").strip().lower()
    if not kind:
        kind = current["external_system_type"] if current is not None else "html"
    if kind not in TYPES:
        raise Invalid.field(_param("external_system_type"), f"must be one of {', '.join(TYPES)}")
    out["external_system_type"] = kind
    version = (fields.sharepoint_version or "").strip()
    if version:
        if version not in SHAREPOINT_VERSIONS:
            raise Invalid.field(_param("sharepoint_version"), "must be 2007 or 2010")
        if kind != "sharepoint":
            raise Invalid.field(_param("sharepoint_version"), "is only for sharepoint systems")
        out["sharepoint_version"] = version
    elif kind != "sharepoint":
        out["sharepoint_version"] = None
    elif current is None:
        out["sharepoint_version"] = None
    if fields.not_in_company_stream is not None:
        out["not_in_company_stream"] = fields.not_in_company_stream
    elif current is None:
        out["not_in_company_stream"] = False
    if fields.profile_photo_url is not None:
        photo_url = fields.profile_photo_url.strip()
        if photo_url and not is_web_address(photo_url):
            raise Invalid.field(_param("profile_photo_url"), "must be an http or https address")
        out["profile_photo_url"] = photo_url or None
    elif current is None:
        out["profile_photo_url"] = None
    return out


# --- the profile photo ----------------------------------------------------------------------


async def _store_photo(
    pool: asyncpg.Pool, blobs: BlobStore, viewer: Viewer, upload: UploadedFile, max_bytes: int
) -> asyncpg.Record:
    """The upload as an unclaimed attachment of the viewer's (claimed in the transaction)."""
    image = sniff(await upload.head(SNIFF_BYTES))
    if image is None or not image.thumbnailable:
        raise Invalid.field(
            "external_system[profile_photo][data]",
            "must be a PNG, JPEG, GIF, WebP, BMP or TIFF image",
        )
    return await store_file(pool, blobs, viewer, upload, max_bytes=max_bytes)


async def _discard(pool: asyncpg.Pool, blobs: BlobStore, community_id: int, row: Any) -> None:
    """Remove an upload that nothing claimed (its action failed)."""
    async with connection(pool) as conn:
        deleted = await attachment_storage.delete(conn, community_id, row["id"])
    if deleted is not None:
        await delete_blobs(blobs, [deleted])


# --- reading ----------------------------------------------------------------------------------


async def list_systems(pool: asyncpg.Pool, viewer: Viewer, page: Page) -> list[asyncpg.Record]:
    require_admin(viewer)
    return await storage.list_page(pool, viewer.community_id, page.offset, page.limit)


async def access_system(pool: asyncpg.Pool, viewer: Viewer, system_id: int) -> asyncpg.Record:
    require_admin(viewer)
    row = await storage.by_id(pool, viewer.community_id, system_id)
    if row is None:
        raise NotFound("External system not found")
    return row


# --- writing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CreatedSystem:
    row: asyncpg.Record
    client_secret: str


async def create_system(
    pool: asyncpg.Pool,
    blobs: BlobStore,
    viewer: Viewer,
    fields: SystemFields,
    upload: UploadedFile | None = None,
    *,
    max_bytes: int,
) -> CreatedSystem:
    require_admin(viewer)
    values = _changes(fields, None)
    photo = await _store_photo(pool, blobs, viewer, upload, max_bytes) if upload else None
    secret = new_secret()
    try:
        async with work(pool, None, viewer.community_id) as w:
            row = await storage.insert(
                w.conn, viewer.community_id, name=values["name"],
                description=values["description"], system_url=values["system_url"],
                external_system_type=values["external_system_type"],
                sharepoint_version=values["sharepoint_version"],
                not_in_company_stream=values["not_in_company_stream"],
                profile_photo_url=values["profile_photo_url"],
                client_identifier=secrets.token_hex(16), client_secret_hash=hash_secret(secret),
                created_by=viewer.id,
            )
            if photo is not None:
                await claim_attachments(w.conn, viewer, [photo["id"]], "avatar", row["id"])
                updated = await storage.update(w.conn, viewer.community_id, row["id"],
                                               {"avatar_id": photo["id"]})
                assert updated is not None
                row = updated
    except BaseException:
        if photo is not None:
            await _discard(pool, blobs, viewer.community_id, photo)
        raise
    return CreatedSystem(row, secret)


async def update_system(
    pool: asyncpg.Pool,
    blobs: BlobStore,
    viewer: Viewer,
    system_id: int,
    fields: SystemFields,
    upload: UploadedFile | None = None,
    *,
    max_bytes: int,
) -> asyncpg.Record:
    current = await access_system(pool, viewer, system_id)
    changes = _changes(fields, current)
    photo = await _store_photo(pool, blobs, viewer, upload, max_bytes) if upload else None
    try:
        async with work(pool, None, viewer.community_id) as w:
            current = await storage.by_id(w.conn, viewer.community_id, system_id, lock=True)
            if current is None:
                raise NotFound("External system not found")
            if fields.activate and current["state"] == "inactive":
                changes["state"] = "active"
            if photo is not None:
                await claim_attachments(w.conn, viewer, [photo["id"]], "avatar", system_id)
                changes["avatar_id"] = photo["id"]
            elif changes.get("profile_photo_url"):
                changes["avatar_id"] = None  # a new address replaces the uploaded photo
            previous = current["avatar_id"]
            if "avatar_id" in changes and previous is not None \
                    and previous != changes["avatar_id"]:
                old = await _take_photo(w.conn, viewer.community_id, system_id, previous)
                if old is not None:
                    w.after(lambda: delete_blobs(blobs, [old]))
            row = await storage.update(w.conn, viewer.community_id, system_id, changes)
            if row is None:
                raise NotFound("External system not found")
    except BaseException:
        if photo is not None:
            await _discard(pool, blobs, viewer.community_id, photo)
        raise
    return row


async def _take_photo(
    conn: asyncpg.Connection, community_id: int, system_id: int, attachment_id: int
) -> asyncpg.Record | None:
    """Delete the system's previous photo row (its blobs go after commit)."""
    previous = await attachment_storage.by_id(conn, community_id, attachment_id)
    if previous is None or previous["subject_type"] != "avatar" \
            or previous["subject_id"] != system_id:
        return None
    return await attachment_storage.delete(conn, community_id, attachment_id)


async def deactivate_system(
    pool: asyncpg.Pool, viewer: Viewer, system_id: int
) -> asyncpg.Record:
    require_admin(viewer)
    async with work(pool, None, viewer.community_id) as w:
        row = await storage.update(w.conn, viewer.community_id, system_id, {"state": "inactive"})
    if row is None:
        raise NotFound("External system not found")
    return row


# --- the credentials check --------------------------------------------------------------------


def client_credentials(header: str) -> tuple[str, str] | None:
    """(client_identifier, client_secret) of `ServiceApiClient <id>:<secret>` (or the
    SocialcastApiClient scheme); None for any other header."""
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() not in SCHEMES:
        return None
    identifier, sep, secret = value.strip().partition(":")
    if not sep or not identifier or not secret:
        return None
    return identifier, secret


def _unauthorized(message: str, realm: str) -> Unauthorized:
    return Unauthorized(
        message, headers={"WWW-Authenticate": f'ServiceApiClient realm="{realm}"'}
    )


async def authenticate_system(
    pool: asyncpg.Pool,
    limiter: RateLimiter,
    community_id: int,
    realm: str,
    header: str,
    *,
    client_address: str,
    failed_limit: int,
) -> asyncpg.Record:
    """The active system these credentials name, or 401 (429 after too many failures)."""
    credentials = client_credentials(header)
    if credentials is None:
        raise _unauthorized(
            "Send Authorization: ServiceApiClient <client_identifier>:<client_secret>", realm
        )
    identifier, secret = credentials
    key = f"external_system:{client_address}:{community_id}:{identifier[:100]}"
    retry = await limiter.peek(key, failed_limit)
    if retry is not None:
        raise RateLimited(retry, "Too many failed attempts; try again later")
    row = await storage.by_client_identifier(pool, community_id, identifier)
    ok = secret_matches(secret, row["client_secret_hash"] if row is not None else None)
    if not ok or row is None or row["state"] != "active":
        await limiter.hit(key, failed_limit)
        raise _unauthorized("Invalid or inactive external system credentials", realm)
    return row


# --- posting as a system ----------------------------------------------------------------------


async def post_message(
    pool: asyncpg.Pool, viewer: Viewer, base: str, system_id: int, new: NewMessage,
    hub: Hub | None = None,
) -> int:
    """A message by the calling admin on behalf of an active system; its id (notifications
    are published with `hub` after commit)."""
    require_admin(viewer)
    async with work(pool, hub, viewer.community_id) as w:
        system = await storage.by_id(w.conn, viewer.community_id, system_id)
        if system is None:
            raise NotFound("External system not found")
        if system["state"] != "active":
            raise Forbidden("This external system is inactive")
        return await insert_message(  # which refuses blocked words
            w, viewer, base, replace(new, external_system_id=system_id, source=SOURCE)
        )
