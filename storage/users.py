"""Users: accounts, profile columns, and the queries behind every user list.

Every list query returns the same FULL columns (with follow counts and whether the viewer
follows each user: FULL_FLAT), so one renderer serves all of them; the users list pages'
(LIST, SEARCH, EMPLOYEES) return them as LISTED, their JSON as text. `$1` is always the
community id and `$2` the viewer's id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import asyncpg

from storage import versions
from storage.db import Conn
from storage.names import first_free
from storage.rows import EmbeddedUserRow, FullUserRow, ListedKeyRow, ListedUserRow, UserRow

# Columns needed to render any form of a user (embedded, like, recipient, compact).
BASIC = """
u.id, u.community_id, u.email, u.username, u.first_name, u.last_name, u.role, u.state,
u.title, u.company_login, u.manager_id, u.status_message, u.out_of_office,
u.back_in_office_on, u.contact_info, u.avatar_id
"""
# BASIC's column names, for statements that select them under other names or beside others.
BASIC_NAMES = tuple(c.strip().removeprefix("u.") for c in BASIC.split(","))

# The manager of a FULL row (`manager`, a record of these columns in this order, or NULL): the
# columns its embedded form needs.
MANAGER_FIELDS = (
    "id", "username", "first_name", "last_name", "role", "state", "title", "company_login",
    "out_of_office", "back_in_office_on", "avatar_id",
)

# Everything the full form shows, in one statement: follow counts, whether the viewer ($2)
# follows the user, the manager and the custom field values (a JSON array of [field id, field
# name, value], in the fields' order, or NULL). Only scalars and JSON: asyncpg decodes them
# without a type-introspection query (an array of records would need one on each new
# connection; arrays inside a record fail).
_VIEWER_FOLLOWS = """EXISTS (
    SELECT 1 FROM follows f WHERE f.follower_id = $2 AND f.followed_id = u.id) AS viewer_follows"""
_COUNTS = f"""
coalesce((SELECT fc.following FROM follow_counts fc WHERE fc.user_id = u.id), 0)
    AS following_count,
coalesce((SELECT fc.followers FROM follow_counts fc WHERE fc.user_id = u.id), 0)
    AS followers_count,
{_VIEWER_FOLLOWS}
"""
_CUSTOM_VALUES_OF_U = """
(SELECT json_agg(json_build_array(cf.id, cf.name, cfv.value) ORDER BY cf.position, cf.id)
 FROM custom_field_values cfv JOIN custom_fields cf ON cf.id = cfv.custom_field_id
 WHERE cfv.user_id = u.id)"""
_CUSTOM_VALUES = f"{_CUSTOM_VALUES_OF_U} AS custom_values"
# FULL_FLAT's manager: flat columns `mgr_<field>` of MANAGER_FIELDS (all NULL when the user
# has none), from MANAGER_JOIN, which the statement's FROM must carry after `users u`.
# asyncpg decodes an anonymous record element by element: the record of FULL cost a page of
# 20 users about 25 µs more client CPU than these columns (issue 13).
MANAGER_COLUMNS = ", ".join(f"mgr.{c} AS mgr_{c}" for c in MANAGER_FIELDS)
MANAGER_JOIN = "LEFT JOIN users mgr ON mgr.id = u.manager_id AND mgr.community_id = u.community_id"
FULL_FLAT = f"{BASIC}, {_COUNTS}, {MANAGER_COLUMNS}, {_CUSTOM_VALUES}"
# FULL_FLAT with its two JSON columns, contact_info and custom_values, as their text: a row of
# scalars only, which asyncpg decodes without a Python call per value, and which keys the
# shared full forms of the users list pages whole (app.actions.users.listed_users).
LISTED = ", ".join(
    "u.contact_info::text AS contact_info" if c == "contact_info" else f"u.{c}"
    for c in BASIC_NAMES
) + f", {_COUNTS}, {MANAGER_COLUMNS}, {_CUSTOM_VALUES_OF_U}::text AS custom_values"
# The same with the manager as one column `manager`, a record of MANAGER_FIELDS or NULL: a
# select list alone, for statements whose FROM cannot take MANAGER_JOIN (storage.memberships).
FULL = f"""{BASIC}, {_COUNTS},
(SELECT ROW({", ".join("mgr." + c for c in MANAGER_FIELDS)}) FROM users mgr
 WHERE mgr.id = u.manager_id AND mgr.community_id = u.community_id) AS manager,
{_CUSTOM_VALUES}"""

INSERT = f"""
INSERT INTO users AS u (community_id, email, username, first_name, last_name, password_hash,
                        role, title, company_login, manager_id, contact_info)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
