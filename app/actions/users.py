"""Users: create, update, deactivate, and loading what the full form needs in fixed queries."""

from __future__ import annotations

import re
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import asyncpg
import orjson

from app.access import access_user, require_admin, require_self_or_admin
from app.actions.work import Step, work
from app.context import Viewer
from app.errors import Conflict, Forbidden, Invalid, NotFound
from app.params import Page
from app.passwords import Passwords
from app.render.users import (
    CONTACT_KEYS,
    contact_info,
    contact_info_of,
    custom_field_values,
    custom_fields_of,
    embedded_user,
    full_user,
)
from app.responses import kept_json
from realtime.events import (
    CLOSE_CREDENTIALS_CHANGED,
    CLOSE_DEACTIVATED,
    close_event,
)
from realtime.hub import Hub
from storage import custom_fields, memberships, users
from storage.batch import Batcher, by_community
from storage.db import Conn
from storage.rows import EmbeddedUserRow, FullUserRow, ListedKeyRow, ListedUserRow

PasswordCheck = Callable[[int, str], Awaitable[None]]
"""Confirms (user id, current password) or raises: 403 when wrong, 429 when throttled."""

ROLES = ("member", "tenant_admin", "external_contributor")
ROLE_ALIASES = {"admin": "tenant_admin", "external": "external_contributor"}
STATE_FILTERS = {
    "active": ("active",),
    "inactive": ("inactive",),
    "terminated": ("terminated",),
    "all": ("active", "inactive", "terminated"),
}
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
USERNAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,60}$")
MIN_PASSWORD = 8

_CONSTRAINT_FIELDS = {
    "users_email_key": ("user[email]", "Email has already been taken"),
    "users_username_key": ("user[username]", "Username has already been taken"),
    "users_company_login_key": ("user[company_login]", "Company login has already been taken"),
}


@dataclass
class UserFields:
    """Validated profile values; None means "not given"."""

    email: str | None = None
    username: str | None = None
    first_name: str | None = None
    last_name: str | None = None
    password: str | None = None
    current_password: str | None = None
    title: str | None = None
    company_login: str | None = None
    manager_id: int | None = None
    clear_manager: bool = False
    role: str | None = None
    status_message: str | None = None
    contact_info: dict[str, str] | None = None
    custom_fields: dict[int, str] | None = None


# What a profile may store (issue 13's review: both are the user's own to write, and were
# unbounded). A contact detail is a phone number, a handle or a place; a custom value is a line
# of a directory export (a department, a desk, a cost centre).
CONTACT_VALUE_MAX = 255
CUSTOM_VALUE_MAX = 1000


def stored_contact_info(values: Mapping[str, str], name: str) -> dict[str, str]:
    """What the contact_info column keeps of the details a client sent: the keys a profile
    shows (CONTACT_KEYS, but `email`: the user's own column), non-empty, each at most
    CONTACT_VALUE_MAX characters (a 422 naming `name[key]` otherwise). Other keys are dropped,
    as the original drops what it does not know: nothing is stored that no form shows."""
    out: dict[str, str] = {}
    for key in CONTACT_KEYS:
        value = values.get(key)
        if key == "email" or not value:
            continue
        if len(value) > CONTACT_VALUE_MAX:
            raise Invalid.field(f"{name}[{key}]",
                                f"is too long (at most {CONTACT_VALUE_MAX} characters)")
        out[key] = value
    return out


def check_custom_value(value: str | None, name: str) -> None:
    """A custom field value is at most CUSTOM_VALUE_MAX characters (a 422 naming `name`)."""
    if value is not None and len(value) > CUSTOM_VALUE_MAX:
        raise Invalid.field(name, f"is too long (at most {CUSTOM_VALUE_MAX} characters)")


