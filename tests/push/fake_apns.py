"""A local stand-in for APNs, for the push tests and bench/push.py: TLS (a certificate for
Apple's host names from a throwaway test CA) and HTTP/2 (the `h2` library), behind a local
HTTP CONNECT proxy, so that the worker reaches it exactly as it would reach Apple through
APNS_PROXY, with the test CA trusted through SSL_CERT_FILE.

- Every request is recorded (`received`): its headers, its JSON payload, and its bearer JWT,
  which is verified against the .p8 key's public half (ES256) with its `kid` and `iss`
  checked; a bad one is answered 403 InvalidProviderToken.
- Answers are 200 unless `script[device token]` holds answers to give first (status, reason,
  headers), or the JWT is in `expired` (403 ExpiredProviderToken).
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import jwt
import orjson
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

HOSTS = ("api.push.apple.com", "api.sandbox.push.apple.com")
KEY_ID = "ABC123DEFG"
TEAM_ID = "DEF123GHIJ"
TOPIC = "org.commons.app"


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_certificates(
    directory: Path, *, hosts: Sequence[str] = HOSTS, ca_of: Path | None = None
) -> tuple[Path, Path, Path]:
    """A server certificate for `hosts` (Apple's by default) and 127.0.0.1, signed by a new
    test CA, or by the one made earlier in directory `ca_of`: (ca.pem, server.pem,
    server.key). The CA's key stays beside it (ca.key), for `ca_of`."""
    now = datetime.datetime.now(datetime.UTC)
    if ca_of is None:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = (x509.CertificateBuilder().subject_name(_name("Commons test CA"))
              .issuer_name(_name("Commons test CA")).public_key(ca_key.public_key())
              .serial_number(x509.random_serial_number())
              .not_valid_before(now - datetime.timedelta(hours=1))
              .not_valid_after(now + datetime.timedelta(days=2))
              .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
              .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                           False), critical=True)
              .sign(ca_key, hashes.SHA256()))
    else:
        ca = x509.load_pem_x509_certificate((ca_of / "ca.pem").read_bytes())
        loaded = serialization.load_pem_private_key((ca_of / "ca.key").read_bytes(), None)
        assert isinstance(loaded, ec.EllipticCurvePrivateKey)
        ca_key = loaded
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(h) for h in hosts]
    names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (x509.CertificateBuilder().subject_name(_name(hosts[0])).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    ca_file, cert_file, key_file = (directory / n for n in ("ca.pem", "server.pem", "server.key"))

    def private(k: ec.EllipticCurvePrivateKey) -> bytes:
        return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption())

    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (directory / "ca.key").write_bytes(private(ca_key))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(private(key))
    return ca_file, cert_file, key_file