RETURNING {BASIC}
"""

# The user of each login ($2, as typed; e-mail or username, any case; an e-mail match first),
# keyed by `login`. Many logins at once: storage/batch.py. With the content versions of the
# user's polled lists (storage/versions.py): read here, an ETag costs no query of its own
# (app/views/conditional.py).
BY_LOGINS = f"""
WITH l AS (SELECT DISTINCT login FROM unnest($2::text[]) AS l(login)),
matched AS (
    SELECT l.login, u.id, true AS by_email FROM l
    JOIN users u ON u.community_id = $1 AND lower(u.email) = lower(l.login)
    UNION ALL
    SELECT l.login, u.id, false FROM l
    JOIN users u ON u.community_id = $1 AND lower(u.username) = lower(l.login)
)
SELECT DISTINCT ON (m.login) m.login AS login, {BASIC}, u.password_hash, u.session_epoch,
       {versions.OF_USER}
FROM matched m JOIN users u ON u.id = m.id
ORDER BY m.login, m.by_email DESC
"""

BY_ID = f"SELECT {BASIC} FROM users u WHERE u.community_id = $1 AND u.id = $2"
# the user a session cookie names, with the epoch the cookie must carry
BY_SESSION = f"""
SELECT {BASIC}, u.session_epoch, {versions.OF_USER} FROM users u
WHERE u.community_id = $1 AND u.id = $2
"""
# BY_SESSION of many users at once (storage.batch.Batcher: the sessions of concurrent requests)
BY_SESSIONS = f"""
SELECT {BASIC}, u.session_epoch, {versions.OF_USER} FROM users u
WHERE u.community_id = $1 AND u.id = ANY($2::bigint[])
"""
NEXT_SESSION_EPOCH = """
UPDATE users SET session_epoch = session_epoch + 1
WHERE community_id = $1 AND id = $2 RETURNING session_epoch
"""
BY_IDS = f"SELECT {BASIC} FROM users u WHERE u.community_id = $1 AND u.id = ANY($2::bigint[])"
# Only what the embedded forms read (EmbeddedUserRow): a page of messages shows a hundred users
# or more, and BASIC's other columns (contact_info's json above all) cost decoding (issue 13).
EMBEDDED_BY_IDS = f"""
SELECT {", ".join("u." + c for c in MANAGER_FIELDS)} FROM users u
WHERE u.community_id = $1 AND u.id = ANY($2::bigint[])
"""
BY_EMAILS = f"""
SELECT {BASIC} FROM users u
WHERE u.community_id = $1 AND lower(u.email) = ANY($2::text[])
"""
FULL_BY_ID = f"""
SELECT {FULL_FLAT} FROM users u {MANAGER_JOIN} WHERE u.community_id = $1 AND u.id = $3
"""
# The FULL rows of users as each sees themselves (the viewer of each row is its user: GET
# /api/userinfo), many at once (storage.batch.Batcher); $2 the ids.
FULL_SELVES = f"""
SELECT {FULL_FLAT.replace("$2", "u.id")} FROM users u {MANAGER_JOIN}
WHERE u.community_id = $1 AND u.id = ANY($2::bigint[])
"""
FULL_BY_COMPANY_LOGIN = f"""
SELECT {FULL_FLAT} FROM users u {MANAGER_JOIN}
WHERE u.community_id = $1 AND lower(u.company_login) = lower($3)
"""

# The users list pages (GET /api/users, search, suggest, employees) read in two steps
# (app.actions.users.listed_users): the page's KEYS, a narrow row per user with what the kept
# full form is keyed by, then LISTED_BY_IDS for the users whose form is not kept. In KEYS, the
# row's version covers every column of the user's row, the values' version their custom field
# values (migration 0022); the directory's covers their manager's embedded columns and the
# custom fields' names and order (migrations 0021, 0022); the follow counts and the viewer's
# follow are the page's own.
# KEYS reads the per-user rows by joins (KEYS_JOIN after `users u`): as correlated subqueries,
# a small table was scanned whole once per user of the page. Pages in users' id order are cut
# first and joined after: joined first, the planner merged the whole of both tables' indexes
# from the lowest id, every other community's rows included.
_DIRECTORY_VERSION = (
    "(SELECT d.version FROM directory_versions d WHERE d.community_id = $1) AS directory_version")
# The versions a form is kept under (app.actions.users._key), read by KEYS and LISTED_BY_IDS
# alike; _VALUES_JOIN after `users u` brings `cv`.
_VERSIONS = f"u.row_version, cv.version AS values_version, {_DIRECTORY_VERSION}"
_VALUES_JOIN = "LEFT JOIN custom_value_versions cv ON cv.user_id = u.id"
KEYS = f"""u.id, {_VERSIONS},
coalesce(fc.following, 0) AS following_count, coalesce(fc.followers, 0) AS followers_count,
{_VIEWER_FOLLOWS}"""
KEYS_JOIN = f"{_VALUES_JOIN}\nLEFT JOIN follow_counts fc ON fc.user_id = u.id"
LISTED_BY_IDS = f"""
SELECT {LISTED}, {_VERSIONS} FROM users u {MANAGER_JOIN} {_VALUES_JOIN}
WHERE u.community_id = $1 AND u.id = ANY($3::bigint[])
"""


def _keys_in_id_order(where: str, offset: str, limit: str) -> str:
    """KEYS of the users matching `where`, a page in users' id order, cut before the joins."""
    return f"""
SELECT {KEYS} FROM (
    SELECT u.id, u.row_version FROM users u
    WHERE {where}
    ORDER BY u.id
    OFFSET {offset} LIMIT {limit}
) u {KEYS_JOIN}
ORDER BY u.id
"""