async def full_users(
    conn: asyncpg.Connection | asyncpg.Pool,
    viewer: Viewer,
    rows: Sequence[asyncpg.Record],
    base: str,
) -> list[dict[str, Any]]:
    """Render FULL rows (storage.users.FULL_FLAT or FULL: they carry their manager and custom
    field values, so no query is needed); rows without those columns cost two queries for
    any page."""
    if rows and "custom_values" not in rows[0]:
        return await _full_users_loading(conn, viewer, rows, base)
    flat = bool(rows) and "mgr_id" in rows[0]
    # A page's rows are one snapshot, where a manager reads the same on every row: each is
    # rendered once per page (a directory page often has one manager for most of its rows).
    managers: dict[int, dict[str, Any]] = {}
    out = []
    for r in rows:
        rendered = None
        if flat:
            rendered = _flat_manager(r, base, managers)
        else:
            manager = r["manager"]
            if manager is not None:
                rendered = managers.get(manager[_MANAGER_ID])
                if rendered is None:
                    rendered = managers[manager[_MANAGER_ID]] = embedded_user(cast(
                        EmbeddedUserRow, dict(zip(users.MANAGER_FIELDS, manager, strict=True))
                    ), base)
        out.append(full_user(
            r, base, viewer_id=viewer.id, contact=contact_info(r), manager=rendered,
            custom_fields=custom_fields_of(r["custom_values"]),
        ))
    return out


_MANAGER_ID = users.MANAGER_FIELDS.index("id")
# (field, column of a FULL_FLAT or LISTED row)
_MANAGER_COLUMNS = tuple((field, f"mgr_{field}") for field in users.MANAGER_FIELDS)


def _flat_manager(
    row: Mapping[str, Any], base: str, managers: dict[int, dict[str, Any]]
) -> dict[str, Any] | None:
    """The embedded form of the manager of a FULL_FLAT or LISTED row (its `mgr_` columns),
    rendered once per page in `managers`; None when the user has no manager."""
    manager_id = row["mgr_id"]
    if manager_id is None:
        return None
    rendered = managers.get(manager_id)
    if rendered is None:
        rendered = managers[manager_id] = embedded_user(cast(EmbeddedUserRow, {
            field: row[column] for field, column in _MANAGER_COLUMNS}), base)
    return rendered

# The full forms of the users list pages (the directory, search, suggest, employees), shared
# across pages and requests (issue 13: rendering a page of 20 cost about 50 µs, and reading
# their wide rows about as much again; a polled directory shows the same users every time).
# A page first reads a narrow row per user (storage.users.KEYS): the versions of the user's
# row, of their custom values and of the community's directory (migrations 0021, 0022), the follow
# counts and the viewer's follow. The key is that row, whether the user is the viewer
# (`followable`) and the base URL. A form is rendered from a LISTED_BY_IDS row and kept under
# that row's own versions and counts, read in the same snapshot: a form is never older than
# its key, and any change of what it shows is another key, so it is never stale, nor anyone
# else's (the only viewer-dependent parts are in the key). Kept serialized, as orjson
# Fragments: the response's orjson copies them as they are (a page's 36 KB cost 18 µs to
# serialize from dicts, 1 µs from fragments), and bytes cannot be mutated by whoever holds
# them. Bounded: emptied whenever full (a few MB when full).
LISTED_FORMS_SIZE = 2048
Key = tuple[str, bool, int, int, int | None, int | None, int, int, bool]
_LISTED_FORMS: dict[Key, orjson.Fragment] = {}


def _key(base: str, viewer: Viewer, row: ListedKeyRow | ListedUserRow) -> Key:
    return (base, row["id"] == viewer.id, row["id"], row["row_version"],
            row["values_version"], row["directory_version"], row["following_count"],
            row["followers_count"], row["viewer_follows"])


async def listed_users(
    conn: Conn, viewer: Viewer, keys: Sequence[ListedKeyRow], base: str
) -> list[orjson.Fragment]:
    """The JSON of full_user of each user of a page's KEYS, in their order: the kept forms,
    and the others rendered from their LISTED rows (one query for all of them, none when
    every form is kept). A user deleted between the two reads is left out."""
    forms = _LISTED_FORMS
    out: list[orjson.Fragment | None] = [forms.get(_key(base, viewer, k)) for k in keys]
    missing = [k["id"] for k, form in zip(keys, out, strict=True) if form is None]
    if not missing:
        return cast("list[orjson.Fragment]", out)
    rendered: dict[int, orjson.Fragment] = {}
    managers: dict[int, dict[str, Any]] = {}  # rendered once per page, as in full_users
    for row in await users.listed_by_ids(conn, viewer.community_id, viewer.id, missing):
        form = rendered[row["id"]] = orjson.Fragment(
            kept_json(_listed_user(viewer, row, base, managers)))
        if _cacheable(row):
            if len(forms) >= LISTED_FORMS_SIZE:
                forms.clear()
            forms[_key(base, viewer, row)] = form
    shown = (kept or rendered.get(k["id"]) for kept, k in zip(out, keys, strict=True))
    return [form for form in shown if form is not None]