def server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """A TLS server context with this certificate (for the FCM stand-in over HTTPS)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    return context


@dataclass
class Answer:
    status: int
    reason: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Received:
    headers: dict[str, str]
    payload: dict[str, Any]
    jwt_header: dict[str, Any]
    jwt_claims: dict[str, Any]
    token: str

    @property
    def device(self) -> str:
        return self.headers[":path"].rsplit("/", 1)[-1]


@dataclass
class FakeApns:
    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    script: dict[str, list[Answer]] = field(default_factory=dict)
    expired: set[str] = field(default_factory=set)
    """Provider JWTs to answer ExpiredProviderToken."""
    expire_all: bool = False
    """Answer ExpiredProviderToken to every JWT."""
    received: list[Received] = field(default_factory=list)
    """Requests whose JWT verified, in arrival order."""
    answered: list[tuple[str, int]] = field(default_factory=list)
    """(device token, status) of every request."""
    record: bool = True
    """Keep `received` (benchmarks only count)."""
    count: int = 0
    delay: float = 0.0
    """Seconds before each answer (answers then come concurrently, as from APNs)."""
    max_streams: int | None = None
    """SETTINGS_MAX_CONCURRENT_STREAMS to announce (None: h2's default, unlimited)."""
    most_streams: int = 0
    """The most requests open at once on one connection."""
    port: int = 0
    connections: int = 0
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)
    _server: asyncio.Server | None = None

    def p8(self, directory: Path) -> Path:
        path = directory / f"AuthKey_{KEY_ID}.p8"
        path.write_bytes(self.key.private_bytes(serialization.Encoding.PEM,
                                                serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
        return path

    async def start(self, cert_file: Path, key_file: Path) -> None:
        context = server_context(cert_file, key_file)
        context.set_alpn_protocols(["h2"])
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=context)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    def drop_connections(self) -> None:
        """Close every client connection, as APNs does to idle ones."""
        for writer in list(self._writers):
            writer.close()

    def _verify(self, authorization: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer":
            return None
        try:
            header = jwt.get_unverified_header(token)
            claims = jwt.decode(token, self.key.public_key(), algorithms=["ES256"],
                                options={"require": ["iss", "iat"]})
        except jwt.PyJWTError:
            return None
        if header.get("kid") != KEY_ID or claims.get("iss") != TEAM_ID:
            return None
        return header, claims

    def _answer(self, headers: dict[str, str], body: bytes) -> Answer:
        device = headers.get(":path", "").rsplit("/", 1)[-1]
        authorization = headers.get("authorization", "")
        token = authorization.partition(" ")[2]
        verified = self._verify(authorization)
        if verified is None:
            return Answer(403, "InvalidProviderToken")
        if self.expire_all or token in self.expired:
            return Answer(403, "ExpiredProviderToken")
        self.count += 1
        if self.record:
            self.received.append(Received(headers, orjson.loads(body), verified[0],
                                          verified[1], token))
        queue = self.script.get(device)
        if queue:
            return queue.pop(0)
        return Answer(200)

    def _reply(self, conn: h2.connection.H2Connection, stream_id: int,
               headers: dict[str, str], answer: Answer) -> None:
        self.answered.append((headers.get(":path", "").rsplit("/", 1)[-1], answer.status))
        out = [(":status", str(answer.status)), ("apns-id", headers.get("apns-id", "")),
               *answer.headers.items()]
        if answer.reason is None:
            conn.send_headers(stream_id, out, end_stream=True)
        else:
            reply = orjson.dumps({"reason": answer.reason, "timestamp": int(time.time() * 1000)})
            conn.send_headers(stream_id, [*out, ("content-type", "application/json")])
            conn.send_data(stream_id, reply, end_stream=True)

    async def _reply_later(self, conn: h2.connection.H2Connection,
                           writer: asyncio.StreamWriter, stream_id: int,
                           headers: dict[str, str], answer: Answer) -> None:
        await asyncio.sleep(self.delay)
        if writer.is_closing():
            return  # the client is gone (killed) before hearing the answer
        try:
            self._reply(conn, stream_id, headers, answer)
            writer.write(conn.data_to_send())
        except (OSError, h2.exceptions.ProtocolError):
            pass

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        if self.max_streams is not None:
            # in the first SETTINGS frame, as APNs does
            conn.local_settings = h2.settings.Settings(client=False, initial_values={
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.max_streams})
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        requests: dict[int, tuple[dict[str, str], bytearray]] = {}
        pending: set[asyncio.Task[None]] = set()
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        requests[event.stream_id] = (
                            {str(k): str(v) for k, v in event.headers or ()}, bytearray())
                        self.most_streams = max(self.most_streams, conn.open_inbound_streams)
                    elif isinstance(event, h2.events.DataReceived):
                        requests[event.stream_id][1].extend(event.data or b"")
                        conn.acknowledge_received_data(event.flow_controlled_length or 0,
                                                       event.stream_id)
                    elif isinstance(event, h2.events.StreamEnded):
                        headers, body = requests.pop(event.stream_id)
                        # taken (and recorded) on arrival, answered after `delay`: a client
                        # that dies meanwhile never learns that the push went out
                        answer = self._answer(headers, bytes(body))
                        if self.delay:
                            task = asyncio.create_task(
                                self._reply_later(conn, writer, event.stream_id, headers, answer))
                            pending.add(task)
                            task.add_done_callback(pending.discard)
                        else:
                            self._reply(conn, event.stream_id, headers, answer)
                writer.write(conn.data_to_send())
        except (OSError, h2.exceptions.ProtocolError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()


@dataclass
class ConnectProxy:
    """An HTTP CONNECT proxy that sends every tunnel to `target` (the stand-in), whatever
    host it names, and records what was asked (`tunnels`)."""

    target: tuple[str, int]
    tunnels: list[str] = field(default_factory=list)
    port: int = 0
    _server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
            if method != "CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
                writer.close()
                return
            self.tunnels.append(target)
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.close()
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
