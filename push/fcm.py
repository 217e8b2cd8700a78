"""Firebase Cloud Messaging, HTTP v1 API, over aiohttp.

Authentication is a service account's OAuth 2.0 access token, obtained with the JWT bearer
grant (RFC 7523), which is small enough to do here with `cryptography` rather than pull in
google-auth: an RS256-signed JWT {iss: client_email, scope, aud: token_uri, iat, exp} is posted
to the account's token_uri, and the access token it returns is cached until shortly before it
expires (and dropped at once when FCM answers 401).

Both URLs are configurable (the API base, `FCM_API_URL`; the token endpoint, `token_uri` of the
credentials file), which is what lets the tests run a real HTTP exchange against a local
server.

Errors, as FCM documents them for v1 (`error.details[].errorCode`, else `error.status`):
UNREGISTERED, INVALID_ARGUMENT and SENDER_ID_MISMATCH reject the token (our payloads are small
and well formed, so an INVALID_ARGUMENT is the token's fault, as Sygnal assumes too);
UNAVAILABLE, INTERNAL, QUOTA_EXCEEDED (429) and 5xx are retried, after Retry-After when given;
401 is retried with a fresh access token; other 4xx drop the message.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import orjson
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from push.jobs import PushMessage
from push.provider import Outcome, SendResult, token_hint

log = logging.getLogger("commons.push.fcm")

DEFAULT_API_URL = "https://fcm.googleapis.com"
DEFAULT_TOKEN_URI = "https://oauth2.googleapis.com/token"
SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_LIFETIME = 3600
REFRESH_MARGIN = 300
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


@dataclass(frozen=True)
class ServiceAccount:
    client_email: str
    private_key: rsa.RSAPrivateKey
    private_key_id: str | None
    token_uri: str
    project_id: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServiceAccount:
        key = serialization.load_pem_private_key(data["private_key"].encode(), password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError("the service account key is not an RSA key")
        return cls(
            client_email=data["client_email"],
            private_key=key,
            private_key_id=data.get("private_key_id"),
            token_uri=data.get("token_uri") or DEFAULT_TOKEN_URI,
            project_id=data.get("project_id"),
        )

    @classmethod
    def from_file(cls, path: str | Path) -> ServiceAccount:
        return cls.from_json(orjson.loads(Path(path).read_bytes()))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def signed_assertion(account: ServiceAccount, now: int | None = None) -> str:
    """The RS256 JWT the token endpoint exchanges for an access token."""
    issued = int(time.time()) if now is None else now
    header: dict[str, str] = {"alg": "RS256", "typ": "JWT"}
    if account.private_key_id:
        header["kid"] = account.private_key_id
    claims = {
        "iss": account.client_email, "scope": SCOPE, "aud": account.token_uri,
        "iat": issued, "exp": issued + TOKEN_LIFETIME,
    }
    signing_input = f"{_b64(orjson.dumps(header))}.{_b64(orjson.dumps(claims))}"
    signature = account.private_key.sign(
        signing_input.encode(), padding.PKCS1v15(), hashes.SHA256()
    )
    return f"{signing_input}.{_b64(signature)}"


class AuthError(Exception):
    """The token endpoint did not give us an access token (retried later)."""


class AccessTokens:
    """One cached access token, fetched by one request at a time."""

    def __init__(self, session: aiohttp.ClientSession, account: ServiceAccount) -> None:
        self._session = session
        self._account = account
        self._token: str | None = None
        self._expires = 0.0
        self._lock = asyncio.Lock()

    def invalidate(self, token: str) -> None:
        if self._token == token:
            self._token = None

    async def get(self) -> str:
        if self._token is not None and time.monotonic() < self._expires:
            return self._token
        async with self._lock:
            if self._token is not None and time.monotonic() < self._expires:
                return self._token
            form = {"grant_type": JWT_BEARER, "assertion": signed_assertion(self._account)}
            async with self._session.post(self._account.token_uri, data=form) as resp:
                body = await resp.read()
                if resp.status != 200:
                    raise AuthError(f"token endpoint answered {resp.status}: {body[:200]!r}")
            try:
                data = orjson.loads(body)
                token = str(data["access_token"])
                lifetime = float(data.get("expires_in", TOKEN_LIFETIME))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise AuthError(f"token endpoint answered no access token: {exc!r}") from None
            self._token = token
            self._expires = time.monotonic() + max(lifetime - REFRESH_MARGIN, lifetime / 2)
            return token


def fcm_message(token: str, message: PushMessage) -> dict[str, Any]:
    body: dict[str, Any] = {
        "token": token,
        "notification": {"title": message.title, "body": message.body},
        "data": dict(message.data),
    }
    if message.thread:
        body["android"] = {"notification": {"tag": message.thread}}
        body["apns"] = {"payload": {"aps": {"thread-id": message.thread}}}
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
        account: ServiceAccount,
        *,
        project_id: str | None = None,
        api_url: str | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        project = project_id or account.project_id
        if not project:
            raise ValueError("FCM needs a project id (FCM_PROJECT_ID or the credentials file)")
        self._owns_session = session is None
        self._session = session or aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
        )
        self._tokens = AccessTokens(self._session, account)
        base = (api_url or DEFAULT_API_URL).rstrip("/")
        self.url = f"{base}/v1/projects/{project}/messages:send"

    @classmethod
    def from_options(cls, options: FcmOptions) -> FcmProvider:
        if not options.credentials_file:
            raise ValueError("FCM needs FCM_CREDENTIALS_FILE")
        return cls(
            ServiceAccount.from_file(options.credentials_file),
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
        if self._owns_session:
            await self._session.close()