# The JSON columns of a row kept as a key are at most this long together: a user may write
# kilobytes of contact info or custom values (keys the form never shows included), and 2,048
# such rows must not pin hundreds of megabytes. A longer row is rendered, not kept.
MAX_CACHED_JSON = 4096


def _cacheable(row: ListedUserRow) -> bool:
    return len(row["contact_info"] or "") + len(row["custom_values"] or "") <= MAX_CACHED_JSON


def _listed_user(
    viewer: Viewer, row: ListedUserRow, base: str, managers: dict[int, dict[str, Any]]
) -> dict[str, Any]:
    contact, values = row["contact_info"], row["custom_values"]
    return full_user(
        row, base, viewer_id=viewer.id, manager=_flat_manager(row, base, managers),
        contact=contact_info_of(row["email"], orjson.loads(contact) if contact else None),
        custom_fields=custom_fields_of(orjson.loads(values) if values is not None else None),
    )


async def _full_users_loading(
    conn: asyncpg.Connection | asyncpg.Pool,
    viewer: Viewer,
    rows: Sequence[asyncpg.Record],
    base: str,
) -> list[dict[str, Any]]:
    manager_ids = list({r["manager_id"] for r in rows if r["manager_id"] is not None})
    managers = {m["id"]: m for m in await users.by_ids(conn, viewer.community_id, manager_ids)}
    values = await users.custom_values(conn, [r["id"] for r in rows])
    rendered = {m_id: embedded_user(m, base) for m_id, m in managers.items()}
    return [
        full_user(
            r, base, viewer_id=viewer.id, contact=contact_info(r),
            manager=rendered.get(r["manager_id"]),
            custom_fields=custom_field_values(values.get(r["id"], ())),
        )
        for r in rows
    ]


# --- reads (what the views show; FULL rows, rendered with full_users) ------------------------


async def full_user_row(conn: Conn, viewer: Viewer, user_id: int) -> asyncpg.Record:
    """The FULL row of a user of the viewer's community, or NotFound."""
    row = await users.full_by_id(conn, viewer.community_id, viewer.id, user_id)
    if row is None:
        raise NotFound("User not found")
    return row


# GET /api/userinfo is what every client polls: the rows of the users asking in one turn of
# the event loop are read by one query (storage.batch.Batcher), a batcher per pool.
_OWN_ROWS: weakref.WeakKeyDictionary[
    asyncpg.Pool, Batcher[tuple[int, int], FullUserRow]
] = weakref.WeakKeyDictionary()


async def own_full_row(pool: asyncpg.Pool, viewer: Viewer) -> asyncpg.Record:
    """`full_user_row` of the viewer themselves, read together with other requests' own."""
    reads = _OWN_ROWS.get(pool)
    if reads is None:
        held = weakref.ref(pool)

        async def load(keys: list[tuple[int, int]]) -> dict[tuple[int, int], FullUserRow]:
            conn = held()
            assert conn is not None  # a batch runs while its requests hold the pool
            found: dict[tuple[int, int], FullUserRow] = {}
            for community_id, user_ids in by_community(keys).items():
                rows = await users.full_selves(conn, community_id, user_ids)
                found.update({(community_id, uid): row for uid, row in rows.items()})
            return found

        reads = _OWN_ROWS[pool] = Batcher(load)
    row = await reads.get((viewer.community_id, viewer.id))
    if row is None:
        raise NotFound("User not found")
    return cast(asyncpg.Record, row)


async def full_user_by_company_login(conn: Conn, viewer: Viewer, login: str) -> asyncpg.Record:
    row = await users.full_by_company_login(conn, viewer.community_id, viewer.id, login)
    if row is None:
        raise NotFound("User not found")
    return row


