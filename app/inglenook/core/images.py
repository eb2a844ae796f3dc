"""Images from outside, read with bounds and decoded to RGB for the engine (Qt-free).

An image file is outside data: it may be a decompression bomb, announce 30,000 × 30,000 pixels,
be truncated, be another format under a .png name, hold thousands of animation frames, or not
be a file at all (a FIFO that never ends). `read_image` opens only regular files, reads at most
MAX_FILE_BYTES, checks the announced size before decoding a pixel, decodes the first frame only
and returns it at most MAX_SIDE pixels a side, turned upright as its EXIF orientation says (a
phone stores a portrait photo sideways and says so there). Each refusal is an ImageRefused with
a sentence for the user; nothing is stored here.

Pillow is the one dependency of core/ outside the standard library: images cannot be decoded
safely by hand, and it decodes without Qt (the engine host and the API server have no Qt).
"""

from __future__ import annotations

import base64
import hashlib
import io
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageOps, UnidentifiedImageError

from inglenook.core import files

MAX_FILE_BYTES = 32 * 1024 * 1024
MAX_PIXELS = 40_000_000  # announced width × height; a 12 MP photo is 12,000,000
MAX_SIDE = 2048  # vision encoders resize to ~336-1,024 pixels anyway
FORMATS = ("PNG", "JPEG", "GIF", "WEBP", "BMP")


class ImageRefused(ValueError):
    """The image cannot be used; the message says why, for the user."""


@dataclass(frozen=True)
class DecodedImage:
    """The first frame as RGB bytes, row by row; `sha256` is the file's bytes' hash."""

    rgb: bytes
    width: int
    height: int
    sha256: str
    format: str
    source_side: int = 0  # the file's longer side, from its header (width, height: as read)
    turned: bool = False  # its EXIF orientation turned or mirrored it (the file's pixels are not)

    @property
    def mime(self) -> str:
        """The file's MIME type, as its bytes say ("image/png"; "" for none read here)."""
        return Image.MIME.get(self.format, "") if self.format in FORMATS else ""


def read_bounded(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """A regular file's bytes, at most `limit` (a link is followed: the user chose it); a
    FIFO, a device or a folder is refused without waiting on it, a larger file unread."""
    try:
        return files.read_bounded(path, limit, follow_links=True)[0]
    except files.ReadRefused as refused:
        why = refused.why
        if why == "not regular":
            raise ImageRefused(f"{path.name} is not a regular file.") from None
        if why == "too large":
            raise ImageRefused(f"{path.name} is {refused.size:,} bytes; images up to "
                               f"{limit:,} bytes are read.") from None
        if why == "grew":
            raise ImageRefused(f"{path.name} grew past {limit:,} bytes while it was read.") \
                from None
        if why == "changing":
            raise ImageRefused(f"{path.name} kept changing while it was read.") from None
        detail = {"missing": "No such file or directory",
                  "denied": "Permission denied"}.get(why, refused.detail)
        raise ImageRefused(f"{path.name}: cannot be read ({detail}).") from None


def decode_image(data: bytes, name: str = "The image") -> DecodedImage:
    """The first frame of an image file's bytes, as RGB, no larger than MAX_SIDE a side."""
    digest = hashlib.sha256(data).hexdigest()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image: Image.Image = Image.open(io.BytesIO(data), formats=FORMATS)
            width, height = image.size  # from the header: nothing decoded yet
            if width <= 0 or height <= 0 or width * height > MAX_PIXELS:
                raise ImageRefused(f"{name} is {width:,} × {height:,} pixels; images up to "
                                   f"{MAX_PIXELS:,} pixels are read.")
            fmt = image.format or "?"
            image.seek(0)  # the first frame only: an animation's others are never decoded
            image.draft("RGB", (MAX_SIDE, MAX_SIDE))  # JPEG decodes at a reduced scale
            image.load()
            orientation = exif_orientation(image)
            if orientation not in (0, 1):  # before flattening, which drops the EXIF
                image = ImageOps.exif_transpose(image)
            if image.mode != "RGB":
                if "A" in image.getbands() or image.mode == "P":
                    image = image.convert("RGBA")
                    flat = Image.new("RGB", image.size, (255, 255, 255))
                    flat.paste(image, mask=image.getchannel("A"))
                    image = flat
                else:
                    image = image.convert("RGB")
            if max(image.size) > MAX_SIDE:
                image.thumbnail((MAX_SIDE, MAX_SIDE))
    except ImageRefused:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ImageRefused(f"{name} announces far more pixels than the {MAX_PIXELS:,} "
                           "images are read up to.") from None
    except UnidentifiedImageError:
        raise ImageRefused(f"{name} is not an image in a format read here "
                           f"({', '.join(FORMATS)}).") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:  # truncated or corrupt
        raise ImageRefused(f"{name} is damaged or truncated ({exc}).") from None
    return DecodedImage(image.tobytes(), image.width, image.height, digest, fmt,
                        max(width, height), orientation not in (0, 1))


def exif_orientation(image: Image.Image) -> int:
    """The EXIF orientation tag (1-8; 0: none, or one that cannot be read: the pixels are
    taken as they are)."""
    try:
        value = image.getexif().get(0x0112, 0)
    except (OSError, SyntaxError, ValueError, TypeError, struct.error):
        return 0
    return value if isinstance(value, int) and 1 <= value <= 8 else 0


def as_read(image: DecodedImage) -> tuple[bytes, str] | None:
    """An image larger than MAX_SIDE, or one its EXIF orientation turns, re-encoded as it is
    read: that size, upright, without the EXIF (JPEG stays JPEG at quality 92, anything else
    becomes PNG), with its MIME type; None when the file is read as it is. What a message
    keeps: a 12 MP photo's 5.7 MB become about 1 MB, and the model reads the same pixels (within
    JPEG's rounding); a remote engine, which may not read EXIF, is sent the photo upright."""
    if image.source_side <= MAX_SIDE and not image.turned:
        return None
    out = io.BytesIO()
    frame = Image.frombytes("RGB", (image.width, image.height), image.rgb)
    if image.format == "JPEG":
        frame.save(out, "JPEG", quality=92)
        return out.getvalue(), "image/jpeg"
    frame.save(out, "PNG")
    return out.getvalue(), "image/png"


def data_url(path: Path, sha256: str) -> str:
    """The image file as a `data:` URL (how OpenAI-compatible servers take images), refused
    when its bytes are no longer the ones hashed, or not an image in a format read here."""
    data = read_bounded(path)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ImageRefused(f"{path.name} changed since it was attached.")
    try:
        with Image.open(io.BytesIO(data), formats=FORMATS) as image:  # the header only
            mime = Image.MIME.get(image.format or "", "")
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        mime = ""
    if not mime:
        raise ImageRefused(f"{path.name} is not an image in a format read here "
                           f"({', '.join(FORMATS)}).")
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def thumbnail_png(image: DecodedImage, side: int) -> bytes:
    """The image at most `side` pixels a side, as PNG bytes: what the window shows (a chip's
    thumbnail, the larger view), made off its GUI thread."""
    small = Image.frombytes("RGB", (image.width, image.height), image.rgb)
    small.thumbnail((side, side))
    out = io.BytesIO()
    small.save(out, "PNG")
    return out.getvalue()


def read_image(path: Path) -> DecodedImage:
    return decode_image(read_bounded(path), path.name)