# GET /api/users: $3 states, $4 e-mails (NULL = any), $5 offset, $6 limit
LIST = _keys_in_id_order(
    "u.community_id = $1 AND u.state = ANY($3::text[]) "
    "AND ($4::text[] IS NULL OR lower(u.email) = ANY($4::text[]))", "$5", "$6")

# Word-prefix search over name, username and e-mail. $3 tsquery text, $4 offset, $5 limit,
# $6 states. Also matches a whole e-mail address exactly.
SEARCH = f"""
SELECT {KEYS} FROM users u {KEYS_JOIN}
WHERE u.community_id = $1 AND u.state = ANY($6::text[])
  AND (to_tsvector('simple', u.first_name || ' ' || u.last_name || ' ' || u.username
                   || ' ' || u.email) @@ to_tsquery('simple', $3)
       OR lower(u.email) = ANY($7::text[]))
ORDER BY lower(u.first_name), lower(u.last_name), u.id
OFFSET $4 LIMIT $5
"""

FOLLOWERS = f"""
SELECT {FULL_FLAT} FROM follows fl JOIN users u ON u.id = fl.follower_id {MANAGER_JOIN}
WHERE fl.community_id = $1 AND fl.followed_id = $3
ORDER BY fl.created_at DESC, u.id
OFFSET $4 LIMIT $5
"""

FOLLOWING = f"""
SELECT {FULL_FLAT} FROM follows fl JOIN users u ON u.id = fl.followed_id {MANAGER_JOIN}
WHERE fl.community_id = $1 AND fl.follower_id = $3
ORDER BY fl.created_at DESC, u.id
OFFSET $4 LIMIT $5
"""

EMPLOYEES = _keys_in_id_order(
    "u.community_id = $1 AND u.manager_id = $3 AND u.state = 'active'", "$4", "$5")

CUSTOM_VALUES = """
SELECT v.user_id, f.id, f.name, v.value
FROM custom_field_values v JOIN custom_fields f ON f.id = v.custom_field_id
WHERE v.user_id = ANY($1::bigint[])
ORDER BY f.position, f.id
"""

SET_STATE = f"""
UPDATE users u SET state = $3, updated_at = now()
WHERE u.community_id = $1 AND u.id = $2
RETURNING {BASIC}
"""

UPSERT_CUSTOM_VALUE = """
INSERT INTO custom_field_values (user_id, custom_field_id, value)
SELECT $1, f.id, $3 FROM custom_fields f WHERE f.id = $2 AND f.community_id = $4
ON CONFLICT (user_id, custom_field_id) DO UPDATE SET value = EXCLUDED.value
"""
DELETE_CUSTOM_VALUE = """
DELETE FROM custom_field_values WHERE user_id = $1 AND custom_field_id = $2
"""

# Columns PUT /api/users/:id may change; the action maps parameters onto these names.
UPDATABLE = (
    "email", "username", "first_name", "last_name", "password_hash", "role", "title",
    "company_login", "manager_id", "status_message", "out_of_office", "back_in_office_on",
    "contact_info", "avatar_id",
)

TAKEN_USERNAMES = """
SELECT lower(username) AS u FROM users
WHERE community_id = $1 AND lower(username) LIKE lower($2) || '%'
"""


