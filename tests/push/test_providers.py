"""How each provider classifies answers (retry / drop / token rejected), what it sends, and the
backoff schedule."""

from __future__ import annotations

import orjson
import pytest

from push import apns, fcm
from push.jobs import PushMessage
from push.log import LogProvider
from push.provider import Outcome, token_hint
from push.worker import WorkerSettings, backoff

MESSAGE = PushMessage(title="Ann mentioned you", body="hello",
                      data={"type": "notification", "notification_id": "7"},
                      thread="Message:3", push_id="5d1e4c1a-0000-4000-8000-000000000007")


@pytest.mark.parametrize(("status", "reason", "outcome"), [
    ("200", None, Outcome.SENT),
    ("400", "BadDeviceToken", Outcome.TOKEN_REJECTED),
    ("410", "Unregistered", Outcome.TOKEN_REJECTED),
    ("410", "ExpiredToken", Outcome.TOKEN_REJECTED),
    ("400", "DeviceTokenNotForTopic", Outcome.TOKEN_REJECTED),
    ("429", "TooManyRequests", Outcome.RETRY),
    ("500", "InternalServerError", Outcome.RETRY),
    ("503", "ServiceUnavailable", Outcome.RETRY),
    ("403", "ExpiredProviderToken", Outcome.RETRY),
    ("403", "InvalidProviderToken", Outcome.RETRY),
    ("400", "IdleTimeout", Outcome.RETRY),
    ("413", "PayloadTooLarge", Outcome.DROP),
    ("400", "BadTopic", Outcome.DROP),
    ("400", "BadCollapseId", Outcome.DROP),
    ("405", "MethodNotAllowed", Outcome.DROP),
])
def test_apns_classification(status: str, reason: str | None, outcome: Outcome) -> None:
    result = apns.classify(status, reason)
    assert result.outcome is outcome
    if outcome is not Outcome.SENT:
        assert result.detail == f"{status} {reason}"


def test_apns_payload() -> None:
    assert apns.apns_payload(MESSAGE) == {
        "type": "notification", "notification_id": "7",
        "aps": {"alert": {"title": "Ann mentioned you", "body": "hello"}, "sound": "default",
                "thread-id": "Message:3"},
    }
    plain = PushMessage(title="t", body="b", data={"aps": "ignored"})
    assert apns.apns_payload(plain) == {"aps": {"alert": {"title": "t", "body": "b"},
                                                "sound": "default"}}


def _fcm_error(code: str | None, status: str = "") -> bytes:
    details = [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
                "errorCode": code}] if code else []
    return orjson.dumps({"error": {"code": 0, "status": status, "details": details}})


@pytest.mark.parametrize(("status", "body", "outcome"), [
    (200, b'{"name": "projects/p/messages/1"}', Outcome.SENT),
    (404, _fcm_error("UNREGISTERED", "NOT_FOUND"), Outcome.TOKEN_REJECTED),
    (400, _fcm_error("INVALID_ARGUMENT", "INVALID_ARGUMENT"), Outcome.TOKEN_REJECTED),
    (400, _fcm_error(None, "INVALID_ARGUMENT"), Outcome.TOKEN_REJECTED),
    (403, _fcm_error("SENDER_ID_MISMATCH", "PERMISSION_DENIED"), Outcome.TOKEN_REJECTED),
    (404, _fcm_error(None, "NOT_FOUND"), Outcome.DROP),  # e.g. a wrong project: keep tokens
    (429, _fcm_error("QUOTA_EXCEEDED", "RESOURCE_EXHAUSTED"), Outcome.RETRY),
    (503, _fcm_error("UNAVAILABLE", "UNAVAILABLE"), Outcome.RETRY),
    (500, _fcm_error("INTERNAL", "INTERNAL"), Outcome.RETRY),
    (502, b"<html>bad gateway</html>", Outcome.RETRY),
    (401, _fcm_error("THIRD_PARTY_AUTH_ERROR", "UNAUTHENTICATED"), Outcome.RETRY),
    (413, b"too big", Outcome.DROP),
])
def test_fcm_classification(status: int, body: bytes, outcome: Outcome) -> None:
    assert fcm.classify(status, body, {}).outcome is outcome


