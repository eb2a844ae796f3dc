"""Images in API requests (OpenAI's `image_url` parts, Anthropic's image blocks, Ollama's
`images`): base64 bytes, checked, become an ImageRef.

The bytes are outside data: the base64 is decoded only when its length fits MAX_FILE_BYTES
(the body limit caps it first), and the file is named by its sha256 under
paths.request_image_dir(), as the CLI's --image gives the engine a file and its hash. A server's
parse (Serving.parse sets `collecting`) reads only each image's header: its format, and its
pixels against the request's budget (REQUEST_PIXELS); the image is decoded, checked with
core/images.py's bounds and written later, by server/image_decoding.py, once the request is let
through (a model that cannot see images refuses it first), on threads of its own. Without
`collecting` (a parse called directly) it is decoded and written at once.

A remote URL is refused unless the user started the server with image fetching on
(`--fetch-images`, or the window's API server settings): the request's parse then runs with
`fetching` set (server/image_fetch.py's rules), and nothing is fetched otherwise.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
import warnings
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from PIL import Image, UnidentifiedImageError

from inglenook.core.images import FORMATS, MAX_FILE_BYTES, MAX_PIXELS, ImageRefused, decode_image
from inglenook.core.messages import ImageRef
from inglenook.server.errors import ApiError
from inglenook.server.fields import only_known
from inglenook.server.image_cache import request_image_cache
from inglenook.server.image_fetch import FetchRefused, ImageFetcher

__all__ = ["RequestImages", "anthropic_image", "base64_image", "collecting", "fetching",
           "image_part", "url_image"]

REQUEST_PIXELS = 100_000_000  # announced, all of a request's images together (a 12 MP photo:
# 12,000,000); one image may have up to core/images.MAX_PIXELS

# The request's fetcher while its body is parsed (Serving.parse sets it; the parsing thread
# runs in a copy of its context); None: remote URLs are refused. A `deferred` one raises
# FetchDeferred, which ends the parse: it is run again where fetching may wait on the network.
fetching: ContextVar[ImageFetcher | None] = ContextVar("fetching", default=None)

# data:[<media type>][;<parameter>]*;base64,<data>; only base64 (a percent-encoded image
# would be a second decoder for nothing: clients all send base64).
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)?((?:;[\w.+-]+=[\w.+-]+)*);base64,", re.ASCII)
_MAX_BASE64 = (MAX_FILE_BYTES + 2) // 3 * 4
DETAILS = ("auto", "low", "high")  # the projector has one resolution: each is the same


@dataclass(frozen=True)
class Pending:
    """An image read from a request, to decode, check and write once the request is let in."""

    data: bytes
    sha256: str
    suffix: str
    param: str
    where: str


@dataclass
class RequestImages:
    """A request's images as its parse found them (in order), and their announced pixels."""

    pending: list[Pending] = field(default_factory=list)
    pixels: int = 0

    def clear(self) -> None:
        self.pending.clear()
        self.pixels = 0

    def finish(self) -> None:
        """Decode and check each image, then write it where its ImageRef says (a thread of
        server/image_decoding.py's); ApiError for the first that fails."""
        for image in self.pending:
            stored_image(image.data, image.param, image.where)


# The request's images while its body is parsed (Serving.parse sets it): None, decoded and
# written at once.
collecting: ContextVar[RequestImages | None] = ContextVar("collecting", default=None)


def image_part(part: dict[str, Any], where: str) -> ImageRef:
    """`{"type": "image_url", "image_url": {"url": "data:image/png;base64,…"}}` as an ImageRef
    to a checked file; a 400 naming `where` for anything else."""
    only_known(part, {"type", "image_url"}, where)
    inner = part.get("image_url")
    if isinstance(inner, str):  # some clients send the URL itself
        inner = {"url": inner}
    if not isinstance(inner, dict):
        raise ApiError(400, f"'{where}.image_url' must be an object with a 'url'.",
                       param=f"{where}.image_url")
    only_known(inner, {"url", "detail"}, f"{where}.image_url")
    if inner.get("detail") not in (None, *DETAILS):
        raise ApiError(400, f"'{where}.image_url.detail' must be one of {', '.join(DETAILS)}.",
                       param=f"{where}.image_url.detail")
    return url_image(inner.get("url"), f"{where}.image_url.url", where)


def url_image(url: Any, param: str, where: str) -> ImageRef:
    """An image URL (OpenAI's chat `image_url.url`, the Responses API's `input_image`): a base64
    data: URL, or an http(s) URL, fetched only where the server was told it may fetch."""
    if not isinstance(url, str):
        raise ApiError(400, f"'{param}' must be a string.", param=param)
    if url[:8].lower().startswith(("http://", "https://")):
        return remote_image(url, param, where)
    found = _DATA_URL.match(url)
    if found is None:
        raise ApiError(400, f"'{param}' must be a base64 data: URL "
                       "(data:image/png;base64,…).", param=param, code="invalid_value")
    return base64_image(url[found.end():], param, where)