async def insert(
    conn: Conn,
    community_id: int,
    *,
    email: str,
    username: str,
    first_name: str = "",
    last_name: str = "",
    password_hash: str | None = None,
    role: str = "member",
    title: str | None = None,
    company_login: str | None = None,
    manager_id: int | None = None,
    contact_info: dict[str, str] | None = None,
) -> asyncpg.Record:
    row = await conn.fetchrow(
        INSERT, community_id, email, username, first_name, last_name, password_hash, role,
        title, company_login, manager_id, contact_info or {},
    )
    assert row is not None
    return row


async def free_username(conn: Conn, community_id: int, wanted: str) -> str:
    """`wanted`, or `wanted2`, `wanted3`... whichever is not yet taken (case-insensitive)."""
    taken = {r["u"] for r in await conn.fetch(TAKEN_USERNAMES, community_id, wanted)}
    return first_free(wanted, taken)


async def by_login(conn: Conn, community_id: int, login: str) -> asyncpg.Record | None:
    return (await by_logins(conn, community_id, [login])).get(login)


async def by_logins(
    conn: Conn, community_id: int, logins: Sequence[str]
) -> dict[str, asyncpg.Record]:
    """`by_login` for each of `logins` (as typed), in one query; logins of no user are absent."""
    rows = await conn.fetch(BY_LOGINS, community_id, list(logins))
    return {row["login"]: row for row in rows}


async def by_id(conn: Conn, community_id: int, user_id: int) -> UserRow | None:
    return cast("UserRow | None", await conn.fetchrow(BY_ID, community_id, user_id))


