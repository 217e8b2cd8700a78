"""The client address and scheme a trusted proxy reports (issue 8, defects 4 and 5)."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from app.config import Settings
from app.proxy import client_address, is_https
from app.resources import SETTINGS


def _request(headers: dict[str, str], *, trust: bool = True, hops: int = 1) -> web.Request:
    app = web.Application()
    app[SETTINGS] = Settings(trust_forwarded=trust, trusted_proxy_hops=hops)
    return make_mocked_request("GET", "/", headers=headers, app=app)


def test_the_address_nginx_appended_not_the_clients_own() -> None:
    # the client wrote "6.6.6.6"; nginx appended the address it saw
    request = _request({"X-Forwarded-For": "6.6.6.6, 203.0.113.7"})
    assert client_address(request) == "203.0.113.7"
    assert client_address(_request({"X-Forwarded-For": "203.0.113.7"})) == "203.0.113.7"


def test_n_trusted_hops_count_from_the_right() -> None:
    headers = {"X-Forwarded-For": "6.6.6.6, 203.0.113.7, 10.0.0.2"}
    assert client_address(_request(headers, hops=2)) == "203.0.113.7"
    assert client_address(_request(headers, hops=1)) == "10.0.0.2"


def test_fewer_entries_than_hops_or_no_trust_gives_the_peer() -> None:
    peer = make_mocked_request("GET", "/").remote
    assert client_address(_request({"X-Forwarded-For": "6.6.6.6"}, hops=2)) == (
        peer or "unknown")
    assert client_address(_request({"X-Forwarded-For": "6.6.6.6"}, trust=False)) == (
        peer or "unknown")


@pytest.mark.parametrize(("headers", "trust", "hops", "expected"), [
    ({"X-Forwarded-Proto": "https"}, True, 1, True),
    ({"X-Forwarded-Proto": "http"}, True, 1, False),
    ({"X-Forwarded-Proto": "https"}, False, 1, False),   # not behind a trusted proxy
    ({"X-Forwarded-Proto": "https, http"}, True, 1, False),  # the client's own claim
    ({"X-Forwarded-Proto": "https, http"}, True, 2, True),
    ({"X-Forwarded-Proto": "https"}, True, 2, True),     # set (not appended) by one proxy
    ({}, True, 1, False),
])
def test_https_as_the_trusted_proxy_says(
    headers: dict[str, str], trust: bool, hops: int, expected: bool
) -> None:
    assert is_https(_request(headers, trust=trust, hops=hops)) is expected


def test_hops_setting_from_the_environment() -> None:
    assert Settings.from_env({}).trusted_proxy_hops == 1
    assert Settings.from_env({"COMMONS_TRUSTED_PROXY_HOPS": "2"}).trusted_proxy_hops == 2
