"""OpenAI `image_url` parts: a data: URL's image becomes a user turn's ImageRef to a checked file
named by its hash; everything else is a 400 that says why."""

from __future__ import annotations

import base64
import hashlib
import io
import zlib
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from inglenook import paths
from inglenook.server.errors import ApiError
from inglenook.server.schemas import parse_chat


def png(color: tuple[int, int, int] = (200, 10, 10), size: tuple[int, int] = (8, 6)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "PNG")
    return out.getvalue()


def data_url(data: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


def body(*parts: Any, role: str = "user") -> dict[str, Any]:
    return {"model": "", "messages": [{"role": role, "content": list(parts)}]}


def image(url: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url, **extra}}


def refused(data: dict[str, Any]) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse_chat(data)
    assert caught.value.status == 400
    return caught.value


def test_a_data_url_image_becomes_the_turns_image_in_a_file_named_by_its_hash() -> None:
    data = png()
    call = parse_chat(body({"type": "text", "text": "What is this?"},
                           image(data_url(data), detail="auto")))
    (message,) = call.messages
    assert message.content == "What is this?"
    (ref,) = message.images
    assert ref.sha256 == hashlib.sha256(data).hexdigest()
    path = Path(ref.path)
    assert path.parent == paths.request_image_dir() and path.name.startswith(ref.sha256)
    assert path.read_bytes() == data


def test_the_same_image_twice_is_one_file_and_images_keep_their_order() -> None:
    red, blue = png((255, 0, 0)), png((0, 0, 255))
    call = parse_chat(body(image(data_url(red)), image(data_url(blue)), image(data_url(red))))
    refs = call.messages[0].images
    assert [r.sha256 for r in refs] == [hashlib.sha256(d).hexdigest() for d in (red, blue, red)]
    assert refs[0].path == refs[2].path
    assert len(list(paths.request_image_dir().iterdir())) == 2  # no temporary file left over


@pytest.mark.parametrize("url", ["http://example.com/cat.png", "HTTPS://example.com/cat.png"])
def test_a_remote_url_is_refused_and_nothing_is_fetched(url: str) -> None:
    error = refused(body(image(url)))
    assert error.param == "messages[0].content[0].image_url.url"
    assert "nothing is fetched" in error.message


def test_a_file_that_is_not_an_image_is_refused_saying_so() -> None:
    error = refused(body(image(data_url(b"just some text", "image/png"))))
    assert "not an image in a format read here" in error.message
    assert not list(paths.request_image_dir().iterdir())  # nothing written


def test_an_image_announcing_too_many_pixels_is_refused_before_decoding() -> None:
    # A real PNG header that announces 30,000 × 30,000 pixels over almost no data.
    small = png(size=(1, 1))
    ihdr = b"IHDR" + (30_000).to_bytes(4, "big") * 2 + small[24:29]
    huge = small[:12] + ihdr + zlib.crc32(ihdr).to_bytes(4, "big") + small[33:]
    error = refused(body(image(data_url(huge))))
    assert "pixels" in error.message


@pytest.mark.parametrize(("part", "param", "words"), [
    (image("data:image/png;base64,@@@@"), "messages[0].content[0].image_url.url", "base64"),
    (image("data:image/png,%89PNG"), "messages[0].content[0].image_url.url", "data: URL"),
    (image("file:///etc/passwd"), "messages[0].content[0].image_url.url", "data: URL"),
    (image(5), "messages[0].content[0].image_url.url", "string"),
    (image(data_url(png()), detail="ultra"), "messages[0].content[0].image_url.detail",
     "detail"),
    (image(data_url(png()), size=3), "messages[0].content[0].image_url.size", "not supported"),
    ({"type": "image_url", "image_url": None}, "messages[0].content[0].image_url", "object"),
    ({"type": "image_url", "image_url": {"url": "x"}, "extra": 1},
     "messages[0].content[0].extra", "not supported"),
])
def test_malformed_image_parts_are_refused_by_name(part: dict[str, Any], param: str,
                                                   words: str) -> None:
    error = refused(body(part))
    assert error.param == param
    assert words in error.message


def test_an_image_in_a_system_or_assistant_turn_is_refused() -> None:
    for role in ("system", "assistant"):
        error = refused(body(image(data_url(png())), role=role))
        assert error.param == "messages[0].content"
        assert f"a {role} turn" in error.message


def test_a_string_image_url_is_taken_as_the_url() -> None:
    data = png()
    call = parse_chat(body({"type": "image_url", "image_url": data_url(data)}))
    assert call.messages[0].images[0].sha256 == hashlib.sha256(data).hexdigest()
