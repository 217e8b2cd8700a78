"""Apple Push Notification service through aioapns (HTTP/2, token-based authentication with a
.p8 key: APNS_KEY_FILE, APNS_KEY_ID, APNS_TEAM_ID, APNS_TOPIC, APNS_USE_SANDBOX).

Errors, by APNs' documented status codes and reasons:
- the token is dead: 410, BadDeviceToken, Unregistered, ExpiredToken, DeviceTokenNotForTopic
  (the device is forgotten);
- temporary: 429, 5xx, 403 (our provider token: InvalidProviderToken, ExpiredProviderToken...,
  not the device's fault), IdleTimeout, and any connection failure or timeout (retried);
- everything else (PayloadTooLarge, BadTopic, BadCollapseId...): this message is dropped.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Protocol

from aioapns import APNs, NotificationRequest, PushType
from aioapns.exceptions import ConnectionClosed, MaxAttemptsExceeded
from aioapns.exceptions import ConnectionError as ApnsConnectionError

from push.jobs import PushMessage
from push.provider import Outcome, SendResult, token_hint

log = logging.getLogger("commons.push.apns")

REQUEST_TIMEOUT = 15.0
REJECTING = frozenset({"BadDeviceToken", "Unregistered", "ExpiredToken", "DeviceTokenNotForTopic"})
RETRYING = frozenset({"IdleTimeout", "TooManyRequests", "TooManyProviderTokenUpdates",
                      "InternalServerError", "ServiceUnavailable", "Shutdown",
                      "ExpiredProviderToken", "InvalidProviderToken"})


class ApnsOptions(Protocol):
    """app.config.ApnsSettings has these attributes."""

    @property
    def key_file(self) -> str | None: ...
    @property
    def key_id(self) -> str | None: ...
    @property
    def team_id(self) -> str | None: ...
    @property
    def topic(self) -> str | None: ...
    @property
    def use_sandbox(self) -> bool: ...


def classify(status: str | int, reason: str | None) -> SendResult:
    """One APNs answer (status code, reason) as an outcome."""
    code = int(status) if str(status).isdigit() else 0
    reason = reason or ""
    if code == 200:
        return SendResult.sent()
    detail = f"{code} {reason}".strip()
    if code == 410 or reason in REJECTING:
        return SendResult(Outcome.TOKEN_REJECTED, detail)
    if code in (403, 429) or code >= 500 or reason in RETRYING:
        return SendResult(Outcome.RETRY, detail)
    return SendResult(Outcome.DROP, detail)


def apns_payload(message: PushMessage) -> dict[str, Any]:
    aps: dict[str, Any] = {"alert": {"title": message.title, "body": message.body},
                           "sound": "default"}
    if message.thread:
        aps["thread-id"] = message.thread
    return {**{k: v for k, v in message.data.items() if k != "aps"}, "aps": aps}


class ApnsProvider:
    name = "apns"

    def __init__(self, client: APNs) -> None:
        self._client = client

    @classmethod
    def from_options(cls, options: ApnsOptions) -> ApnsProvider:
        if not (options.key_file and options.key_id and options.team_id and options.topic):
            raise ValueError("APNs needs APNS_KEY_FILE, APNS_KEY_ID, APNS_TEAM_ID and APNS_TOPIC")
        key = Path(options.key_file).read_text(encoding="utf-8")
        return cls(APNs(key=key, key_id=options.key_id, team_id=options.team_id,
                        topic=options.topic, use_sandbox=options.use_sandbox))

    async def send(self, token: str, message: PushMessage) -> SendResult:
        request = NotificationRequest(
            device_token=token, message=apns_payload(message), push_type=PushType.ALERT,
            collapse_key=message.thread[:64] if message.thread else None,
        )
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                response = await self._client.send_notification(request)
        except (ApnsConnectionError, ConnectionClosed, MaxAttemptsExceeded, TimeoutError,
                OSError) as exc:
            return SendResult(Outcome.RETRY, f"network: {exc!r}")
        result = classify(response.status, response.description)
        if result.outcome is not Outcome.SENT:
            log.info("apns push to %s: %s (%s)", token_hint(token), result.outcome.value,
                     result.detail)
        return result

    async def close(self) -> None:
        self._client.pool.close()
