"""Firebase Cloud Messaging, HTTP v1 API, over aiohttp.

Authentication is a service account's OAuth 2.0 access token from google-auth (the JWT bearer
grant to the account's token_uri), cached while google-auth says it is valid and dropped at
once when FCM answers 401. google-auth's HTTP transports are synchronous, so a refresh (once
an hour) runs in a thread, one at a time.

Both URLs are configurable (the API base, `FCM_API_URL`; the token endpoint, `token_uri` of
the credentials file), which is what lets the tests run a real HTTP exchange against a local
server. Certificates are checked, for both, against the system's trust store, which honours
SSL_CERT_FILE (the token endpoint through urllib3, the API through a context made when the
provider is); a server that fails the check is a network failure, retried later.

Errors, as FCM documents them for v1 (`error.details[].errorCode`, else `error.status`):
UNREGISTERED, INVALID_ARGUMENT and SENDER_ID_MISMATCH reject the token (our payloads are small
and well formed, so an INVALID_ARGUMENT is the token's fault, as Sygnal assumes too);
UNAVAILABLE, INTERNAL, QUOTA_EXCEEDED (429) and 5xx are retried, after Retry-After when given;
401 is retried with a fresh access token; other 4xx drop the message.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import google.auth.exceptions
import orjson
import urllib3
from google.auth.transport.urllib3 import Request as Urllib3Request
from google.oauth2 import service_account

from push.jobs import PushMessage
from push.provider import Outcome, SendResult, token_hint

log = logging.getLogger("commons.push.fcm")

DEFAULT_API_URL = "https://fcm.googleapis.com"
SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
REQUEST_TIMEOUT = 15.0

REJECTING = frozenset({"UNREGISTERED", "INVALID_ARGUMENT", "SENDER_ID_MISMATCH"})
RETRYING = frozenset({"UNAVAILABLE", "INTERNAL", "QUOTA_EXCEEDED", "UNAUTHENTICATED",
                      "THIRD_PARTY_AUTH_ERROR", "PERMISSION_DENIED"})


class FcmOptions(Protocol):
    """app.config.FcmSettings has these attributes."""

    @property
    def project_id(self) -> str | None: ...
    @property
    def credentials_file(self) -> str | None: ...
    @property
    def api_url(self) -> str | None: ...


def load_credentials(path: str | Path) -> service_account.Credentials:
    return service_account.Credentials.from_service_account_file(str(path), scopes=[SCOPE])


class AuthError(Exception):
    """The token endpoint did not give us an access token (retried later)."""


class AccessTokens:
    """The service account's access token, refreshed by one request at a time."""

    def __init__(self, credentials: service_account.Credentials) -> None:
        self._credentials = credentials
        self._http = urllib3.PoolManager(timeout=REQUEST_TIMEOUT, retries=False)
        self._lock = asyncio.Lock()

    def invalidate(self, token: str) -> None:
        if self._credentials.token == token:
            self._credentials.token = None

    async def get(self) -> str:
        credentials = self._credentials
        if credentials.valid and credentials.token:
            return str(credentials.token)
        async with self._lock:
            if not (credentials.valid and credentials.token):
                try:
                    await asyncio.to_thread(credentials.refresh, Urllib3Request(self._http))
                except google.auth.exceptions.GoogleAuthError as exc:
                    raise AuthError(f"no access token: {exc}") from None
            return str(credentials.token)

    def close(self) -> None:
        self._http.clear()