def test_fcm_retry_after() -> None:
    result = fcm.classify(503, _fcm_error("UNAVAILABLE"), {"Retry-After": "30"})
    assert (result.outcome, result.retry_after) == (Outcome.RETRY, 30.0)
    assert fcm.classify(503, b"", {"Retry-After": "soon"}).retry_after is None


def test_fcm_message() -> None:
    assert fcm.fcm_message("tok", MESSAGE) == {"message": {
        "token": "tok",
        "notification": {"title": "Ann mentioned you", "body": "hello"},
        "data": {"type": "notification", "notification_id": "7"},
        # the push's own identity, so that a re-send replaces its first copy
        "android": {"notification": {"tag": "5d1e4c1a-0000-4000-8000-000000000007"}},
        "apns": {"headers": {"apns-collapse-id": "5d1e4c1a-0000-4000-8000-000000000007"},
                 "payload": {"aps": {"thread-id": "Message:3"}}},
    }}


def test_fcm_badge_and_silent_messages() -> None:
    counted = PushMessage(title="t", body="b", data={"type": "remark"}, badge=4)
    assert fcm.fcm_message("tok", counted) == {"message": {
        "token": "tok", "notification": {"title": "t", "body": "b"},
        "data": {"type": "remark", "badge": "4"},
        "android": {"notification": {"notification_count": 4}},
        "apns": {"payload": {"aps": {"badge": 4}}},
    }}
    silent = PushMessage(title="", body="", data={"type": "badge"}, badge=0, silent=True)
    assert fcm.fcm_message("tok", silent) == {"message": {
        "token": "tok", "data": {"type": "badge", "badge": "0"},
        "android": {"priority": "normal", "collapse_key": "badge"},
    }}  # data-only: nothing shown


def test_apns_badge_and_silent_payloads() -> None:
    silent = PushMessage(title="", body="", data={"type": "badge"}, badge=3, silent=True,
                         push_id="0b7c1a52-0000-4000-8000-000000000001")
    assert apns.apns_payload(silent) == {"type": "badge",
                                         "aps": {"content-available": 1, "badge": 3}}
    assert apns.apns_headers(silent, "org.app") == [
        ("apns-topic", "org.app"), ("apns-id", "0b7c1a52-0000-4000-8000-000000000001"),
        ("apns-push-type", "background"), ("apns-priority", "5")]
    assert apns.apns_headers(MESSAGE, "org.app") == [
        ("apns-topic", "org.app"), ("apns-id", "5d1e4c1a-0000-4000-8000-000000000007"),
        ("apns-push-type", "alert"), ("apns-priority", "10"),
        ("apns-collapse-id", "5d1e4c1a-0000-4000-8000-000000000007")]


def test_backoff_doubles_up_to_a_cap_and_respects_retry_after() -> None:
    settings = WorkerSettings(backoff_min=10.0, backoff_max=100.0)
    assert [backoff(settings, n, None, lambda: 1.0) for n in (1, 2, 3, 4, 5, 9)] == [
        10.0, 20.0, 40.0, 80.0, 100.0, 100.0]
    assert backoff(settings, 2, None, lambda: 0.0) == 10.0  # jitter: half to all of it
    assert backoff(settings, 1, None, lambda: 0.0) == 10.0  # never under the minimum
    assert backoff(settings, 1, 500.0, lambda: 1.0) == 500.0
    # the defaults: Synapse's pusher schedule, 1 s doubling to an hour
    default = WorkerSettings()
    assert [backoff(default, n, None, lambda: 1.0) for n in (1, 2, 3, 12, 13, 40)] == [
        1.0, 2.0, 4.0, 2048.0, 3600.0, 3600.0]
    assert default.give_up == 86400.0


async def test_the_log_provider_sends_nothing_anywhere() -> None:
    provider = LogProvider("apns")
    result = await provider.send("0123456789abcdef", MESSAGE)
    assert result.outcome is Outcome.SENT
    assert provider.sent == [("0123456789abcdef", MESSAGE)]
    assert token_hint("0123456789abcdef") == "...abcdef"
    await provider.close()
