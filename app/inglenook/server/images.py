"""Images in API requests (OpenAI's `image_url` parts, Anthropic's image blocks, Ollama's
`images`): base64 bytes, checked, become an ImageRef.

The bytes are outside data: the base64 is decoded only when its length fits MAX_FILE_BYTES
(the body limit caps it first), the image is decoded and checked with core/images.py's bounds
before anything is written, and the file is named by its sha256 under paths.request_image_dir(),
as the CLI's --image gives the engine a file and its hash. A remote URL is refused unless the
user started the server with image fetching on (`--fetch-images`, or the window's API server
settings): the request's parse then runs with `fetching` set (server/image_fetch.py's rules),
and nothing is fetched otherwise.
"""

from __future__ import annotations

import base64
import binascii
import re
from contextvars import ContextVar
from typing import Any

from inglenook.chat.images import store_request_image
from inglenook.core.images import MAX_FILE_BYTES, ImageRefused, decode_image
from inglenook.core.messages import ImageRef
from inglenook.server.errors import ApiError
from inglenook.server.fields import only_known
from inglenook.server.image_fetch import FetchRefused, ImageFetcher

__all__ = ["anthropic_image", "base64_image", "fetching", "image_part", "url_image"]

# The request's fetcher while its body is parsed (Serving.parse sets it; the parsing thread
# runs in a copy of its context); None: remote URLs are refused. A `deferred` one raises
# FetchDeferred, which ends the parse: it is run again where fetching may wait on the network.
fetching: ContextVar[ImageFetcher | None] = ContextVar("fetching", default=None)

# data:[<media type>][;<parameter>]*;base64,<data>; only base64 (a percent-encoded image
# would be a second decoder for nothing: clients all send base64).
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)?((?:;[\w.+-]+=[\w.+-]+)*);base64,", re.ASCII)
_MAX_BASE64 = (MAX_FILE_BYTES + 2) // 3 * 4
DETAILS = ("auto", "low", "high")  # the projector has one resolution: each is the same


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
    """Image bytes decoded with core/images.py's bounds, then kept under their hash."""
    try:
        image = decode_image(data, f"The image of '{where}'")
    except ImageRefused as exc:
        raise ApiError(400, str(exc), param=param, code="invalid_value") from None
    return ImageRef(image.sha256,
                    str(store_request_image(data, image.sha256, image.format.lower())))

