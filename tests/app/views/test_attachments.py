"""Attachments: upload (streamed, size limit), redirect and content routes, thumbnails, media
files, delete, the user and group lists, claiming by messages, and profile photos, against
both blob stores (local disk and a real S3 server)."""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient
from PIL import Image

from app.actions import attachments as actions
from app.config import S3Settings, Settings
from app.context import Viewer
from app.errors import Forbidden, Invalid, NotFound
from app.images import thumbnail_size
from app.params import UploadedFile
from app.render.attachments import attachment, media_file
from app.resources import BLOBS
from storage import attachments
from storage.blobs import BlobStore, LocalBlobStore, S3BlobStore
from storage.db import transaction
from tests.conftest import QueryLog
from tests.s3_buckets import fresh_bucket
from tests.shapes import MEDIA_FILE_EXTRAS, captured_keys
from tests.support import Member, World

MiB = 1024 * 1024
ATTACHMENT_KEYS = [  # keys.md "Attachment"
    "id", "url", "filename", "public_filename", "external_host_type", "file_extension",
    "content_type", "html_filename",
]
# keys.md "Media file in message.media_files[]", then the interface's extras (decisions.md)
MEDIA_FILE_KEYS = [*captured_keys("Media file in `message.media_files[]`"), *MEDIA_FILE_EXTRAS]
BOTH_STORES = pytest.mark.parametrize("blob_driver", ["local", "s3"])


# --- fixtures: the app on local disk (default) or on S3 ----------------------------------------


@pytest.fixture
def blob_driver() -> str:
    return "local"


@pytest.fixture
def max_upload_bytes() -> int:
    return 100 * MiB


@pytest.fixture
def s3_settings() -> Iterator[S3Settings]:
    with fresh_bucket() as settings:
        yield settings


@pytest.fixture
def settings(
    settings: Settings, blob_driver: str, max_upload_bytes: int, request: pytest.FixtureRequest
) -> Settings:
    s3 = request.getfixturevalue("s3_settings") if blob_driver == "s3" else None
    return replace(settings, s3=s3, max_upload_bytes=max_upload_bytes)


@pytest.fixture
def blobs(client: TestClient) -> BlobStore:
    return client.app[BLOBS]


# --- helpers ---------------------------------------------------------------------------------


def png(width: int, height: int, mode: str = "RGB") -> bytes:
    color: Any = (200, 30, 30, 128) if mode == "RGBA" else (30, 120, 200)
    image = Image.new(mode, (width, height), color)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


async def upload(
    member: Member, data: bytes, filename: str = "photo.png",
    content_type: str = "application/octet-stream", field: str = "attachment",
) -> Any:
    form = aiohttp.FormData()
    form.add_field("note", "ignored")
    form.add_field(field, data, filename=filename, content_type=content_type)
    return await member.api.post("/api/attachments", data=form)


async def uploaded(member: Member, data: bytes, filename: str = "photo.png") -> dict[str, Any]:
    resp = await upload(member, data, filename)
    assert resp.status == 201, resp.text
    result: dict[str, Any] = resp.json["attachment"]
    return result


def path_of(member: Member, url: str) -> str:
    base = f"https://{member.community.domain}"
    assert url.startswith(base), url
    return url[len(base):]


async def fetch(member: Member, path: str, **kwargs: Any) -> tuple[int, bytes, Any]:
    """A GET as member whose body may be binary: (status, bytes, headers)."""
    headers = member.api._headers(None)
    async with member.api.client.get(path, headers=headers, **kwargs) as resp:
        return resp.status, await resp.read(), resp.headers


