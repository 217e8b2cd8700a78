"""Blob storage: the bytes of attachments and their thumbnails, on S3 or on local disk.

`open_blob_store(s3, data_dir)` gives an S3BlobStore when S3 settings are given, else a
LocalBlobStore under `<data_dir>/blobs`. Both stream in both directions:

- `put_stream` writes an upload as it arrives. S3 sends it as a multipart upload of PART_SIZE
  parts (one PUT when it is smaller than one part), so at most about one part is held in
  memory; the local driver writes a temp file in `<root>/.tmp` and renames it into place. When
  the upload fails or goes over `max_bytes` (BlobTooLarge), nothing is left behind: the
  multipart upload is aborted, the temp file removed. When S3 itself is away (BlobUnavailable,
  503 to the client) the abort is retried in the background until S3 answers again.
- `open` yields the size and an async iterator of chunks; `read` reads a (bounded) blob whole.
- `download_url` is a presigned GET URL on S3 (content type and disposition baked in), and None
  on local disk, where the application serves the bytes itself.

Keys are `/`-separated segments of `[A-Za-z0-9._-]` (never `.` or `..`); objects are private.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol
from urllib.parse import quote

PART_SIZE = 8 * 1024 * 1024  # S3 multipart part (the minimum is 5 MiB)
CHUNK_SIZE = 256 * 1024  # read size when streaming a blob out
LOCAL_WRITE_BUFFER = 1024 * 1024  # bytes gathered before one (threaded) file write
PRESIGN_SECONDS = 300
DEFAULT_CONTENT_TYPE = "application/octet-stream"
STALE_TEMP_SECONDS = 24 * 3600
ABORT_RETRY_SECONDS = 3600.0  # how long an abort of a failed multipart upload is retried

log = logging.getLogger(__name__)

_KEY_RE = re.compile(r"^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*$")


class BlobError(Exception):
    pass


class BlobNotFound(BlobError):
    pass


class BlobUnavailable(BlobError):
    """The blob store cannot be reached (S3 down, refusing, timing out or failing with 5xx)."""


class BlobTooLarge(BlobError):
    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"blob is larger than {max_bytes} bytes")
        self.max_bytes = max_bytes


@dataclass(frozen=True)
class BlobReader:
    size: int
    chunks: AsyncIterator[bytes]


class BlobStore(Protocol):
    async def put_stream(
        self,
        key: str,
        chunks: AsyncIterable[bytes],
        *,
        content_type: str = DEFAULT_CONTENT_TYPE,
        max_bytes: int | None = None,
    ) -> int:
        """Store the chunks under key; their total size. Over max_bytes: BlobTooLarge and
        nothing stored."""
        ...

    async def put_bytes(
        self, key: str, data: bytes, *, content_type: str = DEFAULT_CONTENT_TYPE
    ) -> None: ...

    async def adopt_file(self, key: str, fd: int) -> int | None:
        """Store the bytes of the open, unnamed file `fd` under key without copying them,
        when this store can (a local store on the file system of the file): their size. None
        when it cannot: the caller streams them instead."""
        ...

    def open(self, key: str) -> AbstractAsyncContextManager[BlobReader]:
        """`async with store.open(key) as blob:` blob.size, `async for c in blob.chunks`.
        BlobNotFound when there is no such blob."""
        ...

    async def read(self, key: str, *, max_bytes: int | None = None) -> bytes:
        """The whole blob (BlobTooLarge past max_bytes, BlobNotFound when absent)."""
        ...

    async def delete(self, keys: Iterable[str]) -> None:
        """Remove blobs; absent ones are ignored."""
        ...

    async def list_keys(self, prefix: str = "") -> list[str]:
        """Keys starting with prefix, sorted."""
        ...

    async def download_url(
        self,
        key: str,
        *,
        filename: str,
        content_type: str,
        inline: bool,
        expires_in: int = PRESIGN_SECONDS,
    ) -> str | None:
        """A URL a client may GET the bytes from without credentials (presigned), or None when
        the store cannot make one (local disk: the application serves the bytes)."""
        ...


def check_key(key: str) -> str:
    if not _KEY_RE.match(key) or any(seg in (".", "..") for seg in key.split("/")):
        raise ValueError(f"invalid blob key {key!r}")
    return key


def content_disposition(filename: str, *, inline: bool) -> str:
    """`inline|attachment; filename="<ascii>"; filename*=UTF-8''<utf-8>` (RFC 6266)."""
    kind = "inline" if inline else "attachment"
    ascii_name = "".join(
        ch if 32 <= ord(ch) < 127 and ch not in '"\\' else "_" for ch in filename
    ) or "file"
    return f"{kind}; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(filename, safe='')}"


async def _limited(chunks: AsyncIterable[bytes], max_bytes: int | None) -> AsyncIterator[bytes]:
    total = 0
    async for chunk in chunks:
        if not chunk:
            continue
        total += len(chunk)
        if max_bytes is not None and total > max_bytes:
            raise BlobTooLarge(max_bytes)
        yield chunk


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


# --- local disk ------------------------------------------------------------------------------


class LocalBlobStore:
    """Files under `root` (`<data_dir>/blobs`): `root/<key>`, written via `root/.tmp`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tmp = root / ".tmp"

    def path_of(self, key: str) -> Path:
        return self.root / check_key(key)

    async def put_stream(
        self,
        key: str,
        chunks: AsyncIterable[bytes],
        *,
        content_type: str = DEFAULT_CONTENT_TYPE,
        max_bytes: int | None = None,
    ) -> int:
        final = self.path_of(key)
        await asyncio.to_thread(self.tmp.mkdir, parents=True, exist_ok=True)
        temp = self.tmp / f"{uuid.uuid4().hex}.part"
        handle: BinaryIO = await asyncio.to_thread(open, temp, "wb")
        total = 0
        try:
            buffer = bytearray()
            async for chunk in _limited(chunks, max_bytes):
                buffer += chunk
                total += len(chunk)
                if len(buffer) >= LOCAL_WRITE_BUFFER:
                    await asyncio.to_thread(handle.write, bytes(buffer))
                    buffer.clear()
            if buffer:
                await asyncio.to_thread(handle.write, bytes(buffer))
            await asyncio.to_thread(_flush_and_close, handle)
            await asyncio.to_thread(_move_into_place, temp, final)
        except BaseException:
            await asyncio.to_thread(_discard, handle, temp)
            raise
        return total

    async def put_bytes(
        self, key: str, data: bytes, *, content_type: str = DEFAULT_CONTENT_TYPE
    ) -> None:
        await self.put_stream(key, _one(data), content_type=content_type)

    async def adopt_file(self, key: str, fd: int) -> int | None:
        final = self.path_of(key)

        def adopt() -> int | None:
            self.tmp.mkdir(parents=True, exist_ok=True)
            temp = self.tmp / f"{uuid.uuid4().hex}.part"
            try:
                os.fsync(fd)
                # a name for an O_TMPFILE file (opened without O_EXCL): no byte is copied.
                # With a dir_fd, os.link calls linkat(AT_SYMLINK_FOLLOW), which follows the
                # /proc link to the file; plain link() would try to link the /proc entry itself.
                directory = os.open(self.tmp, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.link(f"/proc/self/fd/{fd}", temp.name, dst_dir_fd=directory,
                            follow_symlinks=True)
                finally:
                    os.close(directory)
            except OSError:  # another file system, no /proc, a file that cannot be linked
                return None
            try:
                size = temp.stat().st_size
                _move_into_place(temp, final)
            except BaseException:
                temp.unlink(missing_ok=True)
                raise
            return size

        return await asyncio.to_thread(adopt)

    @asynccontextmanager
    async def open(self, key: str) -> AsyncIterator[BlobReader]:
        path = self.path_of(key)
        try:
            handle: BinaryIO = await asyncio.to_thread(open, path, "rb")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise BlobNotFound(key) from None
        try:
            size = (await asyncio.to_thread(os.fstat, handle.fileno())).st_size
            yield BlobReader(size=size, chunks=_file_chunks(handle))
        finally:
            await asyncio.to_thread(handle.close)

    async def read(self, key: str, *, max_bytes: int | None = None) -> bytes:
        async with self.open(key) as blob:
            if max_bytes is not None and blob.size > max_bytes:
                raise BlobTooLarge(max_bytes)
            return b"".join([chunk async for chunk in blob.chunks])

    async def delete(self, keys: Iterable[str]) -> None:
        paths = [self.path_of(key) for key in keys]
        if paths:
            await asyncio.to_thread(_unlink_all, paths)

    async def list_keys(self, prefix: str = "") -> list[str]:
        return await asyncio.to_thread(self._list, prefix)

    def _list(self, prefix: str) -> list[str]:
        if not self.root.is_dir():
            return []
        out = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            if Path(dirpath) == self.root and ".tmp" in dirnames:
                dirnames.remove(".tmp")
            for name in filenames:
                key = Path(dirpath, name).relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    out.append(key)
        return sorted(out)

    def remove_stale_temp_files(self, older_than: float = STALE_TEMP_SECONDS) -> None:
        """Unfinished uploads of a crashed run (another process may be writing newer ones)."""
        if not self.tmp.is_dir():
            return
        limit = time.time() - older_than
        for path in self.tmp.iterdir():
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < limit:
                    path.unlink()

    def temp_files(self) -> list[str]:
        """Names of unfinished uploads (tests check that a failed upload left none)."""
        return sorted(p.name for p in self.tmp.iterdir()) if self.tmp.is_dir() else []

    async def download_url(
        self,
        key: str,
        *,
        filename: str,
        content_type: str,
        inline: bool,
        expires_in: int = PRESIGN_SECONDS,
    ) -> str | None:
        return None


async def _file_chunks(handle: BinaryIO) -> AsyncIterator[bytes]:
    while True:
        chunk = await asyncio.to_thread(handle.read, CHUNK_SIZE)
        if not chunk:
            return
        yield chunk


def _flush_and_close(handle: BinaryIO) -> None:
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()


def _move_into_place(temp: Path, final: Path) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(temp, final)


def _discard(handle: BinaryIO, temp: Path) -> None:
    with contextlib.suppress(OSError):
        handle.close()
    temp.unlink(missing_ok=True)


def _unlink_all(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, NotADirectoryError):
            path.unlink()


# --- S3 --------------------------------------------------------------------------------------


class S3BlobStore:
    """Objects in one bucket, through an aiobotocore client (owned by open_blob_store)."""

    def __init__(
        self, client: Any, bucket: str, part_size: int = PART_SIZE,
        abort_retry_seconds: float = ABORT_RETRY_SECONDS,
    ) -> None:
        if part_size < 5 * 1024 * 1024:
            raise ValueError("S3 multipart parts must be at least 5 MiB")
        self.client = client
        self.bucket = bucket
        self.part_size = part_size
        self.abort_retry_seconds = abort_retry_seconds
        self._aborts: set[asyncio.Task[None]] = set()

    async def put_stream(
        self,
        key: str,
        chunks: AsyncIterable[bytes],
        *,
        content_type: str = DEFAULT_CONTENT_TYPE,
        max_bytes: int | None = None,
    ) -> int:
        check_key(key)
        buffer = bytearray()
        total = 0
        upload_id: str | None = None
        parts: list[dict[str, Any]] = []
        try:
            async for chunk in _limited(chunks, max_bytes):
                buffer += chunk
                total += len(chunk)
                while len(buffer) >= self.part_size:
                    if upload_id is None:
                        with _s3_call():
                            created = await self.client.create_multipart_upload(
                                Bucket=self.bucket, Key=key, ContentType=content_type
                            )
                        upload_id = created["UploadId"]
                    body = bytes(buffer[: self.part_size])
                    del buffer[: self.part_size]
                    parts.append(await self._upload_part(key, upload_id, len(parts) + 1, body))
            if upload_id is None:
                with _s3_call():
                    await self.client.put_object(
                        Bucket=self.bucket, Key=key, Body=bytes(buffer),
                        ContentType=content_type,
                    )
                return total
            if buffer:
                parts.append(await self._upload_part(key, upload_id, len(parts) + 1,
                                                     bytes(buffer)))
                buffer.clear()
            with _s3_call():
                await self.client.complete_multipart_upload(
                    Bucket=self.bucket, Key=key, UploadId=upload_id,
                    MultipartUpload={"Parts": parts},
                )
        except BaseException:
            if upload_id is not None:
                try:
                    await asyncio.shield(self.client.abort_multipart_upload(
                        Bucket=self.bucket, Key=key, UploadId=upload_id
                    ))
                except Exception:
                    # S3 is away: its parts would stay (and be billed) forever; keep trying
                    self._abort_later(key, upload_id)
            raise
        return total

    def _abort_later(self, key: str, upload_id: str) -> None:
        task = asyncio.get_running_loop().create_task(self._abort_until_done(key, upload_id))
        self._aborts.add(task)
        task.add_done_callback(self._aborts.discard)

    async def _abort_until_done(self, key: str, upload_id: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.abort_retry_seconds
        delay = 0.5
        while True:
            await asyncio.sleep(delay)
            try:
                await self.client.abort_multipart_upload(
                    Bucket=self.bucket, Key=key, UploadId=upload_id
                )
                return
            except Exception as exc:
                if not _s3_unreachable(exc):
                    return  # answered (e.g. NoSuchUpload): nothing is left to abort
                if loop.time() >= deadline:
                    log.warning("gave up aborting the S3 multipart upload of %s: %r", key, exc)
                    return
            delay = min(delay * 2, 30.0)

    async def close(self) -> None:
        """Stop retrying aborts (the process is ending)."""
        for task in list(self._aborts):
            task.cancel()
        await asyncio.gather(*self._aborts, return_exceptions=True)

    async def wait_for_aborts(self) -> None:
        """Tests: wait until the background aborts have finished."""
        await asyncio.gather(*self._aborts, return_exceptions=True)

    async def _upload_part(
        self, key: str, upload_id: str, number: int, body: bytes
    ) -> dict[str, Any]:
        with _s3_call():
            part = await self.client.upload_part(
                Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body
            )
        return {"ETag": part["ETag"], "PartNumber": number}

    async def put_bytes(
        self, key: str, data: bytes, *, content_type: str = DEFAULT_CONTENT_TYPE
    ) -> None:
        with _s3_call():
            await self.client.put_object(
                Bucket=self.bucket, Key=check_key(key), Body=data, ContentType=content_type
            )

    async def adopt_file(self, key: str, fd: int) -> int | None:
        return None  # the bytes have to travel: put_stream

    @asynccontextmanager
    async def open(self, key: str) -> AsyncIterator[BlobReader]:
        try:
            got = await self.client.get_object(Bucket=self.bucket, Key=check_key(key))
        except self.client.exceptions.NoSuchKey:
            raise BlobNotFound(key) from None
        except Exception as exc:
            if _s3_unreachable(exc):
                raise BlobUnavailable(f"S3 is unreachable: {exc!r}") from exc
            raise
        body = got["Body"]
        try:
            yield BlobReader(size=int(got["ContentLength"]), chunks=_body_chunks(body))
        finally:
            body.close()

    async def read(self, key: str, *, max_bytes: int | None = None) -> bytes:
        async with self.open(key) as blob:
            if max_bytes is not None and blob.size > max_bytes:
                raise BlobTooLarge(max_bytes)
            return b"".join([chunk async for chunk in blob.chunks])

    async def delete(self, keys: Iterable[str]) -> None:
        names = [check_key(key) for key in keys]
        for start in range(0, len(names), 1000):
            batch = names[start : start + 1000]
            await self.client.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
            )

    async def list_keys(self, prefix: str = "") -> list[str]:
        paginator = self.client.get_paginator("list_objects_v2")
        out: list[str] = []
        async for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            out.extend(item["Key"] for item in page.get("Contents", ()))
        return sorted(out)

    async def pending_uploads(self, prefix: str = "") -> list[str]:
        """Keys of multipart uploads begun and neither completed nor aborted."""
        got = await self.client.list_multipart_uploads(Bucket=self.bucket, Prefix=prefix)
        return sorted(u["Key"] for u in got.get("Uploads", ()))

    async def download_url(
        self,
        key: str,
        *,
        filename: str,
        content_type: str,
        inline: bool,
        expires_in: int = PRESIGN_SECONDS,
    ) -> str | None:
        url: str = await self.client.generate_presigned_url(
            "get_object",
            Params={
                "Bucket": self.bucket,
                "Key": check_key(key),
                "ResponseContentType": content_type,
                "ResponseContentDisposition": content_disposition(filename, inline=inline),
            },
            ExpiresIn=expires_in,
        )
        return url


@contextlib.contextmanager
def _s3_call() -> Iterator[None]:
    """Around one S3 request: S3 being away becomes BlobUnavailable (503 to the client); an
    error of the data being sent (the client went away) stays what it is."""
    try:
        yield
    except Exception as exc:
        if _s3_unreachable(exc):
            raise BlobUnavailable(f"S3 is unreachable: {exc!r}") from exc
        raise


def _s3_unreachable(exc: BaseException) -> bool:
    """S3 is away (connection refused, reset or timed out, or an error of S3 itself), as
    opposed to an answer about the request (no such key, access denied)."""
    import aiohttp
    import botocore.exceptions

    if isinstance(exc, botocore.exceptions.ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return int(status) >= 500
    return isinstance(exc, (
        botocore.exceptions.HTTPClientError,  # connect/read timeouts, connection errors
        botocore.exceptions.EndpointConnectionError,
        aiohttp.ClientError,
        OSError,
        TimeoutError,
    ))


async def _body_chunks(body: Any) -> AsyncIterator[bytes]:
    while True:
        chunk: bytes = await body.read(CHUNK_SIZE)
        if not chunk:
            return
        yield chunk


# --- choosing a driver -----------------------------------------------------------------------


class S3Options(Protocol):
    """What the S3 driver needs (app.config.S3Settings has these)."""

    @property
    def endpoint_url(self) -> str | None: ...
    @property
    def bucket(self) -> str: ...
    @property
    def access_key_id(self) -> str | None: ...
    @property
    def secret_access_key(self) -> str | None: ...
    @property
    def region(self) -> str: ...


@asynccontextmanager
async def open_s3_client(
    s3: S3Options, *, connect_timeout: float = 10, read_timeout: float = 60, attempts: int = 3
) -> AsyncIterator[Any]:
    """An aiobotocore S3 client; the start-up check (app/checks.py) asks for short timeouts
    and a single attempt."""
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    config = AioConfig(
        signature_version="s3v4",
        s3={"addressing_style": "path" if s3.endpoint_url else "auto"},
        retries={"max_attempts": attempts, "mode": "standard"},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
    )
    async with get_session().create_client(
        "s3",
        endpoint_url=s3.endpoint_url,
        region_name=s3.region,
        aws_access_key_id=s3.access_key_id,
        aws_secret_access_key=s3.secret_access_key,
        config=config,
    ) as client:
        yield client


@asynccontextmanager
async def open_blob_store(s3: S3Options | None, data_dir: Path) -> AsyncIterator[BlobStore]:
    """S3 when settings are given, else local disk under `<data_dir>/blobs`."""
    if s3 is None:
        store = LocalBlobStore(Path(data_dir) / "blobs")
        await asyncio.to_thread(store.remove_stale_temp_files)
        yield store
        return
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(open_s3_client(s3))
        s3_store = S3BlobStore(client, s3.bucket)
        try:
            yield s3_store
        finally:
            await s3_store.close()
