"""What every push provider ("pushkin", as Sygnal calls them) looks like to the worker.

A provider sends one message to one device token and classifies what happened, so that the
worker never needs to know a provider's error vocabulary:

* SENT: accepted by the provider.
* RETRY: a temporary failure (network, 429, 5xx, an expired auth token); try again later,
  after `retry_after` seconds when the provider said so.
* DROP: this message will never be accepted (too large, malformed, misconfigured topic); the
  token is fine, so the device stays.
* TOKEN_REJECTED: the provider says the token is dead (uninstalled app, token of another app or
  environment); the device is forgotten and gets no more pushes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from push.jobs import PushMessage


class Outcome(enum.Enum):
    SENT = "sent"
    RETRY = "retry"
    DROP = "drop"
    TOKEN_REJECTED = "token_rejected"


@dataclass(frozen=True, slots=True)
class SendResult:
    outcome: Outcome
    detail: str = ""
    retry_after: float | None = None

    @classmethod
    def sent(cls) -> SendResult:
        return cls(Outcome.SENT)


class Provider(Protocol):
    name: str

    async def send(self, token: str, message: PushMessage) -> SendResult:
        """Deliver one message; never raises for a provider or network failure (classify it)."""

    async def close(self) -> None: ...


def token_hint(token: str) -> str:
    """Enough of a token to tell devices apart in logs, never the whole secret."""
    return f"...{token[-6:]}" if len(token) > 6 else "..."