def size_of(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as image:
        return image.size


async def post_message(
    world: World, author: Member, group_id: int | None, attachment_ids: list[int]
) -> int:
    """A message in a group carrying attachments, claimed as the messages code does."""
    viewer = Viewer(author.id, author.community.id, author.row["role"])
    async with transaction(world.pool) as conn:
        message_id: int = await conn.fetchval(
            "INSERT INTO messages (community_id, user_id, group_id) VALUES ($1, $2, $3) "
            "RETURNING id", author.community.id, author.id, group_id,
        )
        await actions.claim_attachments(conn, viewer, attachment_ids, "message", message_id)
    return message_id


def row_key(row: Any) -> str:
    assert row is not None
    key: str = row["storage_key"]
    return key


async def attachment_count(world: World) -> int:
    count: int = await world.pool.fetchval("SELECT count(*) FROM attachments")
    return count


async def leftovers(blobs: BlobStore) -> list[str]:
    if isinstance(blobs, S3BlobStore):
        return await blobs.pending_uploads()
    assert isinstance(blobs, LocalBlobStore)
    return blobs.temp_files()


# --- upload ----------------------------------------------------------------------------------


@BOTH_STORES
async def test_upload_answers_201_with_the_attachment(
    world: World, blobs: BlobStore, blob_driver: str
) -> None:
    admin = await world.community("Acme")
    bob = await world.user(admin, "Bob")
    data = b"%PDF-1.4 quarterly numbers"
    resp = await upload(bob, data, filename="C:\\Users\\bob\\Q3 report (final).PDF",
                        content_type="application/x-whatever")
    assert resp.status == 201, resp.text
    assert list(resp.json) == ["attachment"]
    att = resp.json["attachment"]
    assert list(att) == ATTACHMENT_KEYS
    base = f"https://{admin.community.domain}"
    aid = att["id"]
    assert att == {
        "id": aid,
        "url": f"{base}/attachments/{aid}",
        "filename": f"{aid}-Q3_report_final_.PDF",
        "public_filename": f"{base}/api/attachments/{aid}/original/{aid}-Q3_report_final_.PDF",
        "external_host_type": None,
        "file_extension": "pdf",
        "content_type": "application/pdf",  # from the extension, not what the client claimed
        "html_filename": f"{aid}-Q3_report_final_.PDF",
    }
    # the bytes are in the blob store, under the community's prefix
    (key,) = await blobs.list_keys(f"c{admin.community.id}/")
    assert await blobs.read(key) == data
    # read back: the content route and the uploader's list
    status, body, headers = await fetch(bob, path_of(bob, att["public_filename"]))
    assert (status, body) == (200, data)
    assert headers["Content-Type"] == "application/pdf"
    assert headers["Content-Disposition"].startswith("attachment; ")
    assert headers["X-Content-Type-Options"] == "nosniff"
    listed = await bob.api.get(f"/api/users/{bob.id}/attachments")
    assert listed.json == {"attachments": [att]}


async def test_upload_names_types_and_escaping(world: World) -> None:
    admin = await world.community()
    image = await uploaded(admin, png(10, 10), filename="no-extension")
    assert image["content_type"] == "image/png"  # what the bytes are
    assert image["file_extension"] == ""
    unknown = await upload(admin, b"\x00\x01", filename="data.qqq", content_type="text/x-mine")
    assert unknown.json["attachment"]["content_type"] == "text/x-mine"
    weird = await upload(admin, b"x", filename="<b>&.txt", content_type="")
    assert weird.json["attachment"]["filename"].endswith("-b_.txt")
    assert weird.json["attachment"]["content_type"] == "text/plain"
    kanji = await uploaded(admin, b"x", filename="報告 書.txt")
    assert kanji["filename"].endswith("-報告_書.txt")
    empty = await uploaded(admin, b"", filename="empty.bin")
    assert empty["content_type"] == "application/octet-stream"


async def test_upload_needs_multipart_and_a_file(world: World) -> None:
    admin = await world.community()
    as_json = await admin.api.post("/api/attachments", json={"attachment": "aGVsbG8="})
    assert as_json.status == 415
    assert as_json.json["code"] == "unsupported_media_type"
    as_form = await admin.api.post("/api/attachments", data={"attachment": "hello"})
    assert as_form.status == 415
    form = aiohttp.FormData()
    form.add_field("attachment", "a text field, not a file")
    form.add_field("other", b"x", filename="x.txt")
    missing = await admin.api.post("/api/attachments", data=form)
    assert missing.status == 422
    assert missing.json["fields"] == {"attachment": ["can't be blank"]}
    anonymous = await admin.api.anonymous().post("/api/attachments", data=form)
    assert anonymous.status == 401
    assert await attachment_count(world) == 0
    # a bracketed field name (Rails-style clients) is accepted
    bracketed = await upload(admin, b"hi", filename="a.txt", field="attachment[file]")
    assert bracketed.status == 201


@BOTH_STORES
async def test_a_large_upload_is_streamed(
    world: World, blobs: BlobStore, blob_driver: str
) -> None:
    admin = await world.community()
    data = os.urandom(17 * MiB + 5)
    att = await uploaded(admin, data, filename="video.mp4")
    assert att["content_type"] == "video/mp4"
    (key,) = await blobs.list_keys()
    if isinstance(blobs, S3BlobStore):  # sent to S3 as a multipart upload of 3 parts
        head = await blobs.client.head_object(Bucket=blobs.bucket, Key=key)
        assert head["ETag"].strip('"').endswith("-3")
        assert head["ContentLength"] == len(data)
    status, body, _ = await fetch(admin, f"/api/attachments/{att['id']}/original/video.mp4")
    assert status == 200
    assert hashlib.sha256(body).digest() == hashlib.sha256(data).digest()
    row = await attachments.by_id(world.pool, admin.community.id, att["id"])
    assert row is not None and row["byte_size"] == len(data)


@BOTH_STORES
@pytest.mark.parametrize("max_upload_bytes", [9 * MiB])
async def test_upload_over_the_limit_is_413_and_stores_nothing(
    world: World, blobs: BlobStore, blob_driver: str, max_upload_bytes: int
) -> None:
    admin = await world.community()
    too_big = await upload(admin, b"x" * (max_upload_bytes + 1), filename="big.bin")
    assert too_big.status == 413
    assert too_big.json["code"] == "too_large"
    assert too_big.json["errors"] == ["The attachment is larger than the limit of 9 MB"]
    assert await attachment_count(world) == 0
    assert await blobs.list_keys() == []
    assert await leftovers(blobs) == []  # the S3 multipart upload was aborted

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length at all
        for _ in range(10):
            yield b"y" * MiB

    form = aiohttp.FormData()
    form.add_field("attachment", chunked(), filename="stream.bin")
    streamed = await admin.api.post("/api/attachments", data=form)
    assert streamed.status == 413
    assert await attachment_count(world) == 0
    assert await blobs.list_keys() == []
    assert await leftovers(blobs) == []

    exactly = await upload(admin, b"z" * max_upload_bytes, filename="fits.bin")
    assert exactly.status == 201
    assert len(await blobs.list_keys()) == 1


@pytest.mark.parametrize("max_upload_bytes", [64 * 1024])
async def test_a_declared_length_far_over_the_limit_is_refused_unread(
    world: World, blobs: BlobStore
) -> None:
    admin = await world.community()
    # not even multipart inside: reading it would be a 400, so a 413 means it was not read
    garbage = b"-" * (2 * MiB)
    resp = await admin.api.post(
        "/api/attachments", data=garbage,
        headers={"Content-Type": "multipart/form-data; boundary=xyz"},
    )
    assert resp.status == 413
    assert resp.json["errors"] == ["The attachment is larger than the limit of 65536 bytes"]
    small_garbage = await admin.api.post(
        "/api/attachments", data=b"-" * 100,
        headers={"Content-Type": "multipart/form-data; boundary=xyz"},
    )
    assert small_garbage.status == 400
    assert await attachment_count(world) == 0
    assert await blobs.list_keys() == []


async def test_other_fields_are_bounded_too(world: World) -> None:
    admin = await world.community()

    async def endless() -> AsyncIterator[bytes]:  # chunked: no Content-Length to refuse early
        for _ in range(3):
            yield b"n" * MiB

    form = aiohttp.FormData()
    form.add_field("note", endless(), content_type="text/plain")
    form.add_field("attachment", b"x", filename="x.txt")
    resp = await admin.api.post("/api/attachments", data=form)
    assert resp.status == 413
    assert await attachment_count(world) == 0


# --- redirect, content, thumbnails, media files ----------------------------------------------


@BOTH_STORES
async def test_show_redirects_to_the_file(
    world: World, blobs: BlobStore, blob_driver: str
) -> None:
    admin = await world.community()
    data = png(800, 600)
    att = await uploaded(admin, data, filename="chart.png")
    resp = await admin.api.get(f"/api/attachments/{att['id']}", allow_redirects=False)
    assert resp.status == 302
    location = resp.headers["Location"]
    assert resp.headers["Cache-Control"] == "private, no-store"
    if blob_driver == "local":
        assert location == att["public_filename"]
        status, body, headers = await fetch(admin, path_of(admin, location))
    else:
        assert isinstance(blobs, S3BlobStore)
        assert location.startswith(f"{blobs.client.meta.endpoint_url}/{blobs.bucket}/")
        async with aiohttp.ClientSession() as http, http.get(location) as got:  # presigned
            status, body, headers = got.status, await got.read(), got.headers
    assert (status, body) == (200, data)
    assert headers["Content-Type"] == "image/png"
    assert headers["Content-Disposition"].startswith("inline; ")  # a safe image shows inline

    thumb = await admin.api.get(f"/api/attachments/{att['id']}.json",
                                params={"thumbnail": "square45"}, allow_redirects=False)
    assert thumb.status == 302
    if blob_driver == "local":
        assert thumb.headers["Location"].endswith(f"/api/attachments/{att['id']}/square45/"
                                                  f"{att['filename']}")
    async with aiohttp.ClientSession() as http:
        if blob_driver == "local":
            status, body, _ = await fetch(admin, path_of(admin, thumb.headers["Location"]))
        else:
            async with http.get(thumb.headers["Location"]) as got:
                status, body = got.status, await got.read()
    assert status == 200 and size_of(body) == (45, 45)

    bad = await admin.api.get(f"/api/attachments/{att['id']}", params={"thumbnail": "huge"},
                              allow_redirects=False)
    assert bad.status == 422
    assert bad.json["fields"] == {
        "thumbnail": ["must be one of original, stream, stream_square, square45, scaled480"]
    }


@BOTH_STORES
async def test_thumbnails_of_a_png(world: World, blobs: BlobStore, blob_driver: str) -> None:
    admin = await world.community()
    att = await uploaded(admin, png(1200, 800), filename="wide.png")
    row = await attachments.by_id(world.pool, admin.community.id, att["id"])
    assert row is not None
    assert (row["width"], row["height"], row["thumbnails"]) == (1200, 800, {})
    expected = {"stream": (600, 400), "stream_square": (140, 140), "square45": (45, 45),
                "scaled480": (480, 320)}
    for name, size in expected.items():
        status, body, headers = await fetch(admin, f"/api/attachments/{att['id']}/{name}/x.png")
        assert status == 200, name
        assert headers["Content-Type"] == "image/jpeg"  # opaque: JPEG thumbnails
        assert headers["Content-Disposition"].startswith(
            f'inline; filename="{att["id"]}-wide_{name}.jpg"'
        )
        assert size_of(body) == size
    # made once (all four on the first request) and kept in the blob store
    row = await attachments.by_id(world.pool, admin.community.id, att["id"])
    assert row is not None
    assert sorted(row["thumbnails"]) == sorted(expected)
    assert {n: (t["width"], t["height"]) for n, t in row["thumbnails"].items()} == expected
    keys = await blobs.list_keys(f"c{admin.community.id}/")
    assert len(keys) == 5
    assert sorted(k.rsplit("/", 1)[1] for k in keys) == [
        "original", "scaled480.jpg", "square45.jpg", "stream.jpg", "stream_square.jpg"
    ]
    # the media file form announces exactly those sizes
    rendered = media_file(row, "https://x")
    assert {n: (m["width"], m["height"]) for n, m in rendered["thumbnail_metadata"].items()} \
        == expected


async def test_thumbnails_keep_transparency_and_never_enlarge(world: World) -> None:
    admin = await world.community()
    att = await uploaded(admin, png(100, 300, "RGBA"), filename="tall.png")
    status, body, headers = await fetch(admin, f"/api/attachments/{att['id']}/stream/tall.png")
    assert status == 200
    assert headers["Content-Type"] == "image/png"
    with Image.open(io.BytesIO(body)) as image:
        assert image.mode == "RGBA" and image.size == (100, 300)  # not enlarged
    status, body, _ = await fetch(admin, f"/api/attachments/{att['id']}/scaled480/tall.png")
    assert size_of(body) == (100, 300)
    status, body, _ = await fetch(admin, f"/api/attachments/{att['id']}/stream_square/tall.png")
    assert size_of(body) == (140, 140)  # squares are always their size


async def test_exif_rotated_photo_reports_its_displayed_size(world: World) -> None:
    admin = await world.community()
    image = Image.new("RGB", (400, 200), (10, 200, 10))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees when displayed
    out = io.BytesIO()
    image.save(out, "JPEG", exif=exif)
    att = await uploaded(admin, out.getvalue(), filename="phone.jpg")
    assert att["content_type"] == "image/jpeg"
    row = await attachments.by_id(world.pool, admin.community.id, att["id"])
    assert row is not None and (row["width"], row["height"]) == (200, 400)
    _, body, _ = await fetch(admin, f"/api/attachments/{att['id']}/scaled480/phone.jpg")
    assert size_of(body) == thumbnail_size("scaled480", 200, 400) == (200, 400)


async def test_a_file_that_is_not_an_image_has_no_thumbnails(world: World) -> None:
    admin = await world.community()
    att = await uploaded(admin, b"just text", filename="notes.txt")
    for name in ("stream", "stream_square", "square45", "scaled480"):
        status, _, _ = await fetch(admin, f"/api/attachments/{att['id']}/{name}/notes.txt")
        assert status == 404
    redirect = await admin.api.get(f"/api/attachments/{att['id']}",
                                   params={"thumbnail": "stream"}, allow_redirects=False)
    assert redirect.status == 404
    status, body, headers = await fetch(admin, f"/api/attachments/{att['id']}/original/n.txt")
    assert (status, body) == (200, b"just text")
    assert headers["Content-Type"].startswith("text/plain")
    assert headers["Content-Disposition"].startswith("attachment; ")  # never inline
    unknown = await fetch(admin, f"/api/attachments/{att['id']}/huge/notes.txt")
    assert unknown[0] == 404
    # a file that only claims to be an image: PNG name and type, bytes that are not
    fake = await upload(admin, b"<script>alert(1)</script>", filename="x.png",
                        content_type="image/png")
    assert fake.json["attachment"]["content_type"] == "image/png"  # by the extension
    status, _, _ = await fetch(admin, f"/api/attachments/{fake.json['attachment']['id']}"
                               "/square45/x.png")
    assert status == 404


async def test_media_files_are_image_attachments(world: World) -> None:
    admin = await world.community()
    image = await uploaded(admin, png(300, 300), filename="pic.png")
    text = await uploaded(admin, b"hello", filename="doc.txt")
    status, body, _ = await fetch(admin, f"/api/media_files/{image['id']}/square45/pic.png")
    assert status == 200 and size_of(body) == (45, 45)
    status, body, _ = await fetch(admin, f"/api/media_files/{image['id']}/original/pic.png")
    assert status == 200 and size_of(body) == (300, 300)
    status, _, _ = await fetch(admin, f"/api/media_files/{text['id']}/original/doc.txt")
    assert status == 404
    status, _, _ = await fetch(admin, "/api/media_files/999999/original/none.png")
    assert status == 404


async def test_render_forms_follow_keys_md(world: World) -> None:
    admin = await world.community()
    att = await uploaded(admin, png(1000, 250), filename="banner.png")
    row = await attachments.by_id(world.pool, admin.community.id, att["id"])
    assert row is not None
    base = f"https://{admin.community.domain}"
    assert attachment(row, base) == att
    form = media_file(row, base)
    assert list(form) == MEDIA_FILE_KEYS
    aid = att["id"]
    assert form == {
        "title": f"{aid}-banner.png",
        "description": None,
        "thumbnails": {
            name: f"{base}/api/media_files/{aid}/{name}/{aid}-banner.png"
            for name in ("stream", "stream_square", "square45", "scaled480")
        },
        "thumbnail_metadata": {
            "stream": {"width": 600, "height": 150},
            "stream_square": {"width": 140, "height": 140},
            "square45": {"width": 45, "height": 45},
            "scaled480": {"width": 480, "height": 120},
        },
        "page_url": None,
        "url": att["public_filename"],
        "content_type": "image/png",
        "attachment_id": aid,
        "external_resource_id": None,
        "id": aid,
        "canonical": False,
        "file_name": f"{aid}-banner.png",
        "width": 1000,
        "height": 250,
    }
    # every URL of the media file answers
    for url in [*form["thumbnails"].values(), form["url"]]:
        status, _, _ = await fetch(admin, path_of(admin, url))
        assert status == 200, url


# --- who may read and delete ------------------------------------------------------------------


async def test_another_communitys_attachment_is_404_everywhere(world: World) -> None:
    acme = await world.community("Acme")
    globex = await world.community("Globex")
    att = await uploaded(acme, png(50, 50))
    group = await world.group(acme, "Acme news")
    await post_message(world, acme, group["id"], [att["id"]])
    aid = att["id"]
    assert (await globex.api.get(f"/api/attachments/{aid}", allow_redirects=False)).status == 404
    for path in (f"/api/attachments/{aid}/original/x.png", f"/api/media_files/{aid}/stream/x"):
        assert (await fetch(globex, path))[0] == 404
    assert (await globex.api.delete(f"/api/attachments/{aid}")).status == 404
    assert (await globex.api.get(f"/api/users/{acme.id}/attachments")).status == 404
    assert (await globex.api.get(f"/api/groups/{group['id']}/attachments")).status == 404
    # still there for its own community
    assert (await fetch(acme, f"/api/attachments/{aid}/original/x.png"))[0] == 200
    assert await attachment_count(world) == 1


async def test_an_unclaimed_upload_is_read_by_its_uploader_only(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    att = await uploaded(bob, b"draft", filename="draft.txt")
    for reader, status in ((bob, 200), (carol, 404), (admin, 404)):
        assert (await fetch(reader, f"/api/attachments/{att['id']}/original/d.txt"))[0] == status
        shown = await reader.api.get(f"/api/attachments/{att['id']}", allow_redirects=False)
        assert shown.status == (302 if status == 200 else 404)
    assert (await carol.api.get(f"/api/users/{bob.id}/attachments")).json == {"attachments": []}
    # someone who cannot read it cannot learn it exists by deleting it
    assert (await carol.api.delete(f"/api/attachments/{att['id']}")).status == 404
    assert await attachment_count(world) == 1


async def test_delete_by_the_uploader_or_an_admin_only(world: World, blobs: BlobStore) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    group = await world.group(bob, "Cats", members=(carol,))
    first = await uploaded(bob, png(200, 100), filename="cat.png")
    second = await uploaded(bob, b"notes", filename="notes.txt")
    await post_message(world, bob, group["id"], [first["id"], second["id"]])
    # make thumbnails, so that there is more than the original to delete
    assert (await fetch(carol, f"/api/attachments/{first['id']}/stream/cat.png"))[0] == 200
    assert len(await blobs.list_keys()) == 6

    forbidden = await carol.api.delete(f"/api/attachments/{first['id']}")
    assert forbidden.status == 403  # Carol reads it, but it is not hers
    assert forbidden.json["code"] == "forbidden"
    assert (await fetch(carol, f"/api/attachments/{first['id']}/original/cat.png"))[0] == 200

    deleted = await bob.api.delete(f"/api/attachments/{first['id']}")
    assert deleted.status == 200
    assert deleted.json == {"attachment": first}
    assert (await fetch(bob, f"/api/attachments/{first['id']}/original/cat.png"))[0] == 404
    assert len(await blobs.list_keys()) == 1  # the original and its thumbnails are gone
    assert (await bob.api.delete(f"/api/attachments/{first['id']}")).status == 404

    by_admin = await admin.api.delete(f"/api/attachments/{second['id']}.json")
    assert by_admin.status == 200 and by_admin.json["attachment"]["id"] == second["id"]
    assert await blobs.list_keys() == []
    assert (await bob.api.get(f"/api/users/{bob.id}/attachments")).json == {"attachments": []}


async def test_message_attachments_are_read_by_the_messages_readers(world: World) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    dave = await world.user(admin, "Dave")
    public = await world.group(bob, "Public")
    private = await world.group(bob, "Secret", members=(carol,), permission_mode="private")
    in_public = await uploaded(bob, b"for everyone", filename="a.txt")
    in_private = await uploaded(bob, b"for members", filename="b.txt")
    company = await uploaded(bob, b"company wide", filename="c.txt")
    await post_message(world, bob, public["id"], [in_public["id"]])
    await post_message(world, bob, private["id"], [in_private["id"]])
    await post_message(world, bob, None, [company["id"]])

    def readable(att: dict[str, Any]) -> str:
        return f"/api/attachments/{att['id']}/original/x.txt"

    for reader, expected in (
        (bob, {in_public["id"], in_private["id"], company["id"]}),
        (carol, {in_public["id"], in_private["id"], company["id"]}),
        (dave, {in_public["id"], company["id"]}),
    ):
        for att in (in_public, in_private, company):
            status = (await fetch(reader, readable(att)))[0]
            assert status == (200 if att["id"] in expected else 404), (reader.username, att)
        listed = await reader.api.get(f"/api/users/{bob.id}/attachments")
        assert {a["id"] for a in listed.json["attachments"]} == expected

    # the group lists
    listed = await dave.api.get(f"/api/groups/{public['id']}/attachments")
    assert listed.status == 200 and listed.json == {"attachments": [in_public]}
    listed = await carol.api.get(f"/api/groups/{private['id']}/attachments")
    assert listed.json == {"attachments": [in_private]}
    assert (await dave.api.get(f"/api/groups/{private['id']}/attachments")).status == 404


async def test_a_private_group_that_takes_requests_lists_no_attachments_to_outsiders(
    world: World,
) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    dave = await world.user(admin, "Dave")
    group = await world.group(bob, "Club", permission_mode="private", allow_access_request=True)
    att = await uploaded(bob, b"members only", filename="m.txt")
    await post_message(world, bob, group["id"], [att["id"]])
    resp = await dave.api.get(f"/api/groups/{group['id']}/attachments")
    assert resp.status == 403  # Dave sees the group (he may ask to join), not its content
    assert (await fetch(dave, f"/api/attachments/{att['id']}/original/m.txt"))[0] == 404
    assert (await bob.api.get(f"/api/groups/{group['id']}/attachments")).json == {
        "attachments": [att]
    }


# --- claiming (for messages, comments, remarks, chat) ------------------------------------------


async def test_claim_attachments_takes_only_the_viewers_unclaimed_uploads(world: World) -> None:
    admin = await world.community()
    other = await world.community("Other")
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    mine = [await uploaded(bob, b"1", "1.txt"), await uploaded(bob, b"2", "2.txt")]
    hers = await uploaded(carol, b"3", "3.txt")
    foreign = await uploaded(other, b"4", "4.txt")
    bob_viewer = Viewer(bob.id, admin.community.id, "member")

    for bad in ([hers["id"]], [foreign["id"]], [999_999], [mine[0]["id"], hers["id"]]):
        with pytest.raises(Invalid) as caught:
            async with transaction(world.pool) as conn:
                await actions.claim_attachments(conn, bob_viewer, bad, "remark", 1)
        assert caught.value.fields == {"attachment_ids": [actions.CLAIM_PROBLEM]}
    # nothing was claimed by the failed attempts (their transactions rolled back)
    assert await world.pool.fetchval(
        "SELECT count(*) FROM attachments WHERE subject_type IS NOT NULL") == 0

    async with transaction(world.pool) as conn:
        rows = await actions.claim_attachments(
            conn, bob_viewer, [mine[1]["id"], mine[0]["id"], mine[1]["id"]], "remark", 7
        )
    assert [r["id"] for r in rows] == [mine[1]["id"], mine[0]["id"]]  # in the order asked
    assert {(r["subject_type"], r["subject_id"]) for r in rows} == {("remark", 7)}
    async with transaction(world.pool) as conn:
        assert await actions.claim_attachments(conn, bob_viewer, [], "remark", 8) == []
        with pytest.raises(Invalid):  # already claimed
            await actions.claim_attachments(conn, bob_viewer, [mine[0]["id"]], "remark", 8)
    # the storage function raises nothing: the caller compares the count
    claimed = await attachments.claim(
        world.pool, admin.community.id, bob.id, [mine[0]["id"], hers["id"]], "comment", 3
    )
    assert claimed == []
    # a remark has no reading rule yet: its attachments are read by their uploader only
    assert (await fetch(bob, f"/api/attachments/{mine[0]['id']}/original/1.txt"))[0] == 200
    assert (await fetch(carol, f"/api/attachments/{mine[0]['id']}/original/1.txt"))[0] == 404


async def test_for_subjects_groups_attachments_in_one_query(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()
    a = [await uploaded(admin, png(20, 10), f"{n}.png") for n in range(3)]
    first = await post_message(world, admin, None, [a[0]["id"], a[2]["id"]])
    second = await post_message(world, admin, None, [a[1]["id"]])
    query_log.reset()
    grouped = await attachments.for_subjects(world.pool, "message", [first, second, 424242])
    await asyncio.sleep(0)  # asyncpg reports the query in the next turn of the loop
    statements = [q for q in query_log if "pg_advisory_unlock_all" not in q]  # pool resets
    assert len(statements) == 1, statements
    assert {k: [r["id"] for r in v] for k, v in grouped.items()} == {
        first: [a[0]["id"], a[2]["id"]], second: [a[1]["id"]]
    }
    assert await attachments.for_subjects(world.pool, "message", []) == {}


async def test_store_file_makes_an_unclaimed_attachment(world: World, blobs: BlobStore) -> None:
    admin = await world.community()
    viewer = Viewer(admin.id, admin.community.id, "tenant_admin")
    row = await actions.store_file(
        world.pool, blobs, viewer, UploadedFile.from_bytes("my pic.png", "image/png", png(64, 32))
    )
    assert (row["filename"], row["content_type"], row["width"], row["height"]) == (
        "my_pic.png", "image/png", 64, 32
    )
    assert row["subject_type"] is None and row["uploader_id"] == admin.id
    assert await blobs.read(row["storage_key"]) == png(64, 32)


async def test_prune_unclaimed_deletes_abandoned_uploads(world: World, blobs: BlobStore) -> None:
    admin = await world.community()
    old = await uploaded(admin, b"abandoned", "old.txt")
    old_but_posted = await uploaded(admin, b"posted", "posted.txt")
    fresh = await uploaded(admin, b"being written", "fresh.txt")
    await post_message(world, admin, None, [old_but_posted["id"]])
    await world.pool.execute(
        "UPDATE attachments SET created_at = now() - interval '3 days' WHERE id = ANY($1)",
        [old["id"], old_but_posted["id"]],
    )
    assert len(await blobs.list_keys()) == 3
    assert await actions.prune_unclaimed(world.pool, blobs) == 1
    remaining = await world.pool.fetch("SELECT id FROM attachments ORDER BY id")
    assert [r["id"] for r in remaining] == [old_but_posted["id"], fresh["id"]]
    assert len(await blobs.list_keys()) == 2
    assert await actions.prune_unclaimed(world.pool, blobs) == 0


# --- profile photos ----------------------------------------------------------------------------


async def test_store_avatar_sets_and_replaces_the_profile_photo(
    world: World, blobs: BlobStore
) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    bob_viewer = Viewer(bob.id, admin.community.id, "member")
    photo = UploadedFile.from_bytes("me.png", "image/png", png(300, 200))
    first = await actions.store_avatar(world.pool, blobs, bob_viewer, bob.id, photo)

    shown = (await carol.api.get(f"/api/users/{bob.id}")).json["user"]
    assert shown["avatars"]["id"] == first
    assert shown["avatars"]["is_system_default"] is False
    for size, expected in (("square45", (45, 45)), ("square140", (140, 140))):
        status, body, _ = await fetch(carol, path_of(carol, shown["avatars"][size]))
        assert status == 200 and size_of(body) == expected  # everyone reads an avatar
    # not Carol's to delete; Bob's own list shows it
    assert (await carol.api.delete(f"/api/attachments/{first}")).status == 403
    listed = await bob.api.get(f"/api/users/{bob.id}/attachments")
    assert [a["id"] for a in listed.json["attachments"]] == [first]

    # an admin replaces it: the old one is gone, blobs included
    admin_viewer = Viewer(admin.id, admin.community.id, "tenant_admin")
    second = await actions.store_avatar(world.pool, blobs, admin_viewer, bob.id, photo)
    assert second != first
    assert (await carol.api.get(f"/api/users/{bob.id}")).json["user"]["avatars"]["id"] == second
    assert await attachments.by_id(world.pool, admin.community.id, first) is None
    # the first one's original and four thumbnails are gone; the new one has its original
    assert await blobs.list_keys() == [row_key(await attachments.by_id(
        world.pool, admin.community.id, second))]


async def test_store_avatar_refuses_others_and_non_images(world: World, blobs: BlobStore) -> None:
    admin = await world.community()
    other = await world.community("Other")
    bob = await world.user(admin, "Bob")
    carol = await world.user(admin, "Carol")
    carol_viewer = Viewer(carol.id, admin.community.id, "member")
    photo = UploadedFile.from_bytes("me.png", "image/png", png(10, 10))
    with pytest.raises(Forbidden):
        await actions.store_avatar(world.pool, blobs, carol_viewer, bob.id, photo)
    with pytest.raises(Invalid) as caught:
        await actions.store_avatar(world.pool, blobs, carol_viewer, carol.id,
                                   UploadedFile.from_bytes("me.png", "image/png", b"not an image"))
    assert list(caught.value.fields or {}) == ["user[profile_photo][data]"]
    other_admin = Viewer(other.id, other.community.id, "tenant_admin")
    with pytest.raises(NotFound):  # another community's user
        await actions.store_avatar(world.pool, blobs, other_admin, bob.id, photo)
    assert await blobs.list_keys() == [] and await attachment_count(world) == 0


async def test_deleting_an_avatar_resets_the_profile_photo(world: World, blobs: BlobStore) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    viewer = Viewer(bob.id, admin.community.id, "member")
    avatar_id = await actions.store_avatar(
        world.pool, blobs, viewer, bob.id,
        UploadedFile.from_bytes("me.png", "image/png", png(50, 50)),
    )
    assert (await bob.api.delete(f"/api/attachments/{avatar_id}")).status == 200
    avatars = (await bob.api.get(f"/api/users/{bob.id}")).json["user"]["avatars"]
    assert avatars["is_system_default"] is True and avatars["id"] is None


# --- lists -------------------------------------------------------------------------------------


async def _many_attachments(world: World, member: Member, count: int) -> list[int]:
    async with transaction(world.pool) as conn:
        return [
            (await attachments.insert(
                conn, member.community.id, member.id, filename=f"f{n}.txt",
                content_type="text/plain", byte_size=1, storage_key=f"test/{member.id}/{n}",
            ))["id"]
            for n in range(count)
        ]


async def test_user_attachments_list_pages_in_fixed_queries(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    ids = await _many_attachments(world, bob, 30)
    public = await world.group(bob, "Public")
    viewer = Viewer(bob.id, admin.community.id, "member")
    async with transaction(world.pool) as conn:  # half of them posted in a public group
        for aid in ids[:15]:
            message_id = await conn.fetchval(
                "INSERT INTO messages (community_id, user_id, group_id) VALUES ($1, $2, $3) "
                "RETURNING id", admin.community.id, bob.id, public["id"],
            )
            await actions.claim_attachments(conn, viewer, [aid], "message", message_id)
    counts = {}
    for per_page in (1, 500):
        query_log.reset()
        resp = await admin.api.get(f"/api/users/{bob.id}/attachments",
                                   params={"per_page": str(per_page)})
        assert resp.status == 200
        assert len(resp.json["attachments"]) == min(per_page, 15)  # the admin reads 15
        counts[per_page] = len(query_log)
    assert counts[1] == counts[500], counts
    newest_first = [a["id"] for a in resp.json["attachments"]]
    assert newest_first == sorted(ids[:15], reverse=True)
    page2 = await admin.api.get(f"/api/users/{bob.id}/attachments",
                                params={"per_page": "10", "page": "2"})
    assert [a["id"] for a in page2.json["attachments"]] == newest_first[10:]
    mine = await bob.api.get(f"/api/users/{bob.id}/attachments", params={"per_page": "500"})
    assert len(mine.json["attachments"]) == 30
    assert (await bob.api.get("/api/users/999999/attachments")).status == 404
    assert (await bob.api.get(f"/api/users/{bob.id}/attachments",
                              params={"per_page": "0"})).status == 400


async def test_group_attachments_list_pages_in_fixed_queries(
    world: World, query_log: QueryLog
) -> None:
    admin = await world.community()
    bob = await world.user(admin, "Bob")
    group = await world.group(bob, "Photos")
    elsewhere = await world.group(bob, "Elsewhere")
    ids = await _many_attachments(world, bob, 25)
    for aid in ids[:20]:
        await post_message(world, bob, group["id"], [aid])
    await post_message(world, bob, elsewhere["id"], ids[20:])
    counts = {}
    for per_page in (1, 500):
        query_log.reset()
        resp = await admin.api.get(f"/api/groups/{group['id']}/attachments",
                                   params={"per_page": str(per_page)})
        assert resp.status == 200
        assert len(resp.json["attachments"]) == min(per_page, 20)
        counts[per_page] = len(query_log)
    assert counts[1] == counts[500], counts
    assert [a["id"] for a in resp.json["attachments"]] == sorted(ids[:20], reverse=True)
    assert (await bob.api.get("/api/groups/999999/attachments")).status == 404