async def list_users(
    conn: Conn, viewer: Viewer, *, state: str, emails: Sequence[str] | None, page: Page
) -> list[ListedKeyRow]:
    return await users.list_users(
        conn, viewer.community_id, viewer.id, states=STATE_FILTERS[state], emails=emails,
        offset=page.offset, limit=page.limit,
    )


async def search_users(
    conn: Conn, viewer: Viewer, *, tsquery: str, emails: Sequence[str],
    states: tuple[str, ...], page: Page,
) -> list[ListedKeyRow]:
    return await users.search(
        conn, viewer.community_id, viewer.id, tsquery=tsquery, emails=emails, states=states,
        offset=page.offset, limit=page.limit,
    )


async def employees(
    conn: Conn, viewer: Viewer, manager_id: int, page: Page
) -> list[ListedKeyRow]:
    manager = await access_user(conn, viewer, manager_id)
    return await users.employees(
        conn, viewer.community_id, viewer.id, manager["id"], page.offset, page.limit
    )


async def followers(conn: Conn, viewer: Viewer, user_id: int, page: Page) -> list[asyncpg.Record]:
    """FULL rows of who follows the user (NotFound for a user the viewer may not see)."""
    user = await access_user(conn, viewer, user_id)
    return await users.followers(
        conn, viewer.community_id, viewer.id, user["id"], page.offset, page.limit
    )


async def following(conn: Conn, viewer: Viewer, user_id: int, page: Page) -> list[asyncpg.Record]:
    """FULL rows of whom the user follows (NotFound for a user the viewer may not see)."""
    user = await access_user(conn, viewer, user_id)
    return await users.following(
        conn, viewer.community_id, viewer.id, user["id"], page.offset, page.limit
    )


async def basic_user(conn: Conn, viewer: Viewer, user_id: int) -> asyncpg.Record | None:
    """The BASIC row of a user of the viewer's community (None: not there)."""
    return await users.by_id(conn, viewer.community_id, user_id)


def normalize_role(role: str) -> str:
    value = ROLE_ALIASES.get(role.strip().lower(), role.strip().lower())
    if value not in ROLES:
        raise Invalid.field("user[role]", f"must be one of {', '.join(ROLES)}")
    return value


def _check_email(email: str) -> str:
    email = email.strip()
    if not EMAIL_RE.match(email) or len(email) > 254:
        raise Invalid.field("user[email]", "is not a valid e-mail address")
    return email


def _check_username(username: str) -> str:
    if not USERNAME_RE.match(username):
        raise Invalid.field(
            "user[username]", "may contain only letters, digits, '.', '_' and '-' (1 to 60)"
        )
    return username


def _check_password(password: str) -> str:
    if len(password) < MIN_PASSWORD:
        raise Invalid.field("user[password]", f"is too short (minimum is {MIN_PASSWORD})")
    return password


def _username_from(fields: UserFields, email: str) -> str:
    base = re.sub(r"[^A-Za-z0-9]", "", f"{fields.first_name or ''}{fields.last_name or ''}")
    base = base or re.sub(r"[^A-Za-z0-9_.-]", "", email.split("@")[0]) or "user"
    return base[:50]  # room for a counter within the 60 characters of a username


def _conflict(exc: asyncpg.UniqueViolationError) -> Conflict:
    field, message = _CONSTRAINT_FIELDS.get(
        exc.constraint_name or "", ("user", "That user already exists")
    )
    return Conflict(message, fields={field: ["has already been taken"]})


async def _check_manager(
    conn: asyncpg.Connection, viewer: Viewer, manager_id: int, user_id: int | None
) -> None:
    if user_id is not None and manager_id == user_id:
        raise Invalid.field("user[manager_id]", "can't be the user themselves")
    if await users.by_id(conn, viewer.community_id, manager_id) is None:
        raise Invalid.field("user[manager_id]", "is not a user of this community")
    if user_id is not None:
        # Refuse cycles: the new manager must not report (transitively) to this user.
        cycle = await conn.fetchval(
            """
            WITH RECURSIVE chain(id, manager_id) AS (
                SELECT id, manager_id FROM users WHERE id = $1
                UNION SELECT u.id, u.manager_id FROM users u JOIN chain c ON u.id = c.manager_id
            ) SELECT EXISTS (SELECT 1 FROM chain WHERE id = $2)
            """,
            manager_id, user_id,
        )
        if cycle:
            raise Invalid.field("user[manager_id]", "would make a reporting cycle")


