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
import contextlib
import os
import re
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import IO, Any

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
            await asyncio.to_thread(self._file.writelines, pending)

    async def _finish(self) -> None:
        await self._flush()

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


def _temp_file(directory: Path | None) -> IO[bytes]:
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
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
    request ends, however it ends."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        request[UPLOAD_DIR_KEY] = directory
        try:
            return await handler(request)
        finally:
            close_uploads(request)

    return middleware