def fcm_message(token: str, message: PushMessage) -> dict[str, Any]:
    data = dict(message.data)
    if message.badge is not None:
        data["badge"] = str(message.badge)  # data values are strings in FCM
    if message.silent:
        # data-only: the app updates its badge without showing anything; only the latest
        # badge matters, so FCM may keep just the last one for a device that is offline
        return {"message": {"token": token, "data": data,
                            "android": {"priority": "normal", "collapse_key": "badge"}}}
    body: dict[str, Any] = {
        "token": token,
        "notification": {"title": message.title, "body": message.body},
        "data": data,
    }
    android: dict[str, Any] = {}
    aps: dict[str, Any] = {}
    apns: dict[str, Any] = {}
    if message.push_id:
        # the push's identity (see PushMessage.push_id): on Android the notification tag, on
        # iOS the apns-collapse-id, so that a re-send replaces its first copy. Not Android's
        # collapse_key: FCM keeps at most four of those per device.
        android["tag"] = message.push_id
        apns["headers"] = {"apns-collapse-id": message.push_id}
    if message.thread:
        aps["thread-id"] = message.thread
    if message.badge is not None:
        android["notification_count"] = message.badge
        aps["badge"] = message.badge
    if android:
        body["android"] = {"notification": android}
    if aps:
        apns["payload"] = {"aps": aps}
    if apns:
        body["apns"] = apns
    return {"message": body}


def _retry_after(headers: Any) -> float | None:
    raw = headers.get("Retry-After")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None


def error_code(body: bytes) -> str:
    """FcmError's errorCode when present, else the google.rpc status, else ''."""
    try:
        error = orjson.loads(body).get("error") or {}
    except (orjson.JSONDecodeError, AttributeError):
        return ""
    if not isinstance(error, dict):
        return ""
    for detail in error.get("details") or ():
        if isinstance(detail, dict) and detail.get("errorCode"):
            return str(detail["errorCode"])
    return str(error.get("status") or "")


def classify(status: int, body: bytes, headers: Any) -> SendResult:
    if status == 200:
        return SendResult.sent()
    code = error_code(body)
    detail = f"{status} {code}".strip()
    if code in REJECTING:
        return SendResult(Outcome.TOKEN_REJECTED, detail)
    if status in (401, 429) or status >= 500 or code in RETRYING:
        return SendResult(Outcome.RETRY, detail, _retry_after(headers))
    return SendResult(Outcome.DROP, detail)


class FcmProvider:
    name = "fcm"

    def __init__(
        self,
        credentials: service_account.Credentials,
        *,
        project_id: str | None = None,
        api_url: str | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        project = project_id or credentials.project_id
        if not project:
            raise ValueError("FCM needs a project id (FCM_PROJECT_ID or the credentials file)")
        self._owns_session = session is None
        # certificates checked against the system's trust store as it is now (honouring
        # SSL_CERT_FILE), not aiohttp's default context, which is made when aiohttp is imported
        self._session = session or aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
            connector=aiohttp.TCPConnector(ssl=ssl.create_default_context()),
        )
        self._tokens = AccessTokens(credentials)
        base = (api_url or DEFAULT_API_URL).rstrip("/")
        self.url = f"{base}/v1/projects/{project}/messages:send"

    @classmethod
    def from_options(cls, options: FcmOptions) -> FcmProvider:
        if not options.credentials_file:
            raise ValueError("FCM needs FCM_CREDENTIALS_FILE")
        return cls(
            load_credentials(options.credentials_file),
            project_id=options.project_id, api_url=options.api_url,
        )

    async def send(self, token: str, message: PushMessage) -> SendResult:
        try:
            access = await self._tokens.get()
            async with self._session.post(
                self.url, data=orjson.dumps(fcm_message(token, message)),
                headers={"Authorization": f"Bearer {access}",
                         "Content-Type": "application/json"},
            ) as resp:
                body = await resp.read()
                result = classify(resp.status, body, resp.headers)
        except AuthError as exc:
            return SendResult(Outcome.RETRY, f"oauth: {exc}")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return SendResult(Outcome.RETRY, f"network: {exc!r}")
        if result.outcome is Outcome.RETRY and result.detail.startswith("401"):
            self._tokens.invalidate(access)
        if result.outcome is not Outcome.SENT:
            log.info("fcm push to %s: %s (%s)", token_hint(token), result.outcome.value,
                     result.detail)
        return result

    async def close(self) -> None:
        self._tokens.close()
        if self._owns_session:
            await self._session.close()
