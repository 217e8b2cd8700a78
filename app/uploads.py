"""Files that arrive in multipart bodies, spooled to disk instead of held in memory.

Every file part of every endpoint's body (`read_params`) becomes an UploadedFile: the first
SPOOL_BYTES stay in memory, the rest goes to an anonymous temp file under
`<COMMONS_DATA_DIR>/uploads` as it arrives (it has no name on disk, so nothing is left behind
even by a crash). Whoever keeps the file streams it on to the blob store with `chunks()`, and
the uploads middleware closes every temp file of the request when the request ends. So a
100 MB upload costs about one chunk of memory, not 100 MB (issue 8, defect 6).
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import mimetypes
import os
import re
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import IO, Any

import orjson
from aiohttp import BodyPartReader, MultipartReader, hdrs, web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Middleware
from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from app.errors import BadRequest, TooLarge

# Held in memory before a part goes to disk: small form files never touch the disk.
SPOOL_BYTES = 256 * 1024
# Bytes gathered before one (threaded) write to the temp file, and the read size out of it.
WRITE_BUFFER = 1024 * 1024
READ_CHUNK = 1024 * 1024
# A part header that is not plain text: a client error, never a 500.
_CONTROL = {chr(c) for c in range(32) if c != 9} | {"\x7f"}
_BOUNDARY_RE = re.compile(r";\s*boundary=\S", re.IGNORECASE)
# what aiohttp's multipart reader raises on a body that is not what its headers say
_MALFORMED = (ValueError, AssertionError, LookupError, HttpProcessingError)

UPLOADS_KEY = web.RequestKey("uploads", list)
UPLOAD_DIR_KEY = web.RequestKey("upload_dir", Path)
# Set by a view whose JSON body may carry an attachment as a base64 data URI: the largest
# decoded attachment (see read_json_spooling_data_uris).
DATA_URI_LIMIT_KEY = web.RequestKey("data_uri_limit", int)


class UploadedFile:
    """A file part: its name and declared type, its size, and its bytes read back in chunks.

    `from_bytes` makes one from bytes in memory (a decoded data URI, tests)."""

    __slots__ = ("_file", "_memory", "_pending", "_pending_bytes", "content_type", "filename",
                 "size")

    def __init__(self, filename: str, content_type: str) -> None:
        self.filename = filename
        self.content_type = content_type
        self._memory = bytearray()
        self._file: IO[bytes] | None = None
        # chunks on their way to the temp file, written together (no copy into one buffer)
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self.size = 0

    @classmethod
    def from_bytes(cls, filename: str, content_type: str, data: bytes) -> UploadedFile:
        upload = cls(filename, content_type)
        upload._memory += data
        upload.size = len(data)
        return upload

    async def _write(self, data: bytes, directory: Path | None) -> None:
        """Append bytes: to memory while small, then to the temp file."""
        self.size += len(data)
        if self._file is None:
            self._memory += data
            if len(self._memory) <= SPOOL_BYTES:
                return
            self._file = await asyncio.to_thread(_temp_file, directory)
            data = bytes(self._memory)
            self._memory = bytearray()
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= WRITE_BUFFER:
            await self._flush()

    async def _flush(self) -> None:
        if self._file is not None and self._pending:
            pending, self._pending, self._pending_bytes = self._pending, [], 0
            await asyncio.to_thread(_write_out, self._file, pending)

    async def _finish(self) -> None:
        await self._flush()

    def fileno(self) -> int | None:
        """The descriptor of the spooled file; None while the bytes are in memory."""
        return self._file.fileno() if self._file is not None else None

    async def head(self, size: int) -> bytes:
        """The first `size` bytes (to recognize an image)."""
        if self._file is None:
            return bytes(self._memory[:size])
        handle = self._file

        def read() -> bytes:
            handle.seek(0)
            return handle.read(size)

        return await asyncio.to_thread(read)

    async def chunks(self, chunk_size: int = READ_CHUNK) -> AsyncIterator[bytes]:
        """The bytes from the start, a chunk at a time (can be read again)."""
        if self._file is None:
            for start in range(0, len(self._memory), chunk_size):
                yield bytes(self._memory[start:start + chunk_size])
            return
        handle = self._file
        offset = 0
        while True:
            # pread: two readers of one file never move each other's position
            chunk = await asyncio.to_thread(os.pread, handle.fileno(), chunk_size, offset)
            if not chunk:
                return
            offset += len(chunk)
            yield chunk

    async def read(self) -> bytes:
        """All of it (only for what is small by nature, e.g. a data URI decoded in memory)."""
        out = bytearray()
        async for chunk in self.chunks():
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self._memory = bytearray()
        self._pending, self._pending_bytes = [], 0
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.is_instance_schema(cls)

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # a file part of a multipart body, as OpenAPI writes it
        return {"type": "string", "format": "binary"}

    def __repr__(self) -> str:
        return f"UploadedFile({self.filename!r}, {self.content_type!r}, {self.size} bytes)"


def _write_out(file: IO[bytes], pieces: list[bytes]) -> None:
    file.writelines(pieces)
    # through the file object's buffer: the bytes are read back with os.pread
    file.flush()


def _temp_file(directory: Path | None) -> IO[bytes]:
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        tmpfile = getattr(os, "O_TMPFILE", 0)
        if tmpfile:
            # unnamed, and without O_EXCL (which tempfile sets): a local blob store can give
            # it a name instead of copying it (storage.blobs adopt_file)
            with contextlib.suppress(OSError):
                return os.fdopen(os.open(directory, tmpfile | os.O_RDWR, 0o600), "w+b")
    # unnamed on disk (O_TMPFILE where the OS has it, else unlinked at once)
    return tempfile.TemporaryFile(dir=directory)


def clean_header(value: str) -> str:
    if any(ch in _CONTROL for ch in value):
        raise BadRequest("Malformed multipart body: a part header has control characters")
    return value


async def next_part(reader: MultipartReader) -> BodyPartReader | MultipartReader | None:
    try:
        return await reader.next()
    except _MALFORMED as exc:
        raise BadRequest("Malformed multipart body") from exc


async def read_chunk(part: BodyPartReader, size: int = READ_CHUNK) -> bytes:
    try:
        return await part.read_chunk(size)
    except _MALFORMED as exc:
        raise BadRequest("Malformed multipart body") from exc


async def multipart_reader(request: web.Request) -> MultipartReader:
    """The request's multipart reader; a missing or bad boundary is a 400."""
    if not request.content_type.startswith("multipart/") \
            or not _BOUNDARY_RE.search(request.headers.get(hdrs.CONTENT_TYPE, "")):
        raise BadRequest("Malformed multipart body: the Content-Type has no boundary")
    try:
        return await request.multipart()
    except _MALFORMED as exc:
        raise BadRequest("Malformed multipart body") from exc


