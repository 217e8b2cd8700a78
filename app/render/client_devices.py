"""The ClientDevice JSON (interface spec, "ClientDevice"), keys in the spec's order.

`client_id` is the registration's own id: there are no OAuth client applications here, and
the spec gives it as an Integer. The platform (apns or fcm) is write-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def client_device(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "registration_id": row["registration_id"],
        "push_enabled": row["push_enabled"],
        "push_mentions": row["push_mentions"],
        "push_announcements": row["push_announcements"],
        "push_replies": row["push_replies"],
        "push_conversation_activity": row["push_conversation_activity"],
        "notification_type": row["notification_type"],
        "client_id": row["id"],
        "os_version": row["os_version"],
        "client_version": row["client_version"],
    }