async def _apply_custom_fields(
    conn: asyncpg.Connection, viewer: Viewer, user_id: int, values: dict[int, str]
) -> None:
    known = {r["id"] for r in await custom_fields.list_fields(conn, viewer.community_id)}
    for field_id, value in values.items():
        if field_id not in known:
            raise Invalid.field(f"user[custom_fields][{field_id}]", "is not a custom field")
        check_custom_value(value, f"user[custom_fields][{field_id}]")
        await users.set_custom_value(conn, viewer.community_id, user_id, field_id, value)


async def create_user(
    pool: asyncpg.Pool, passwords: Passwords, viewer: Viewer, fields: UserFields
) -> asyncpg.Record:
    require_admin(viewer)
    if not fields.email:
        raise Invalid.field("user[email]", "can't be blank")
    email = _check_email(fields.email)
    password_hash = await passwords.hash(_check_password(fields.password)) if fields.password \
        else None
    role = normalize_role(fields.role) if fields.role else "member"
    try:
        async with work(pool, None, viewer.community_id) as w:
            username = (
                _check_username(fields.username) if fields.username
                else await users.free_username(w.conn, viewer.community_id,
                                               _username_from(fields, email))
            )
            if fields.manager_id is not None:
                await _check_manager(w.conn, viewer, fields.manager_id, None)
            row = await users.insert(
                w.conn, viewer.community_id, email=email, username=username,
                first_name=(fields.first_name or "").strip(),
                last_name=(fields.last_name or "").strip(), password_hash=password_hash,
                role=role, title=fields.title, company_login=fields.company_login or None,
                manager_id=fields.manager_id,
                contact_info=stored_contact_info(fields.contact_info or {}, "user[contact_info]"),
            )
            if fields.custom_fields:
                await _apply_custom_fields(w.conn, viewer, row["id"], fields.custom_fields)
            # Groups that invited this e-mail address before the account existed.
            await memberships.accept_invitations(w.conn, viewer.community_id, row["id"], email)
    except asyncpg.UniqueViolationError as exc:
        raise _conflict(exc) from None
    return row


@dataclass(frozen=True)
class Updated:
    row: asyncpg.Record
    session_epoch: int | None = None
    """The user's new session epoch when the password changed (every earlier session ended)."""


async def _confirm_own_change(
    pool: asyncpg.Pool,
    passwords: Passwords,
    viewer: Viewer,
    fields: UserFields,
    confirm: PasswordCheck | None,
) -> None:
    """Changing one's own e-mail or password needs the current password (someone holding only
    a session, or a borrowed unlocked browser, must not take the account over)."""
    changes_email = False
    if fields.email is not None:
        me = await users.by_id(pool, viewer.community_id, viewer.id)
        changes_email = me is not None and _check_email(fields.email).lower() != me["email"].lower()
    if fields.password is None and not changes_email:
        return
    if not fields.current_password:
        raise Invalid.field("user[current_password]", "can't be blank",
                            "Current password is needed to change the e-mail or password")
    if confirm is not None:
        await confirm(viewer.id, fields.current_password)
        return
    stored, epoch = await users.credentials_of(pool, viewer.id)
    if not await passwords.verify(viewer.id, stored, fields.current_password, epoch=epoch):
        raise Forbidden("Current password is wrong")


