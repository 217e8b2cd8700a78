"""A local HTTP server speaking the FCM HTTP v1 API and Google's OAuth token endpoint, for the
push tests: a real HTTP exchange on 127.0.0.1, nothing mocked inside the provider.

- POST /token: the JWT bearer grant; the assertion's RS256 signature is verified with the
  service account's public key and its claims checked, then an access token is issued.
- POST /v1/projects/<project>/messages:send: checks the bearer token and records the message;
  answers 200 unless `script[token]` holds answers to give first (status, FCM error code,
  headers), or the access token was revoked (401).
"""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

PROJECT = "commons-test"
CLIENT_EMAIL = "push@commons-test.iam.gserviceaccount.com"
SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
# what Google's token endpoint wants as the assertion's audience, wherever it is posted
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
STATUS_OF = {"UNREGISTERED": "NOT_FOUND", "INVALID_ARGUMENT": "INVALID_ARGUMENT",
             "UNAVAILABLE": "UNAVAILABLE", "INTERNAL": "INTERNAL",
             "QUOTA_EXCEEDED": "RESOURCE_EXHAUSTED", "SENDER_ID_MISMATCH": "PERMISSION_DENIED"}


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Answer:
    status: int
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeFcm:
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    base_url: str = ""
    script: dict[str, list[Answer]] = field(default_factory=dict)
    revoked: set[str] = field(default_factory=set)
    delay: float = 0.0
    issued: list[str] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)
    """Every send request that got through authentication: its message and bearer token."""
    attempts: list[str] = field(default_factory=list)
    """The device token of every send request, answered or not."""
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once a message got through."""
    in_flight: int = 0
    max_in_flight: int = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/token", self._token)
        app.router.add_post("/v1/projects/{project}/messages:send", self._send)
        return app

    def credentials(self, directory: Path) -> Path:
        pem = self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        path = directory / "fcm-service-account.json"
        path.write_bytes(orjson.dumps({
            "type": "service_account", "project_id": PROJECT, "private_key_id": "key-1",
            "private_key": pem, "client_email": CLIENT_EMAIL,
            "token_uri": f"{self.base_url}/token",
        }))
        return path

    def verify_assertion(self, assertion: str) -> dict[str, Any]:
        head, payload, signature = assertion.split(".")
        self.key.public_key().verify(
            _unb64(signature), f"{head}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256()
        )
        header = orjson.loads(_unb64(head))
        assert header == {"alg": "RS256", "typ": "JWT", "kid": "key-1"}, header
        claims: dict[str, Any] = orjson.loads(_unb64(payload))
        return claims

    async def _token(self, request: web.Request) -> web.Response:
        form = await request.post()
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        try:
            claims = self.verify_assertion(str(form.get("assertion")))
        except Exception:
            return web.json_response({"error": "invalid_grant"}, status=400)
        now = time.time()
        if not (claims["iss"] == CLIENT_EMAIL and claims["scope"] == SCOPE
                and claims["aud"] == GOOGLE_TOKEN_URI
                and claims["iat"] <= now + 5 and claims["exp"] - claims["iat"] == 3600):
            return web.json_response({"error": "invalid_grant"}, status=400)
        token = f"access-{len(self.issued) + 1}"
        self.issued.append(token)
        return web.json_response({"access_token": token, "expires_in": 3599,
                                  "token_type": "Bearer"})

    async def _send(self, request: web.Request) -> web.Response:
        assert request.match_info["project"] == PROJECT
        body = await request.json()
        device = body["message"]["token"]
        self.attempts.append(device)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            bearer = request.headers.get("Authorization", "")
            access = bearer.removeprefix("Bearer ")
            if not bearer.startswith("Bearer ") or access not in self.issued:
                return self._error(Answer(401, "THIRD_PARTY_AUTH_ERROR"))
            if access in self.revoked:
                return self._error(Answer(401, "UNAUTHENTICATED"))
            answers = self.script.get(device)
            if answers:
                answer = answers.pop(0)
                if answer.status != 200:
                    return self._error(answer)
            self.received.append({"message": body["message"], "access_token": access})
            self.arrived.set()
            return web.json_response({"name": f"projects/{PROJECT}/messages/{len(self.received)}"})
        finally:
            self.in_flight -= 1

    @staticmethod
    def _error(answer: Answer) -> web.Response:
        code = answer.code or "INTERNAL"
        error = {"code": answer.status, "message": code.lower(),
                 "status": STATUS_OF.get(code, code),
                 "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
                              "errorCode": code}]}
        return web.json_response({"error": error}, status=answer.status, headers=answer.headers)
