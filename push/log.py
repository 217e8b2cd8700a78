"""A provider that only logs: used for a platform whose credentials are not configured (the
default), so that development and tests run the whole push path without Apple or Google."""

from __future__ import annotations

import logging

from push.jobs import PushMessage
from push.provider import SendResult, token_hint

log = logging.getLogger("commons.push")


class LogProvider:
    def __init__(self, platform: str) -> None:
        self.name = f"log:{platform}"
        self.sent: list[tuple[str, PushMessage]] = []
        """What was "sent", newest last (kept for tests; bounded)."""

    async def send(self, token: str, message: PushMessage) -> SendResult:
        log.info("push (%s, not configured) to %s: %s: %s", self.name, token_hint(token),
                 message.title, message.body)
        self.sent.append((token, message))
        del self.sent[:-1000]
        return SendResult.sent()

    async def close(self) -> None:
        return None
