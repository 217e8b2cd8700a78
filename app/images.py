"""Images: recognizing an uploaded image and making its thumbnails (Pillow, no I/O).

The functions are synchronous and CPU-bound: callers run `make_thumbnails` with
`asyncio.to_thread`. `sniff` reads only an image's header and is cheap.

Thumbnails (names as the interface lists them; sizes as decided for Commons):
- stream: at most 600 px wide, aspect kept, never enlarged
- stream_square: 140 x 140, centre crop (avatars' square70 and square140 use it)
- square45: 45 x 45, centre crop (avatars' square16, square30 and square45)
- scaled480: fits in 480 x 480, aspect kept, never enlarged

Their sizes follow from the original's width and height alone (`thumbnail_size`), so a
renderer can print `thumbnail_metadata` before any thumbnail exists. Images with an alpha
channel become PNG thumbnails, the others JPEG.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from PIL import Image, ImageOps, UnidentifiedImageError

THUMBNAILS = ("stream", "stream_square", "square45", "scaled480")
VARIANTS = ("original", *THUMBNAILS)

# Formats recognized as images (Pillow opens nothing else) and the MIME type of each.
FORMATS = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "WEBP": "image/webp",
    "BMP": "image/bmp",
    "TIFF": "image/tiff",
}
# Types a browser may show inline from our origin (never SVG or HTML: scripts).
INLINE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# Larger images are stored and served, but get no thumbnails (decompression bombs).
MAX_PIXELS = 50_000_000
MAX_SIDE = 30_000
# How much of the start of a file `sniff` needs to read an image header.
SNIFF_BYTES = 1024 * 1024
# Exif orientations that swap width and height.
_TRANSPOSED = {5, 6, 7, 8}


class ThumbnailError(Exception):
    pass


@dataclass(frozen=True)
class ImageInfo:
    content_type: str
    width: int  # as displayed (after the Exif orientation)
    height: int

    @property
    def thumbnailable(self) -> bool:
        return (
            0 < self.width <= MAX_SIDE and 0 < self.height <= MAX_SIDE
            and self.width * self.height <= MAX_PIXELS
        )


@dataclass(frozen=True)
class Thumbnail:
    name: str
    data: bytes
    content_type: str
    width: int
    height: int


def sniff(head: bytes) -> ImageInfo | None:
    """The image type and displayed size from the first bytes of a file, or None."""
    try:
        with Image.open(io.BytesIO(head), formats=list(FORMATS)) as image:
            fmt = image.format or ""
            width, height = image.size
            try:
                orientation = image.getexif().get(0x0112, 1)
            except Exception:
                orientation = 1
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return None
    if fmt not in FORMATS or width <= 0 or height <= 0:
        return None
    if orientation in _TRANSPOSED:
        width, height = height, width
    return ImageInfo(FORMATS[fmt], width, height)


def _fit_within(width: int, height: int, max_w: int, max_h: int) -> tuple[int, int]:
    scale = min(1.0, max_w / width, max_h / height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def thumbnail_size(name: str, width: int, height: int) -> tuple[int, int]:
    """(width, height) of thumbnail `name` of a width x height image."""
    if name == "stream":
        return _fit_within(width, height, 600, height)
    if name == "stream_square":
        return 140, 140
    if name == "square45":
        return 45, 45
    if name == "scaled480":
        return _fit_within(width, height, 480, 480)
    if name == "original":
        return width, height
    raise ValueError(f"unknown thumbnail {name!r}")


def _has_alpha(image: Image.Image) -> bool:
    return image.mode in ("RGBA", "LA", "PA") or (
        image.mode == "P" and "transparency" in image.info
    )


def _encode(image: Image.Image, alpha: bool) -> tuple[bytes, str]:
    out = io.BytesIO()
    if alpha:
        image.convert("RGBA").save(out, "PNG", optimize=True)
        return out.getvalue(), "image/png"
    image.convert("RGB").save(out, "JPEG", quality=85, optimize=True)
    return out.getvalue(), "image/jpeg"


def make_thumbnails(data: bytes, width: int, height: int) -> list[Thumbnail]:
    """Every thumbnail of an image whose displayed size is width x height (from `sniff`).

    Each comes out exactly `thumbnail_size(name, width, height)`. Raises ThumbnailError when
    the bytes do not decode.
    """
    info = ImageInfo("", width, height)
    if not info.thumbnailable:
        raise ThumbnailError("image too large for thumbnails")
    try:
        with Image.open(io.BytesIO(data), formats=list(FORMATS)) as opened:
            if opened.format == "JPEG":
                # decode at a reduced scale when the image is much larger than what we need
                side = min(600, width, height)
                opened.draft("RGB", (side, side))
            opened.load()
            image = ImageOps.exif_transpose(opened)
            alpha = _has_alpha(image)
            if image.mode not in ("RGB", "RGBA"):
                image = image.convert("RGBA" if alpha else "RGB")
            out = []
            for name in THUMBNAILS:
                size = thumbnail_size(name, width, height)
                if name in ("stream_square", "square45"):
                    thumb = ImageOps.fit(image, size, Image.Resampling.LANCZOS)
                else:
                    thumb = image.resize(size, Image.Resampling.LANCZOS)
                encoded, content_type = _encode(thumb, alpha)
                out.append(Thumbnail(name, encoded, content_type, *thumb.size))
            return out
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError,
            Image.DecompressionBombError) as exc:
        raise ThumbnailError(str(exc)) from exc