def remote_image(url: str, param: str, where: str) -> ImageRef:
    """An http(s) image URL: refused, unless fetching is on for this request (`fetching`),
    then fetched with image_fetch's rules and checked like any other image."""
    fetcher = fetching.get()
    if fetcher is None:
        raise ApiError(400, f"'{param}' is a remote URL: nothing is fetched from the network "
                       "here; send the image as a data: URL (data:image/png;base64,…), or "
                       "start the server with image fetching on.",
                       param=param, code="invalid_value")
    try:
        data = fetcher.fetch(url)
    except FetchRefused as exc:
        raise ApiError(400, f"'{param}': {exc}", param=param, code="invalid_value") from None
    return checked_image(data, param, where)


def anthropic_image(block: dict[str, Any], where: str) -> ImageRef:
    """Anthropic's `{"type": "image", "source": {"type": "base64", "media_type": …, "data": …}}`;
    a `url` source is refused like a remote image_url."""
    source = block.get("source")
    param = f"{where}.source"
    if not isinstance(source, dict):
        raise ApiError(400, f"'{param}' must be an object.", param=param)
    only_known(source, {"type", "media_type", "data", "url"}, param)
    if source.get("type") == "url":
        url = source.get("url")
        if not isinstance(url, str) or not url[:8].lower().startswith(("http://", "https://")):
            raise ApiError(400, f"'{param}.url' must be an http(s) URL.", param=f"{param}.url")
        return remote_image(url, f"{param}.url", where)
    if source.get("type") != "base64" or not isinstance(source.get("data"), str):
        raise ApiError(400, f"'{param}' must be a base64 source with 'data'.", param=param)
    return base64_image(source["data"], f"{param}.data", where)


def base64_image(encoded: Any, param: str, where: str) -> ImageRef:
    """Base64 image bytes (the whole field: Ollama's `images` items, Anthropic's `data`, a
    data: URL's tail) as an ImageRef to a checked file; a 400 naming `param` otherwise."""
    if not isinstance(encoded, str):
        raise ApiError(400, f"'{param}' must be a base64 string.", param=param)
    if len(encoded) > _MAX_BASE64:
        raise ApiError(400, f"'{param}': images up to {MAX_FILE_BYTES:,} bytes are read.",
                       param=param, code="invalid_value")
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(400, f"'{param}' is not valid base64.", param=param,
                       code="invalid_value") from None
    return checked_image(data, param, where)


def checked_image(data: bytes, param: str, where: str) -> ImageRef:
    """Image bytes as an ImageRef: decoded and written now, or, while a server parses
    (`collecting`), only their header read and the rest left for after the request's checks."""
    images = collecting.get()
    if images is None:
        return stored_image(data, param, where)
    fmt, pixels = _header(data, param, where)
    if images.pixels + pixels > REQUEST_PIXELS:
        raise ApiError(400, f"'{param}': a request's images may have up to "
                       f"{REQUEST_PIXELS:,} pixels in all; this one brings more.",
                       param=param, code="invalid_value")
    images.pixels += pixels
    sha256 = hashlib.sha256(data).hexdigest()
    suffix = fmt.lower()
    images.pending.append(Pending(data, sha256, suffix, param, where))
    return ImageRef(sha256, str(request_image_cache().folder / f"{sha256}.{suffix}"))


def stored_image(data: bytes, param: str, where: str) -> ImageRef:
    """Image bytes decoded with core/images.py's bounds, then kept under their hash."""
    try:
        image = decode_image(data, f"The image of '{where}'")
    except ImageRefused as exc:
        raise ApiError(400, str(exc), param=param, code="invalid_value") from None
    suffix = image.format.lower()
    return ImageRef(image.sha256,
                    str(request_image_cache().store(data, image.sha256, suffix)))


def _header(data: bytes, param: str, where: str) -> tuple[str, int]:
    """The image's format and announced pixels, from its header only (nothing decoded)."""
    name = f"The image of '{where}'"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=FORMATS) as image:
                (width, height), fmt = image.size, image.format or ""
    except UnidentifiedImageError:
        fmt, width, height = "", 0, 0
    except Image.DecompressionBombError:
        raise ApiError(400, f"{name} announces far more pixels than the {MAX_PIXELS:,} images "
                       "are read up to.", param=param, code="invalid_value") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise ApiError(400, f"{name} is damaged or truncated ({exc}).", param=param,
                       code="invalid_value") from None
    if not fmt:
        raise ApiError(400, f"{name} is not an image in a format read here "
                       f"({', '.join(FORMATS)}).", param=param, code="invalid_value")
    if width <= 0 or height <= 0 or width * height > MAX_PIXELS:
        raise ApiError(400, f"{name} is {width:,} × {height:,} pixels; images up to "
                       f"{MAX_PIXELS:,} pixels are read.", param=param, code="invalid_value")
    return fmt, width * height