def upload_dir(request: web.Request) -> Path | None:
    return request.get(UPLOAD_DIR_KEY)


async def read_multipart(request: web.Request) -> list[tuple[str, Any]]:
    """The (name, value) pairs of a multipart body: text fields as str, file parts as
    UploadedFile (spooled; closed when the request ends). The whole body is bounded by the
    app's client_max_size (413 past it)."""
    reader = await multipart_reader(request)
    pairs: list[tuple[str, Any]] = []
    total = 0
    limit = request.client_max_size
    directory = upload_dir(request)
    files = request.setdefault(UPLOADS_KEY, [])
    while (part := await next_part(reader)) is not None:
        if not isinstance(part, BodyPartReader):
            await part.release()
            continue
        name = clean_header(part.name or "")
        filename = part.filename
        ctype = clean_header(part.headers.get(hdrs.CONTENT_TYPE, "application/octet-stream"))
        if filename is not None:
            clean_header(filename)
            upload = UploadedFile(filename, ctype)
            files.append(upload)
            while chunk := await read_chunk(part):
                total += len(chunk)
                if total > limit:
                    raise TooLarge()
                await upload._write(chunk, directory)
            await upload._finish()
            if name:
                pairs.append((name, upload))
            continue
        data = bytearray()
        while chunk := await read_chunk(part):
            total += len(chunk)
            if total > limit:
                raise TooLarge()
            data += chunk
        if not name:
            continue
        try:
            decoded = part.decode(bytes(data))
            text = decoded.decode(part.get_charset(default="utf-8"), errors="replace")
        except (*_MALFORMED, RuntimeError) as exc:
            raise BadRequest("Malformed multipart body") from exc
        pairs.append((name, text))
    return pairs