async def by_session(conn: Conn, community_id: int, user_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(BY_SESSION, community_id, user_id)


async def by_sessions(
    conn: Conn, community_id: int, user_ids: Sequence[int]
) -> dict[int, asyncpg.Record]:
    """`by_session` for each of `user_ids`, in one query; ids of no user are absent."""
    rows = await conn.fetch(BY_SESSIONS, community_id, list(user_ids))
    return {row["id"]: row for row in rows}


async def next_session_epoch(conn: Conn, community_id: int, user_id: int) -> int | None:
    """End every session of the user issued so far; the new epoch (None: no such user)."""
    value: int | None = await conn.fetchval(NEXT_SESSION_EPOCH, community_id, user_id)
    return value


async def by_ids(conn: Conn, community_id: int, ids: Sequence[int]) -> list[UserRow]:
    if not ids:
        return []
    return cast("list[UserRow]", await conn.fetch(BY_IDS, community_id, list(ids)))


async def embedded_by_ids(
    conn: Conn, community_id: int, ids: Sequence[int]
) -> list[EmbeddedUserRow]:
    """The rows the embedded forms of these users are rendered from (EMBEDDED_BY_IDS)."""
    if not ids:
        return []
    return cast("list[EmbeddedUserRow]", await conn.fetch(EMBEDDED_BY_IDS, community_id, list(ids)))


async def by_emails(
    conn: Conn, community_id: int, emails: Sequence[str]
) -> list[asyncpg.Record]:
    if not emails:
        return []
    return await conn.fetch(BY_EMAILS, community_id, [e.lower() for e in emails])


async def full_by_id(
    conn: Conn, community_id: int, viewer_id: int, user_id: int
) -> FullUserRow | None:
    return cast(
        "FullUserRow | None", await conn.fetchrow(FULL_BY_ID, community_id, viewer_id, user_id)
    )


async def full_selves(
    conn: Conn, community_id: int, user_ids: Sequence[int]
) -> dict[int, FullUserRow]:
    """`full_by_id` of each user as their own viewer, in one query; ids of no user are absent."""
    rows = await conn.fetch(FULL_SELVES, community_id, list(user_ids))
    return {row["id"]: cast("FullUserRow", row) for row in rows}


async def full_by_company_login(
    conn: Conn, community_id: int, viewer_id: int, login: str
) -> FullUserRow | None:
    return cast("FullUserRow | None", await conn.fetchrow(
        FULL_BY_COMPANY_LOGIN, community_id, viewer_id, login,
    ))


async def list_users(
    conn: Conn,
    community_id: int,
    viewer_id: int,
    *,
    states: Sequence[str],
    emails: Sequence[str] | None,
    offset: int,
    limit: int,
) -> list[ListedKeyRow]:
    lowered = [e.lower() for e in emails] if emails is not None else None
    return cast("list[ListedKeyRow]", await conn.fetch(
        LIST, community_id, viewer_id, list(states), lowered, offset, limit,
    ))


async def search(
    conn: Conn,
    community_id: int,
    viewer_id: int,
    *,
    tsquery: str,
    emails: Sequence[str],
    states: Sequence[str],
    offset: int,
    limit: int,
) -> list[ListedKeyRow]:
    return cast("list[ListedKeyRow]", await conn.fetch(
        SEARCH, community_id, viewer_id, tsquery, offset, limit, list(states),
        [e.lower() for e in emails],
    ))


async def followers(
    conn: Conn, community_id: int, viewer_id: int, user_id: int, offset: int, limit: int
) -> list[FullUserRow]:
    return cast("list[FullUserRow]", await conn.fetch(
        FOLLOWERS, community_id, viewer_id, user_id, offset, limit,
    ))


async def following(
    conn: Conn, community_id: int, viewer_id: int, user_id: int, offset: int, limit: int
) -> list[FullUserRow]:
    return cast("list[FullUserRow]", await conn.fetch(
        FOLLOWING, community_id, viewer_id, user_id, offset, limit,
    ))


async def employees(
    conn: Conn, community_id: int, viewer_id: int, manager_id: int, offset: int, limit: int
) -> list[ListedKeyRow]:
    return cast("list[ListedKeyRow]", await conn.fetch(
        EMPLOYEES, community_id, viewer_id, manager_id, offset, limit,
    ))


async def listed_by_ids(
    conn: Conn, community_id: int, viewer_id: int, ids: Sequence[int]
) -> list[ListedUserRow]:
    """LISTED_BY_IDS: the rows a users list page renders the users it does not keep from, in
    no particular order (a user deleted since the page's KEYS were read is missing)."""
    return cast("list[ListedUserRow]", await conn.fetch(
        LISTED_BY_IDS, community_id, viewer_id, list(ids),
    ))


async def custom_values(
    conn: Conn, user_ids: Sequence[int]
) -> dict[int, list[asyncpg.Record]]:
    out: dict[int, list[asyncpg.Record]] = {}
    if not user_ids:
        return out
    for row in await conn.fetch(CUSTOM_VALUES, list(user_ids)):
        out.setdefault(row["user_id"], []).append(row)
    return out


async def update(
    conn: asyncpg.Connection, community_id: int, user_id: int, changes: dict[str, Any]
) -> asyncpg.Record | None:
    """Set the given columns (names from UPDATABLE only) and return the BASIC row."""
    names = [n for n in changes if n in UPDATABLE]
    if not names:
        return await by_id(conn, community_id, user_id)
    sets = ", ".join(f"{n} = ${i + 3}" for i, n in enumerate(names))
    sql = (
        f"UPDATE users u SET {sets}, updated_at = now() "
        f"WHERE u.community_id = $1 AND u.id = $2 RETURNING {BASIC}"
    )
    return await conn.fetchrow(sql, community_id, user_id, *(changes[n] for n in names))


async def set_state(
    conn: asyncpg.Connection, community_id: int, user_id: int, state: str
) -> asyncpg.Record | None:
    return await conn.fetchrow(SET_STATE, community_id, user_id, state)


async def set_custom_value(
    conn: asyncpg.Connection, community_id: int, user_id: int, field_id: int, value: str | None
) -> None:
    if value is None or value == "":
        await conn.execute(DELETE_CUSTOM_VALUE, user_id, field_id)
    else:
        await conn.execute(UPSERT_CUSTOM_VALUE, user_id, field_id, value, community_id)


# what a password is checked against: the hash, and the session epoch the credentials caches
# key on (app/passwords.py)
CREDENTIALS_OF = "SELECT password_hash, session_epoch FROM users WHERE id = $1"


async def credentials_of(conn: Conn, user_id: int) -> tuple[str | None, int]:
    """(password hash, session epoch) of the user; (None, 0) when there is no such user."""
    row = await conn.fetchrow(CREDENTIALS_OF, user_id)
    return (None, 0) if row is None else (row["password_hash"], row["session_epoch"])


# The central API host (a host serving no community): a login in every community at once.
BY_LOGIN_EVERYWHERE = f"""
SELECT DISTINCT ON (u.community_id) {BASIC}, u.password_hash, u.session_epoch FROM users u
WHERE (lower(u.email) = lower($1) OR lower(u.username) = lower($1)) AND u.state = 'active'
ORDER BY u.community_id, lower(u.email) = lower($1) DESC
LIMIT 100
"""


async def by_login_everywhere(conn: Conn, login: str) -> list[asyncpg.Record]:
    """The active user of each community with this e-mail address or username."""
    return await conn.fetch(BY_LOGIN_EVERYWHERE, login)
