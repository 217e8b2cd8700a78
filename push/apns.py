"""Apple Push Notification service: HTTP/2 with token-based authentication (a .p8 key:
APNS_KEY_FILE, APNS_KEY_ID, APNS_TEAM_ID, APNS_TOPIC, APNS_USE_SANDBOX), optionally through an
HTTP CONNECT proxy (APNS_PROXY).

A small client on the `h2` protocol library rather than aioapns, which we used before: aioapns
gives no access to response headers (Retry-After), has no way to re-sign its JWT early (APNs'
ExpiredProviderToken), and its proxy support hands the proxy's socket to a second transport
while the first still owns it, which fails on Python 3.11's event loops. Here the tunnel is
plain: CONNECT, then TLS (ALPN h2) over the same stream with `start_tls`. Certificates are
checked against the system's trust store, which honours SSL_CERT_FILE (how the tests trust
their own CA).

One connection, many concurrent streams (HTTP/2 multiplexing, as Apple recommends); it is
re-opened when the server closes it (GOAWAY, idle timeout).

Errors, by APNs' documented status codes and reasons:
- the token is dead: 410, BadDeviceToken, Unregistered, ExpiredToken, DeviceTokenNotForTopic
  (the device is forgotten);
- ExpiredProviderToken: our JWT is re-signed at once and the request sent again, once;
- temporary: 429, 5xx, 403 (our provider token: InvalidProviderToken..., not the device's
  fault), IdleTimeout, and any connection failure or timeout (retried, after Retry-After when
  the answer has one);
- everything else (PayloadTooLarge, BadTopic, BadCollapseId...): this message is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import jwt
import orjson
from hpack import HeaderTuple, NeverIndexedHeaderTuple

from push.jobs import PushMessage
from push.provider import Outcome, SendResult, token_hint

log = logging.getLogger("commons.push.apns")

PRODUCTION_HOST = "api.push.apple.com"
SANDBOX_HOST = "api.sandbox.push.apple.com"
PORT = 443
REQUEST_TIMEOUT = 15.0
CONNECT_TIMEOUT = 10.0
TOKEN_REFRESH = 50 * 60
"""Apple accepts a provider JWT for an hour and refuses new ones more often than every 20
minutes (TooManyProviderTokenUpdates)."""
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
    @property
    def proxy(self) -> str | None: ...


def classify(status: str | int, reason: str | None, retry_after: float | None = None
             ) -> SendResult:
    """One APNs answer (status code, reason) as an outcome."""
    code = int(status) if str(status).isdigit() else 0
    reason = reason or ""
    if code == 200:
        return SendResult.sent()
    detail = f"{code} {reason}".strip()
    if code == 410 or reason in REJECTING:
        return SendResult(Outcome.TOKEN_REJECTED, detail)
    if code in (403, 429) or code >= 500 or reason in RETRYING:
        return SendResult(Outcome.RETRY, detail, retry_after)
    return SendResult(Outcome.DROP, detail)


def apns_payload(message: PushMessage) -> dict[str, Any]:
    aps: dict[str, Any]
    if message.silent:
        aps = {"content-available": 1}
    else:
        aps = {"alert": {"title": message.title, "body": message.body}, "sound": "default"}
        if message.thread:
            aps["thread-id"] = message.thread
    if message.badge is not None:
        aps["badge"] = message.badge
    return {**{k: v for k, v in message.data.items() if k != "aps"}, "aps": aps}


Header = tuple[str, str] | HeaderTuple


def apns_headers(message: PushMessage, topic: str) -> list[Header]:
    """The APNs request headers besides the pseudo-headers and authorization. The push's own
    id is sent without entering HPACK's table (a value never seen again would only push out
    the ones that repeat: topic, push type, the JWT)."""
    headers: list[Header] = [("apns-topic", topic)]
    if message.push_id:
        headers.append(NeverIndexedHeaderTuple("apns-id", message.push_id))
    if message.silent:
        # background pushes must have priority 5, or Apple refuses them
        headers += [("apns-push-type", "background"), ("apns-priority", "5")]
    else:
        headers += [("apns-push-type", "alert"), ("apns-priority", "10")]
        if message.push_id:  # a re-send replaces its first copy (a UUID: under 64 bytes)
            headers.append(NeverIndexedHeaderTuple("apns-collapse-id", message.push_id))
    return headers


def parse_proxy(proxy: str) -> tuple[str, int]:
    """APNS_PROXY as (host, port): "http://host:port", "host:port" (port 8080 by default)."""
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"APNS_PROXY must be http://host:port, got {proxy!r}")
    return parts.hostname, parts.port or 8080


class ProviderToken:
    """The provider JWT (ES256, kid = key id, iss = team id, iat), kept until TOKEN_REFRESH or
    until APNs says it expired."""

    def __init__(self, key: str, key_id: str, team_id: str) -> None:
        self._key = key
        self._key_id = key_id
        self._team_id = team_id
        self._token: str | None = None
        self._issued = 0.0

    def current(self) -> str:
        if self._token is None or time.time() - self._issued > TOKEN_REFRESH:
            self._issued = time.time()
            self._token = jwt.encode({"iss": self._team_id, "iat": int(self._issued)},
                                     self._key, algorithm="ES256",
                                     headers={"kid": self._key_id})
        return self._token

    def expired(self, token: str) -> None:
        """APNs refused `token` as expired: sign a new one (once, however many requests
        were refused with it)."""
        if token == self._token:
            self._token = None


class _Response:
    __slots__ = ("body", "done", "headers")

    def __init__(self) -> None:
        self.headers: dict[str, str] = {}
        self.body = bytearray()
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class Connection:
    """One HTTP/2 connection to APNs: requests multiplexed as streams, answered by a reader
    task."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 authority: str) -> None:
        self._reader = reader
        self._writer = writer
        self._authority = authority
        # Our requests' headers are built here, lower-case and valid, so h2 need not normalize
        # or validate them again (a third of the worker's CPU went there). Not normalizing also
        # lets HPACK index `authorization`, which h2 otherwise never indexes: the CRIME-style
        # risk it guards against needs an attacker's text in the same compression context, and
        # only this worker's requests share it. Indexed, the provider JWT (about 200 bytes)
        # goes as a byte or two after the first request instead of being Huffman-coded anew.
        self._h2 = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8", normalize_outbound_headers=False,
            validate_outbound_headers=False,
        ))
        self._h2.initiate_connection()
        self._streams: dict[int, _Response] = {}
        self._window = asyncio.Event()
        self._window.set()
        # set whenever a stream ends or the server's settings change: a request waiting for
        # the server's SETTINGS_MAX_CONCURRENT_STREAMS (APNs starts a connection low and
        # raises it) tries again
        self._slots = asyncio.Event()
        self._preface = asyncio.Event()
        """Set once the server's first SETTINGS arrived: nothing is sent before, so that its
        stream limit is known."""
        self.closed = False
        self._flushing = False
        writer.write(self._h2.data_to_send())
        self._task = asyncio.create_task(self._read())

    def _flush_soon(self) -> None:
        """Write what h2 has to send once the requests started in this turn of the event loop
        are all in it: one TLS record and one system call for many pushes."""
        if not self._flushing:
            self._flushing = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flushing = False
        data = self._h2.data_to_send()
        if data and not self.closed:
            self._writer.write(data)

    async def request(self, path: str, headers: list[Header], body: bytes
                      ) -> tuple[int, dict[str, str], bytes]:
        if not self._preface.is_set():
            await self._preface.wait()
        while (self._h2.open_outbound_streams
               >= self._h2.remote_settings.max_concurrent_streams):
            if self.closed:
                break
            self._slots.clear()
            await self._slots.wait()
        if self.closed:
            raise ConnectionError("the APNs connection is closed")
        try:
            stream_id = self._h2.get_next_available_stream_id()
            self._h2.send_headers(stream_id, [
                (":method", "POST"), (":scheme", "https"),
                NeverIndexedHeaderTuple(":path", path),  # one device's: kept out of the table
                (":authority", self._authority), *headers,
            ])
        except h2.exceptions.ProtocolError as exc:  # out of stream ids, or closing
            self.close()
            raise ConnectionError(f"cannot open an APNs stream: {exc!r}") from None
        response = self._streams[stream_id] = _Response()
        try:
            while self._h2.local_flow_control_window(stream_id) < len(body):
                self._window.clear()
                self._writer.write(self._h2.data_to_send())
                await self._window.wait()
                if self.closed:
                    raise ConnectionError("the APNs connection closed")
            self._h2.send_data(stream_id, body, end_stream=True)
            self._flush_soon()
            await response.done
        finally:
            self._streams.pop(stream_id, None)
        return int(response.headers.get(":status", "0")), response.headers, bytes(response.body)

    async def _read(self) -> None:
        error: BaseException = ConnectionError("the APNs connection closed")
        try:
            while True:
                data = await self._reader.read(65536)
                if not data:
                    break
                events = self._h2.receive_data(data)
                for event in events:
                    self._handle(event)
                out = self._h2.data_to_send()
                if out:
                    self._writer.write(out)
                if self.closed:
                    break
        except (OSError, h2.exceptions.ProtocolError) as exc:
            error = ConnectionError(f"APNs connection failed: {exc!r}")
        finally:
            self.closed = True
            self._window.set()
            self._slots.set()
            self._preface.set()
            for response in self._streams.values():
                if not response.done.done():
                    response.done.set_exception(error)
            self._writer.close()

    def _handle(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.ResponseReceived):
            response = self._streams.get(event.stream_id)
            if response is not None:
                response.headers = {str(k): str(v) for k, v in event.headers or ()}
        elif isinstance(event, h2.events.DataReceived):
            response = self._streams.get(event.stream_id)
            if response is not None:
                response.body += event.data or b""
            self._h2.acknowledge_received_data(event.flow_controlled_length or 0,
                                               event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            response = self._streams.get(event.stream_id)
            if response is not None and not response.done.done():
                response.done.set_result(None)
            self._slots.set()
        elif isinstance(event, h2.events.StreamReset):
            response = self._streams.get(event.stream_id)
            if response is not None and not response.done.done():
                response.done.set_exception(ConnectionError("APNs reset the stream"))
            self._slots.set()
        elif isinstance(event, h2.events.WindowUpdated):
            self._window.set()
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            self._preface.set()
            self._slots.set()
        elif isinstance(event, h2.events.ConnectionTerminated):
            # GOAWAY: streams above last_stream_id were never processed; they fail as
            # connection errors and are retried by the worker.
            self.closed = True

    def close(self) -> None:
        self.closed = True
        self._task.cancel()
        self._writer.close()


async def open_stream(host: str, port: int, proxy: tuple[str, int] | None,
                      context: ssl.SSLContext
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A TLS stream to host:port, directly or through an HTTP CONNECT tunnel."""
    if proxy is None:
        return await asyncio.open_connection(host, port, ssl=context, server_hostname=host)
    reader, writer = await asyncio.open_connection(*proxy)
    try:
        writer.write(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0].split()
        if len(status) < 2 or status[1] != b"200":
            raise ConnectionError(f"APNS_PROXY refused the tunnel: {head[:100]!r}")
        await writer.start_tls(context, server_hostname=host)
    except BaseException:
        writer.close()
        raise
    return reader, writer


class ApnsClient:
    def __init__(self, *, key: str, key_id: str, team_id: str, topic: str,
                 use_sandbox: bool = False, proxy: str | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.host = SANDBOX_HOST if use_sandbox else PRODUCTION_HOST
        self.topic = topic
        self.proxy = parse_proxy(proxy) if proxy else None
        self.tokens = ProviderToken(key, key_id, team_id)
        self._context = ssl_context or ssl.create_default_context()
        self._context.set_alpn_protocols(["h2"])
        self._connection: Connection | None = None
        self._lock = asyncio.Lock()

    async def _connected(self) -> Connection:
        connection = self._connection
        if connection is not None and not connection.closed:
            return connection
        async with self._lock:
            if self._connection is None or self._connection.closed:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    reader, writer = await open_stream(self.host, PORT, self.proxy,
                                                       self._context)
                self._connection = Connection(reader, writer, self.host)
            return self._connection

    async def send(self, token: str, message: PushMessage) -> tuple[int, str, float | None]:
        """(status, reason, Retry-After) of one push; re-signs and re-sends once on
        ExpiredProviderToken."""
        body = orjson.dumps(apns_payload(message))
        headers = apns_headers(message, self.topic)
        for attempt in (1, 2):
            jwt_token = self.tokens.current()
            connection = await self._connected()
            status, response_headers, raw = await connection.request(
                f"/3/device/{token}", [*headers, ("authorization", f"bearer {jwt_token}")], body
            )
            reason = ""
            if raw:
                with contextlib.suppress(orjson.JSONDecodeError, AttributeError):
                    reason = str(orjson.loads(raw).get("reason") or "")
            if reason == "ExpiredProviderToken" and attempt == 1:
                self.tokens.expired(jwt_token)
                continue
            return status, reason, _retry_after(response_headers.get("retry-after"))
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def _retry_after(raw: str | None) -> float | None:
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None


class ApnsProvider:
    name = "apns"

    def __init__(self, client: ApnsClient) -> None:
        self.client = client

    @classmethod
    def from_options(cls, options: ApnsOptions) -> ApnsProvider:
        if not (options.key_file and options.key_id and options.team_id and options.topic):
            raise ValueError("APNs needs APNS_KEY_FILE, APNS_KEY_ID, APNS_TEAM_ID and APNS_TOPIC")
        key = Path(options.key_file).read_text(encoding="utf-8")
        return cls(ApnsClient(key=key, key_id=options.key_id, team_id=options.team_id,
                              topic=options.topic, use_sandbox=options.use_sandbox,
                              proxy=options.proxy))

    async def send(self, token: str, message: PushMessage) -> SendResult:
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                status, reason, retry_after = await self.client.send(token, message)
        except (ConnectionError, TimeoutError, OSError, ssl.SSLError,
                asyncio.IncompleteReadError, h2.exceptions.ProtocolError) as exc:
            return SendResult(Outcome.RETRY, f"network: {exc!r}")
        result = classify(status, reason, retry_after)
        if result.outcome is not Outcome.SENT:
            log.info("apns push to %s: %s (%s)", token_hint(token), result.outcome.value,
                     result.detail)
        return result

    async def close(self) -> None:
        await self.client.close()