def close_uploads(request: web.Request) -> None:
    for upload in request.get(UPLOADS_KEY) or ():
        upload.close()


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def uploads_middleware(directory: Path) -> Middleware:
    """Spools the request's files under `directory`, and closes (so deletes) them when the
    request ends, however it ends.

    Not a coroutine: a request without a body (every GET, every 304) can spool nothing, so
    it gets the inner handler's own awaitable back and pays no frame of this layer."""

    async def spooling(request: web.Request, handler: Handler) -> web.StreamResponse:
        request[UPLOAD_DIR_KEY] = directory
        try:
            return await handler(request)
        finally:
            close_uploads(request)

    @web.middleware
    def middleware(request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
        # body_exists is False only when aiohttp gave the request no body stream at all
        # (no Content-Length, no chunked encoding): nothing there to read or spool
        if not request.body_exists:
            return handler(request)
        return spooling(request, handler)

    return middleware


# --- JSON bodies whose attachment is a base64 data URI (incoming webhooks) ----------------------

# The start of a string that is the value of an attachment key: `"attachment": ` or
# `"message[attachment]": ` just before it, in the body read so far.
_ATTACHMENT_KEY = re.compile(rb'"(?:[\w\[\]]*\[)?attachment\]?"\s*:\s*$')
_BASE64_SPACE = b" \t\r\n"
QUOTE, BACKSLASH = ord('"'), ord("\\")
# JSON escapes a base64 payload may carry: an escaped slash, and line breaks (ignored, as
# whitespace is in a data URI)
_BASE64_ESCAPES = {ord("/"): b"/", ord("n"): b"", ord("r"): b"", ord("t"): b""}
_DATA_URI_HEAD = 1024  # a data URI's `data:<type>;base64,` must fit in this


def too_large(max_bytes: int) -> TooLarge:
    size = f"{max_bytes // (1024 * 1024)} MB" if max_bytes >= 1024 * 1024 else f"{max_bytes} bytes"
    return TooLarge(f"The attachment is larger than the limit of {size}")


def data_uri_filename(content_type: str) -> str:
    """The name of the file a base64 data URI of `content_type` becomes: `attachment.<ext>`."""
    return "attachment" + (mimetypes.guess_extension(content_type, strict=False) or "")


class InvalidDataUri:
    """What stands for an attachment data URI whose payload is not base64 (or is empty)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _Base64Spool:
    """Decodes base64 text as it comes, into an UploadedFile (4 characters at a time)."""

    def __init__(self, upload: UploadedFile, directory: Path | None, max_bytes: int) -> None:
        self.upload = upload
        self.directory = directory
        self.max_bytes = max_bytes
        self._rest = b""  # fewer than 4 characters, waiting for the next piece
        self.error: str | None = None
        self._ended = False  # padding seen: nothing may follow

    async def feed(self, text: bytes) -> None:
        if self.error is not None:
            return
        text = self._rest + text.translate(None, _BASE64_SPACE)
        usable = len(text) - len(text) % 4
        self._rest = text[usable:]
        if usable:
            await self._decode(text[:usable])

    async def _decode(self, text: bytes) -> None:
        if self._ended:
            self.error = "is not valid base64"
            return
        try:
            data = binascii.a2b_base64(text, strict_mode=True)
        except binascii.Error:
            self.error = "is not valid base64"
            return
        self._ended = text.endswith(b"=")
        if self.upload.size + len(data) > self.max_bytes:
            raise too_large(self.max_bytes)
        await self.upload._write(data, self.directory)

    async def finish(self) -> UploadedFile | InvalidDataUri:
        if self.error is None and self._rest:
            self.error = "is not valid base64"
        if self.error is None:
            await self.upload._finish()
            if self.upload.size == 0:
                self.error = "is empty"
        if self.error is not None:
            self.upload.close()
            return InvalidDataUri(self.error)
        return self.upload


async def read_json_spooling_data_uris(
    request: web.Request, max_file_bytes: int
) -> dict[str, Any]:
    """The JSON object of the request, with each attachment given as a base64 data URI
    (`"attachment": "data:<type>;base64,..."`) decoded as it arrives into a spooled
    UploadedFile (an InvalidDataUri when it is not base64): the encoded text is never held
    whole, nor the decoded bytes. Everything else is held (up to the app's client_max_size)
    and parsed as usual; a decoded attachment over `max_file_bytes` is a 413."""
    skeleton = bytearray()  # the body with each spooled string replaced by a placeholder
    files: dict[str, UploadedFile | InvalidDataUri] = {}
    directory = upload_dir(request)
    token = os.urandom(8).hex()
    limit = request.client_max_size
    in_string = escaped = False
    string_start = 0  # where the current string starts in `skeleton`
    candidate = False  # the current string is an attachment's value, not yet decided
    spool: _Base64Spool | None = None
    async for chunk in request.content.iter_any():
        pos = 0
        while pos < len(chunk):
            if spool is not None:  # inside a data URI's payload
                if escaped:
                    escaped = False
                    replacement = _BASE64_ESCAPES.get(chunk[pos])
                    if replacement is None:
                        spool.error = "is not valid base64"
                    else:
                        await spool.feed(replacement)
                    pos += 1
                    continue
                stop = _string_stop(chunk, pos)
                end = stop if stop >= 0 else len(chunk)
                await spool.feed(chunk[pos:end])
                pos = end
                if stop < 0:
                    break
                pos += 1
                if chunk[stop] == BACKSLASH:
                    escaped = True
                    continue
                name = f"\0upload:{token}:{len(files)}"
                files[name] = await spool.finish()
                skeleton += orjson.dumps(name)
                spool, in_string = None, False
                continue
            if not in_string:
                quote = chunk.find(b'"', pos)
                end = quote if quote >= 0 else len(chunk)
                skeleton += chunk[pos:end]
                pos = end
                if quote < 0:
                    break
                candidate = _ATTACHMENT_KEY.search(skeleton[-200:]) is not None
                string_start = len(skeleton)
                skeleton += b'"'
                pos += 1
                in_string = True
                continue
            if escaped:
                skeleton.append(chunk[pos])
                pos += 1
                escaped = False
                continue
            stop = _string_stop(chunk, pos)
            end = stop + 1 if stop >= 0 else len(chunk)
            skeleton += chunk[pos:end]
            pos = end
            if stop >= 0:
                if chunk[stop] == BACKSLASH:
                    escaped = True
                else:
                    in_string = False
            if candidate:
                head = bytes(skeleton[string_start + 1:string_start + 1 + _DATA_URI_HEAD])
                spool = _start_data_uri(head, directory, max_file_bytes)
                if spool is not None:
                    # closed when the request ends, however it ends (a 413 halfway)
                    request.setdefault(UPLOADS_KEY, []).append(spool.upload)
                    comma = head.index(b",")
                    payload = bytes(skeleton[string_start + 2 + comma:])
                    del skeleton[string_start:]
                    if stop >= 0 and chunk[stop] == QUOTE:
                        payload = payload[:-1]  # the string ended in this piece
                        in_string = True
                        pos -= 1  # and its closing quote is read again, as the end
                    if escaped:
                        payload = payload[:-1]
                    await spool.feed(payload)
                    candidate = False
                elif len(head) >= _DATA_URI_HEAD or b"," in head or not in_string \
                        or not b"data:".startswith(head[:5]):
                    candidate = False  # not a data URI: an ordinary string
        if len(skeleton) > limit:
            raise TooLarge()
    if spool is not None or in_string:
        raise BadRequest("Body is not valid JSON")
    try:
        data = orjson.loads(skeleton) if skeleton.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise BadRequest("Body is not valid JSON") from exc
    if not isinstance(data, dict):
        raise BadRequest("JSON body must be an object")
    return _put_files(data, files) if files else data


def _string_stop(chunk: bytes, pos: int) -> int:
    """Where the next `"` or `\\` is in chunk from pos (-1: none). Two memchr scans are much
    faster than one regular expression over a 100 MB payload."""
    quote = chunk.find(b'"', pos)
    backslash = chunk.find(b"\\", pos, quote if quote >= 0 else len(chunk))
    return backslash if backslash >= 0 else quote


def _start_data_uri(head: bytes, directory: Path | None,
                    max_bytes: int) -> _Base64Spool | None:
    """A spool for the string starting with `head` when it is a base64 data URI whose header
    is complete (`data:<type>;base64,`); else None."""
    if not head.startswith(b"data:") or b"," not in head:
        return None
    meta = head[5:head.index(b",")]
    try:
        params = [p.strip().lower() for p in meta.decode("ascii").split(";")]
    except UnicodeDecodeError:
        return None
    if "base64" not in params[1:] or any(c in meta for c in b'\\"'):
        return None
    content_type = params[0] or "application/octet-stream"
    return _Base64Spool(UploadedFile(data_uri_filename(content_type), content_type), directory,
                        max_bytes)


def _put_files(value: Any, files: dict[str, UploadedFile | InvalidDataUri]) -> Any:
    if isinstance(value, dict):
        return {k: _put_files(v, files) for k, v in value.items()}
    if isinstance(value, list):
        return [_put_files(v, files) for v in value]
    if isinstance(value, str):
        return files.get(value, value)
    return value
