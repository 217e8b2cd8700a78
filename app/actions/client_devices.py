"""Client devices: a user registers, updates and unregisters the devices that get their
pushes. Only the viewer's own devices are ever listed or removed.

- A device is (registration_id, notification_type): `main` devices get notification pushes,
  `conversations` devices get conversation remarks. Registering the same pair again updates it;
  switches not given keep their value (a new device starts with every switch on).
- The token may already be registered by another user of the community (a shared or handed-
  over phone): it moves to the user registering it now, with fresh switches.
- The platform is `client_device[platform]` (apns or fcm; ios and android are accepted as
  their aliases); without it, a token of 64 or more hexadecimal digits (an APNs device token)
  is apns and anything else (FCM registration tokens contain ':', '-' and '_') is fcm.
- Unregistering a device the viewer does not have (never registered, already removed, or
  someone else's) is a 204 that changes nothing: unregistering is idempotent, and nothing
  tells whether someone else registered a token.
- At most MAX_DEVICES per user (422 on a new one beyond that).
"""

from __future__ import annotations

import re

import asyncpg

from app.actions.work import work
from app.context import Viewer
from app.errors import Invalid
from storage import client_devices as store
from storage.client_devices import DeviceFields
from storage.db import Conn

MAX_DEVICES = 50
PLATFORM_ALIASES = {"apns": "apns", "ios": "apns", "fcm": "fcm", "android": "fcm", "gcm": "fcm"}
_APNS_TOKEN = re.compile(r"^(?:[0-9a-fA-F]{2}){32,100}$")


def platform_of(token: str, given: str | None) -> str:
    if given:
        platform = PLATFORM_ALIASES.get(given.strip().lower())
        if platform is None:
            raise Invalid.field("client_device[platform]", "must be apns or fcm")
        return platform
    return "apns" if _APNS_TOKEN.match(token) else "fcm"


async def list_devices(conn: Conn, viewer: Viewer) -> list[asyncpg.Record]:
    return await store.of_user(conn, viewer.community_id, viewer.id)


async def register_device(
    pool: asyncpg.Pool, viewer: Viewer, fields: DeviceFields
) -> asyncpg.Record:
    async with work(pool, None, viewer.community_id) as w:
        w.private_to(viewer.id)  # shown to the device's owner only
        others = await store.count_others_of_user(
            w.conn, viewer.community_id, viewer.id, fields.registration_id,
            fields.notification_type,
        )
        if others >= MAX_DEVICES:
            raise Invalid.field(
                "registration_id", f"is one device too many (maximum is {MAX_DEVICES})"
            )
        return await store.upsert(w.conn, viewer.community_id, viewer.id, fields)


async def unregister_device(
    pool: asyncpg.Pool, viewer: Viewer, registration_id: str, notification_type: str
) -> None:
    await store.delete_of_user(
        pool, viewer.community_id, viewer.id, registration_id, notification_type
    )