async def update_user(
    pool: asyncpg.Pool,
    passwords: Passwords,
    viewer: Viewer,
    user_id: int,
    fields: UserFields,
    *,
    hub: Hub | None = None,
    confirm: PasswordCheck | None = None,
) -> Updated:
    """`confirm` checks the current password of a user changing their own e-mail or password
    (the view's check also throttles guesses); without it the password is verified here."""
    own = viewer.id == user_id
    if not own:
        await access_user(pool, viewer, user_id)  # another community's user is a 404, not a 403
    require_self_or_admin(viewer, user_id)
    if own:
        await _confirm_own_change(pool, passwords, viewer, fields, confirm)
    changes: dict[str, Any] = {}
    if fields.role is not None:
        role = normalize_role(fields.role)
        if not viewer.is_admin:
            raise Forbidden("Only a community admin can change roles")
        changes["role"] = role
    if fields.email is not None:
        changes["email"] = _check_email(fields.email)
    if fields.username is not None:
        changes["username"] = _check_username(fields.username)
    for name in ("first_name", "last_name"):
        value = getattr(fields, name)
        if value is not None:
            changes[name] = value.strip()
    for name in ("title", "status_message"):
        value = getattr(fields, name)
        if value is not None:
            changes[name] = value or None
    if fields.company_login is not None:
        changes["company_login"] = fields.company_login or None
    if fields.contact_info is not None:
        changes["contact_info"] = stored_contact_info(fields.contact_info, "user[contact_info]")
    if fields.password is not None:
        changes["password_hash"] = await passwords.hash(_check_password(fields.password))
    epoch: int | None = None
    try:
        async with work(pool, hub, viewer.community_id) as w:
            current = await access_user(w.conn, viewer, user_id)
            if fields.clear_manager:
                changes["manager_id"] = None
            elif fields.manager_id is not None:
                await _check_manager(w.conn, viewer, fields.manager_id, user_id)
                changes["manager_id"] = fields.manager_id
            if changes.get("role", "tenant_admin") != "tenant_admin" \
                    and current["role"] == "tenant_admin":
                await _keep_an_admin(w.conn, viewer.community_id, user_id)
            row = await users.update(w.conn, viewer.community_id, user_id, changes)
            assert row is not None
            if (
                not own  # a user changing their own address never claims an invitation to it
                and "email" in changes
                and changes["email"].lower() != current["email"].lower()
            ):
                await memberships.accept_invitations(
                    w.conn, viewer.community_id, user_id, changes["email"]
                )
            if fields.custom_fields:
                await _apply_custom_fields(w.conn, viewer, user_id, fields.custom_fields)
            if "password_hash" in changes:
                # every session issued so far ends, and every open socket closes
                epoch = await users.next_session_epoch(w.conn, viewer.community_id, user_id)
                w.emit(close_event(user_id, CLOSE_CREDENTIALS_CHANGED, "password changed"))
                w.after(_forget(passwords, user_id))
    except asyncpg.UniqueViolationError as exc:
        raise _conflict(exc) from None
    return Updated(row, epoch)


def _forget(passwords: Passwords, user_id: int) -> Step:
    """After commit: drop the user's cached credentials on this process."""

    async def forget() -> None:
        passwords.forget_user(user_id)

    return forget


async def _keep_an_admin(conn: asyncpg.Connection, community_id: int, user_id: int) -> None:
    # Lock every active admin, in id order: two admins demoting or deactivating each other at
    # once then go one after the other, and the second sees the first's change (a plain count
    # let both through and left the community with no admin).
    admins = await conn.fetch(
        "SELECT id FROM users WHERE community_id = $1 AND role = 'tenant_admin' "
        "AND state = 'active' ORDER BY id FOR UPDATE",
        community_id,
    )
    if not any(r["id"] != user_id for r in admins):
        raise Invalid("A community must keep at least one active admin",
                      fields={"user": ["is the last active admin"]})


async def deactivate_user(
    pool: asyncpg.Pool,
    viewer: Viewer,
    user_id: int,
    *,
    hub: Hub | None = None,
    passwords: Passwords | None = None,
) -> asyncpg.Record:
    """Deactivate: their sessions end (new epoch) and their open sockets close with 4003 on
    every process (a close event through the hub) at once."""
    async with work(pool, hub, viewer.community_id) as w:
        current = await access_user(w.conn, viewer, user_id)
        require_admin(viewer)
        if current["role"] == "tenant_admin" and current["state"] == "active":
            await _keep_an_admin(w.conn, viewer.community_id, user_id)
        row = await users.set_state(w.conn, viewer.community_id, user_id, "inactive")
        assert row is not None
        await users.next_session_epoch(w.conn, viewer.community_id, user_id)
        w.emit(close_event(user_id, CLOSE_DEACTIVATED, "deactivated"))
        if passwords is not None:
            w.after(_forget(passwords, user_id))
    return row
