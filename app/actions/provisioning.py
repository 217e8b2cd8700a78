"""POST /api/users/provision: bring the community's users in line with a directory export.

The export (the original command-line client's `provision`: `<export><users type="array">
<user>...`, gzip or plain) is parsed as it arrives, with defusedxml's incremental parser (no
DTD, no entities), and applied in batches of BATCH users with set-based statements, so that
memory stays bounded whatever the file's size. The whole run is one transaction: a malformed
file (bad XML, a user without a valid e-mail address) is a 422 naming the first bad user, and
nothing changes; `test=true` runs everything and rolls back, so its report is exact.

Users are matched by unique identifier, then employee number, then e-mail address; missing
ones are created (without a password: they sign in once an admin or the password reset gives
them one), present ones updated (and reactivated when inactive), and, unless `add_only`,
active users absent from the file are deactivated. The caller is never deactivated nor
demoted, and the run refuses to leave the community without an active admin.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from defusedxml.common import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser, ParseError

from app.actions.users import EMAIL_RE, check_custom_value, stored_contact_info
from app.actions.work import Step, Work, work
from app.errors import Invalid, TooLarge
from app.passwords import Passwords
from realtime.events import CLOSE_DEACTIVATED, close_event
from realtime.hub import Hub
from storage import memberships
from storage import provisioning as storage

BATCH = 1000
MAX_EXPANDED_BYTES = 4 * 1024 * 1024 * 1024  # a gzip bomb stops here (413)
_DECOMPRESS_STEP = 1024 * 1024
MAX_ERRORS = 200
_USERNAME_STRIP_RE = re.compile(r"[^A-Za-z0-9]")
ADMIN_ROLES = {"tenant_admin", "admin"}


@dataclass
class Entry:
    """One `<user>` of the export."""

    position: int
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    unique_identifier: str | None = None
    employee_number: str | None = None
    account_type: str = "member"
    roles: list[str] = field(default_factory=list)
    contact_info: dict[str, str] = field(default_factory=dict)
    custom: list[tuple[str, str, str | None]] = field(default_factory=list)  # id, label, value

    def describe(self) -> str:
        who = self.email or self.unique_identifier or self.employee_number
        return f"User {self.position}" + (f" ({who})" if who else "")

    @property
    def role(self) -> str:
        if ADMIN_ROLES & {r.strip().lower() for r in self.roles}:
            return "tenant_admin"
        if self.account_type.strip().lower() == "external":
            return "external_contributor"
        return "member"

    @property
    def title(self) -> str | None:
        for key, _label, value in self.custom:
            if key.lower() == "title":
                return value or None
        return None


@dataclass
class Report:
    created: int = 0
    updated: int = 0
    deactivated: int = 0
    reactivated: int = 0
    unchanged: int = 0
    errors: list[str] = field(default_factory=list)

    def error(self, message: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(message)

    def as_json(self) -> dict[str, Any]:
        return {
            "created": self.created, "updated": self.updated, "deactivated": self.deactivated,
            "reactivated": self.reactivated, "unchanged": self.unchanged, "errors": self.errors,
        }


class ExportReader:
    """Parser target: collects each `<user>` of `<export><users>` (or a bare `<users>`) as an
    Entry, in `ready`. Unknown elements are ignored."""

    def __init__(self) -> None:
        self.path: list[str] = []
        self.text: list[str] = []
        self.nil = False
        self.entry: Entry | None = None
        self.custom: dict[str, str | None] = {}
        self.ready: list[Entry] = []
        self.count = 0

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.path.append(tag)
        self.text.clear()
        self.nil = attrib.get("nil") == "true"
        if tag == "user" and len(self.path) >= 2 and self.path[-2] == "users":
            self.count += 1
            self.entry = Entry(position=self.count)
        elif tag == "custom-field" and self.entry is not None:
            self.custom = {}

    def data(self, text: str) -> None:
        self.text.append(text)

    def end(self, tag: str) -> None:
        path = self.path
        value = None if self.nil else "".join(self.text).strip()
        self.text.clear()
        self.nil = False
        entry = self.entry
        parent = path[-2] if len(path) >= 2 else ""
        path.pop()
        if entry is None:
            return
        if tag == "user" and parent == "users":
            self.ready.append(entry)
            self.entry = None
        elif parent == "user":
            self._user_field(entry, tag, value)
        elif parent == "contact-info":
            if tag == "email":
                entry.email = value or ""
            elif value:
                entry.contact_info[tag.replace("-", "_")] = value
        elif parent == "custom-field":
            self.custom[tag] = value
        elif tag == "custom-field":
            key = self.custom.get("id") or self.custom.get("label") or ""
            if key:
                label = self.custom.get("label") or key
                entry.custom.append((key, label, self.custom.get("value")))
        elif parent == "roles" and tag == "role" and value:
            entry.roles.append(value)

    @staticmethod
    def _user_field(entry: Entry, tag: str, value: str | None) -> None:
        if tag == "first-name":
            entry.first_name = value or ""
        elif tag == "last-name":
            entry.last_name = value or ""
        elif tag == "unique-identifier":
            entry.unique_identifier = value or None
        elif tag == "employee-number":
            entry.employee_number = value or None
        elif tag == "account-type":
            entry.account_type = value or "member"
        elif tag == "email":  # some exports put it beside contact-info
            entry.email = entry.email or value or ""

    def close(self) -> None:
        return None

    def take(self) -> list[Entry]:
        out, self.ready = self.ready, []
        return out


def _username_base(entry: Entry) -> str:
    base = _USERNAME_STRIP_RE.sub("", f"{entry.first_name}{entry.last_name}")
    base = base or _USERNAME_STRIP_RE.sub("", entry.email.split("@")[0]) or "user"
    return base[:50]


class Provisioning:
    """One run, in one unit of work `w` (the caller opens and ends it)."""

    def __init__(self, w: Work, community_id: int, caller_id: int) -> None:
        self.w = w
        self.conn = w.conn
        self.community_id = community_id
        self.caller_id = caller_id
        self.report = Report()
        self.fields: dict[str, int] | None = None
        self.files = 0
        self.analyze_at = BATCH  # created users at which statistics are next refreshed
        self.deactivated: list[int] = []

    async def start(self) -> None:
        await storage.begin(self.conn, self.community_id)

    # --- reading the file ------------------------------------------------------------------

    async def read(self, chunks: AsyncIterator[bytes]) -> None:
        """Parse one uploaded file as it streams in, applying each full batch."""
        self.files += 1
        reader = ExportReader()
        parser = DefusedXMLParser(target=reader, forbid_dtd=True)
        inflate: Any = None
        head = b""
        expanded = 0

        async def feed(data: bytes) -> None:
            nonlocal expanded
            expanded += len(data)
            if expanded > MAX_EXPANDED_BYTES:
                raise TooLarge("The provisioning file is too large once uncompressed")
            try:
                parser.feed(data)
            except (ParseError, DefusedXmlException) as exc:
                raise self._malformed(reader, exc) from None
            await self._drain(reader, BATCH)

        async def inflated(data: bytes) -> None:
            # at most _DECOMPRESS_STEP bytes at once: a small chunk may inflate a thousandfold
            try:
                await feed(inflate.decompress(data, _DECOMPRESS_STEP))
                while inflate.unconsumed_tail:
                    await feed(inflate.decompress(inflate.unconsumed_tail, _DECOMPRESS_STEP))
            except zlib.error as exc:
                raise Invalid("The file is not valid gzip data",
                              fields={"file": ["is not valid gzip data"]}) from exc

        async for chunk in chunks:
            if inflate is None:
                head += chunk
                if len(head) < 2:
                    continue
                chunk, head = head, b""
                # gzip (what the client uploads) or plain XML, told by the magic number
                inflate = zlib.decompressobj(wbits=31) if chunk[:2] == b"\x1f\x8b" else False
            await (inflated(chunk) if inflate else feed(chunk))
        if head:
            await feed(head)
        if inflate:
            await inflated(b"")
            await feed(inflate.flush())
        try:
            parser.close()
        except (ParseError, DefusedXmlException) as exc:
            raise self._malformed(reader, exc) from None
        if reader.count == 0:
            raise Invalid("The file lists no users (expected <export><users><user>...)",
                          fields={"file": ["lists no users"]})
        await self._drain(reader, 1)

    @staticmethod
    def _malformed(reader: ExportReader, exc: Exception) -> Invalid:
        where = f"user {reader.count}" if reader.entry is not None else (
            f"after user {reader.count}" if reader.count else "before the first user")
        return Invalid(f"The file is not well-formed XML ({where}): {exc}",
                       fields={"file": ["is not well-formed XML"]})

    async def _drain(self, reader: ExportReader, at_least: int) -> None:
        if len(reader.ready) >= at_least:
            await self._apply(reader.take())

    # --- applying a batch ------------------------------------------------------------------

    async def _apply(self, batch: list[Entry]) -> None:
        conn, community_id = self.conn, self.community_id
        for entry in batch:
            entry.email = entry.email.strip()
            if not entry.email:
                raise Invalid(f"{entry.describe()} has no e-mail address",
                              fields={"file": [f"user {entry.position}: email can't be blank"]})
            if not EMAIL_RE.match(entry.email) or len(entry.email) > 254:
                raise Invalid(f"{entry.describe()} has an invalid e-mail address",
                              fields={"file": [f"user {entry.position}: email is not valid"]})
            # what a profile stores, as PUT /api/users/:id keeps it
            try:
                entry.contact_info = stored_contact_info(entry.contact_info, "contact-info")
                for key, _, value in entry.custom:
                    check_custom_value(value, f"custom-field[{key}]")
            except Invalid as exc:
                problem = next(f"{name} {problems[0]}" for name, problems in
                               (exc.fields or {}).items())
                raise Invalid(f"{entry.describe()}: {problem}",
                              fields={"file": [f"user {entry.position}: {problem}"]}) from None
        existing = await storage.matches(
            conn, community_id,
            [e.unique_identifier for e in batch if e.unique_identifier],
            [e.employee_number for e in batch if e.employee_number],
            [e.email for e in batch],
        )
        by_uid = {r["unique_identifier"]: r for r in existing if r["unique_identifier"]}
        by_emp = {r["employee_number"]: r for r in existing if r["employee_number"]}
        by_email = {r["email"].lower(): r for r in existing}

        matched: list[tuple[Entry, asyncpg.Record]] = []
        new: list[Entry] = []
        claimed: set[str] = set()  # identities of this batch's new users
        for entry in batch:
            row = (by_uid.get(entry.unique_identifier or "")
                   or by_emp.get(entry.employee_number or "")
                   or by_email.get(entry.email.lower()))
            owners = {
                r["id"] for r in (
                    by_uid.get(entry.unique_identifier or ""),
                    by_emp.get(entry.employee_number or ""),
                    by_email.get(entry.email.lower()),
                ) if r is not None
            }
            if len(owners) > 1:
                self.report.error(f"{entry.describe()}: its unique identifier, employee number "
                                  "and e-mail address belong to different users; skipped")
                continue
            if row is not None:
                matched.append((entry, row))
                continue
            keys = {f"e:{entry.email.lower()}"}
            if entry.unique_identifier:
                keys.add(f"u:{entry.unique_identifier}")
            if entry.employee_number:
                keys.add(f"n:{entry.employee_number}")
            if keys & claimed:
                self.report.error(f"{entry.describe()}: listed twice in the file; skipped")
                continue
            claimed |= keys
            new.append(entry)

        # A user listed twice (across batches too) is applied once.
        fresh = await storage.mark_seen(conn, [row["id"] for _, row in matched])
        once: list[tuple[Entry, asyncpg.Record]] = []
        for entry, row in matched:
            if row["id"] in fresh:
                fresh.discard(row["id"])
                once.append((entry, row))
            else:
                self.report.error(f"{entry.describe()}: listed twice in the file; skipped")
        await self._update(once)
        await self._create(new)

    async def _field_ids(self, entries: list[Entry]) -> dict[str, int]:
        """lower(custom field key or label) -> id, creating the fields the export names."""
        if self.fields is None:
            self.fields = await storage.custom_fields(self.conn, self.community_id)
        for entry in entries:
            for key, label, _value in entry.custom:
                if key.lower() == "title":
                    continue
                if key.lower() not in self.fields and label.lower() not in self.fields:
                    field_id = await storage.add_custom_field(self.conn, self.community_id, label)
                    self.fields[label.lower()] = field_id
                self.fields.setdefault(key.lower(), self.fields.get(label.lower(), 0))
        return self.fields

    def _values(self, entry: Entry, fields: dict[str, int]) -> dict[int, str | None]:
        return {
            fields[key.lower()]: value for key, _label, value in entry.custom
            if key.lower() != "title" and fields.get(key.lower())
        }

    async def _update(self, pairs: list[tuple[Entry, asyncpg.Record]]) -> None:
        if not pairs:
            return
        fields = await self._field_ids([e for e, _ in pairs])
        current = await storage.custom_values(self.conn, [row["id"] for _, row in pairs])
        rows: list[dict[str, Any]] = []
        upserts: list[tuple[int, int, str]] = []
        deletes: list[tuple[int, int]] = []
        for entry, row in pairs:
            role = entry.role
            if row["id"] == self.caller_id:
                role = row["role"]  # the caller keeps their own role
            wanted = {
                "id": row["id"], "email": entry.email, "first_name": entry.first_name,
                "last_name": entry.last_name, "role": role, "title": entry.title,
                "contact_info": entry.contact_info,
                "unique_identifier": entry.unique_identifier or row["unique_identifier"],
                "employee_number": entry.employee_number or row["employee_number"],
            }
            values = self._values(entry, fields)
            have = current.get(row["id"], {})
            value_changes = [(fid, v) for fid, v in values.items() if (v or None) != have.get(fid)]
            same = all(row[k] == v for k, v in wanted.items() if k != "id") and not value_changes
            if same and row["state"] == "active":
                self.report.unchanged += 1
                continue
            if row["state"] != "active":
                self.report.reactivated += 1
            else:
                self.report.updated += 1
            rows.append(wanted)
            for fid, v in value_changes:
                if v:
                    upserts.append((row["id"], fid, v))
                else:
                    deletes.append((row["id"], fid))
        await storage.update_many(self.conn, self.community_id, rows)
        await storage.set_custom_values(self.conn, upserts, deletes)

    async def _usernames(self, entries: list[Entry]) -> list[str]:
        """A free username for each new user (first and last name, then a counter)."""
        bases = [_username_base(e) for e in entries]
        names = list(bases)
        counters = [1] * len(names)
        pending = list(range(len(names)))
        while pending:
            taken = await storage.taken_usernames(
                self.conn, self.community_id, [names[i] for i in pending])
            seen: set[str] = set()
            retry: list[int] = []
            for i in pending:
                lowered = names[i].lower()
                if lowered in taken or lowered in seen:
                    counters[i] += 1
                    names[i] = f"{bases[i]}{counters[i]}"
                    retry.append(i)
                else:
                    seen.add(lowered)
            # names settled in this round are no longer free for the retried ones
            for i in retry:
                while names[i].lower() in seen:
                    counters[i] += 1
                    names[i] = f"{bases[i]}{counters[i]}"
            pending = retry
        return names

    async def _create(self, entries: list[Entry]) -> None:
        if not entries:
            return
        conn, community_id = self.conn, self.community_id
        usernames = await self._usernames(entries)
        rows = [
            {
                "email": e.email, "username": username, "first_name": e.first_name,
                "last_name": e.last_name, "role": e.role, "title": e.title,
                "contact_info": e.contact_info, "unique_identifier": e.unique_identifier,
                "employee_number": e.employee_number,
            }
            for e, username in zip(entries, usernames, strict=True)
        ]
        ids = await storage.insert_many(conn, community_id, rows)
        await storage.mark_seen(conn, list(ids.values()))
        self.report.created += len(ids)
        if self.report.created >= self.analyze_at:  # at 1, 2, 4, 8... thousand users
            await storage.analyze_users(conn)
            self.analyze_at *= 2
        fields = await self._field_ids(entries)
        upserts = [
            (ids[e.email.lower()], fid, v)
            for e in entries for fid, v in self._values(e, fields).items() if v
        ]
        await storage.set_custom_values(conn, upserts, [])
        # Groups that invited these addresses before the accounts existed.
        for email in await storage.invited(conn, community_id, list(ids)):
            await memberships.accept_invitations(conn, community_id, ids[email], email)

    # --- the end ---------------------------------------------------------------------------

    async def finish(self, *, add_only: bool) -> Report:
        if self.files == 0:
            raise Invalid("Send the directory export as the multipart field file",
                          fields={"file": ["can't be blank"]})
        if not add_only:
            self.deactivated = await storage.deactivate_absent(
                self.conn, self.community_id, self.caller_id)
            self.report.deactivated = len(self.deactivated)
        if await storage.active_admins(self.conn, self.community_id) == 0:
            raise Invalid("Provisioning would leave the community without an active admin",
                          fields={"file": ["lists no active admin"]})
        # Deactivated users' open sockets close (4003) on every process, as on DELETE
        # /api/users/:id.
        self.w.emit(*(close_event(user_id, CLOSE_DEACTIVATED, "deactivated")
                      for user_id in self.deactivated))
        return self.report


# --- one run -------------------------------------------------------------------------------------

FileChunks = AsyncIterator[bytes]
Part = tuple[str, "FileChunks | str"]


async def provision(
    pool: asyncpg.Pool, community_id: int, caller_id: int, parts: AsyncIterator[Part],
    *, test: bool = False, add_only: bool = False, hub: Hub | None = None,
    passwords: Passwords | None = None,
) -> Report:
    """Apply the uploaded export(s) in one transaction. `parts` yields ("file", chunks) for
    each uploaded file and (name, value) for form fields; the `test` and `add_only` form
    fields (or the arguments) count wherever they come in the form, since both act at the end.
    `caller_id` is 0 for an external system."""
    async with work(pool, hub, community_id) as w:
        run = Provisioning(w, community_id, caller_id)
        await run.start()
        async for name, value in parts:
            if isinstance(value, str):
                flag = value.strip().lower() in ("true", "1", "yes", "on")
                test = test or (name == "test" and flag)
                add_only = add_only or (name == "add_only" and flag)
                # skip_emails: accepted; provisioning sends no e-mail
            elif name == "file":
                await run.read(value)
        report = await run.finish(add_only=add_only)
        if test:
            w.roll_back()
        elif passwords is not None:
            # after commit: deactivated users' cached credentials go at once
            w.after(_forget_all(passwords, run.deactivated))
    return report


def _forget_all(passwords: Passwords, user_ids: Sequence[int]) -> Step:
    async def forget() -> None:
        for user_id in user_ids:
            passwords.forget_user(user_id)

    return forget
