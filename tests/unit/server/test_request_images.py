"""Issue 39 #2 and #10: requests' images over HTTP on a fake engine host (scripted replies, no
llama.cpp), with the official SDKs. Nothing is written for a model that cannot see images; the
folder stays within its bounds while the server runs; a full disk is a 507 with a sentence; a
request's images are decoded off the parse pool, so a plain request never waits behind them."""

from __future__ import annotations

import base64
import errno
import io
import json
import logging
import os
import sys
import threading
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from PIL import Image

from inglenook import paths
from inglenook.core.load import LoadParams
from inglenook.engine.client import EngineClient
from inglenook.server import images
from tests.helpers.api import request, serving


def fake_engine(folder: Path, model: Path, vision: int) -> EngineClient:
    script = folder / "script.json"
    script.write_text(json.dumps({"default": {"text": "Seen {images}.", "token_ms": 0},
                                  "vision": vision}))
    client = EngineClient(log_path=folder / "engine.log",
                          command=[sys.executable, "-m", "tests.helpers.fake_host", str(script)])
    client.load(LoadParams(str(model)))
    return client


@pytest.fixture(scope="module")
def text_engine(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[EngineClient]:
    client = fake_engine(tmp_path_factory.mktemp("fake-text"), bundled_model, 0)
    yield client
    client.close()


@pytest.fixture(scope="module")
def vision_engine(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[EngineClient]:
    client = fake_engine(tmp_path_factory.mktemp("fake-vision"), bundled_model, 4)
    assert client.model is not None and client.model.vision
    yield client
    client.close()


def png(seed: int, size: tuple[int, int] = (16, 12)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (seed % 256, seed // 256 % 256, 7)).save(out, "PNG")
    return out.getvalue()


def announcing(width: int, height: int) -> bytes:
    """A real PNG header that announces width × height pixels over almost no data."""
    small = png(0, (1, 1))
    ihdr = b"IHDR" + width.to_bytes(4, "big") + height.to_bytes(4, "big") + small[24:29]
    return small[:12] + ihdr + zlib.crc32(ihdr).to_bytes(4, "big") + small[33:]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def chat(port: int, *pngs: bytes, **extra: Any) -> Any:
    content: list[dict[str, Any]] = [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(d)}"}}
        for d in pngs]
    return request(port, "POST", "/v1/chat/completions", {
        "model": "", "messages": [{"role": "user", "content": [
            *content, {"type": "text", "text": "What is it?"}]}], **extra})


def image_cache() -> Any:
    from inglenook.server import image_cache  # imported here: main had no such module

    return image_cache


def cached() -> list[str]:
    return sorted(p.name for p in paths.request_image_dir().iterdir())


# ---- #2: nothing written for a model that cannot see ------------------------------------------
def test_no_route_writes_an_image_for_a_model_that_cannot_see(text_engine: EngineClient) -> None:
    image = png(1)
    with serving(text_engine, ollama=True) as served, \
            openai.OpenAI(base_url=served.base_url, api_key="x", max_retries=0) as oai, \
            anthropic.Anthropic(base_url=served.url, api_key="x", max_retries=0) as claude:
        with pytest.raises(openai.BadRequestError, match="cannot see images"):
            oai.chat.completions.create(model="", messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(image)}"}},
                {"type": "text", "text": "What is it?"}]}])
        block: Any = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                  "data": b64(png(2))}}
        with pytest.raises(anthropic.BadRequestError, match="cannot see images"):
            claude.messages.create(model="", max_tokens=4,
                                   messages=[{"role": "user", "content": [block]}])
        with pytest.raises(anthropic.BadRequestError, match="cannot see images"):
            claude.messages.count_tokens(model="", messages=[{"role": "user",
                                                              "content": [block]}])
        ollama = request(served.port, "POST", "/api/chat", {
            "model": "", "stream": False,
            "messages": [{"role": "user", "content": "?", "images": [b64(png(3))]}]})
        assert ollama.status == 400 and "cannot see images" in ollama.json()["error"]
    assert cached() == []  # on main: four files, one per route


# ---- #2: the folder's bounds, while running ---------------------------------------------------
def test_the_folder_stays_within_its_size_while_the_server_runs(
        vision_engine: EngineClient, monkeypatch: pytest.MonkeyPatch) -> None:
    sent = [png(n, (64, 64)) for n in range(6)]
    monkeypatch.setattr(image_cache(), "MAX_BYTES", 2 * max(map(len, sent)) + 10)
    monkeypatch.setattr(image_cache(), "IN_USE_S", 0.0)  # each request is over when the next comes
    with serving(vision_engine) as served:
        for data in sent:
            response = chat(served.port, data)
            assert response.status == 200, response.body
            folder = paths.request_image_dir()
            assert sum(p.stat().st_size for p in folder.iterdir()) <= image_cache().MAX_BYTES
        assert len(cached()) == 2  # the two latest, on main: all six


def test_images_in_use_are_kept_and_a_full_folder_is_a_507(
        vision_engine: EngineClient, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = png(10, (64, 64)), png(11, (64, 64))
    monkeypatch.setattr(image_cache(), "MAX_BYTES", len(first) + len(second) // 2)
    with serving(vision_engine) as served:
        assert chat(served.port, first).status == 200
        full = chat(served.port, second)
        assert full.status == 507
        assert "image cache is full" in full.json()["error"]["message"]
        assert chat(served.port, first).status == 200  # one already kept is used again
    assert len(cached()) == 1


def test_old_images_go_while_the_server_runs(vision_engine: EngineClient,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(image_cache(), "RESCAN_S", 0.0)  # the folder read at every write
    with serving(vision_engine) as served:
        assert chat(served.port, png(20)).status == 200
        (old,) = paths.request_image_dir().iterdir()
        os.utime(old, (0, 0))  # sent long ago
        assert chat(served.port, png(21)).status == 200
    assert old.name not in cached() and len(cached()) == 1


def test_a_full_disk_is_a_507_with_a_sentence_and_no_traceback(
        vision_engine: EngineClient, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    import tempfile

    real = tempfile.mkstemp
    folder = str(paths.request_image_dir())

    def full(*args: Any, **kwargs: Any) -> Any:  # fault injection: the disk has no room
        if str(kwargs.get("dir", "")) == folder:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", full)
    with serving(vision_engine) as served, caplog.at_level(logging.INFO), \
            openai.OpenAI(base_url=served.base_url, api_key="x", max_retries=0) as oai:
        with pytest.raises(openai.APIStatusError) as caught:
            oai.chat.completions.create(model="", messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,"
                                                           f"{b64(png(30))}"}}]}])
        assert caught.value.status_code == 507
        assert "disk is full" in caught.value.message
        assert chat(served.port).status == 200  # a request without images goes on
    assert not [r for r in caplog.records if r.exc_info]  # no traceback in the log
    assert cached() == []


# ---- #10: decoding, budgeted and off the parse pool -------------------------------------------
def test_a_requests_images_have_a_pixel_budget_read_from_their_headers(
        vision_engine: EngineClient, monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[int] = []
    real = images.decode_image
    monkeypatch.setattr(images, "decode_image",
                        lambda data, name="": decoded.append(len(data)) or real(data, name))
    big = announcing(6000, 6000)  # 36 MP each: one is allowed, three are too many together
    with serving(vision_engine) as served:
        response = chat(served.port, big, big, big)
    assert response.status == 400
    assert "pixels in all" in response.json()["error"]["message"]
    assert decoded == []  # refused from the headers: nothing decoded, nothing written
    assert cached() == []


def test_a_plain_request_never_waits_behind_image_decodes(
        vision_engine: EngineClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every image decode is held (fault injection: a 40-megapixel PNG takes a second each)
    while more image requests are sent than the parse pool has threads; a plain request is
    still answered. On main the decodes held every thread of the pool that parses bodies."""
    entered, release = threading.Event(), threading.Event()
    real = images.decode_image

    def held(data: bytes, name: str = "") -> Any:
        entered.set()
        assert release.wait(60)
        return real(data, name)

    monkeypatch.setattr(images, "decode_image", held)
    pool_threads = min(32, (os.cpu_count() or 1) + 4)  # asyncio's default pool
    with serving(vision_engine, max_pending=64) as served, \
            ThreadPoolExecutor(pool_threads + 2) as senders:
        waiting = [senders.submit(chat, served.port, png(100 + n))
                   for n in range(pool_threads + 2)]
        try:
            assert entered.wait(30)
            with openai.OpenAI(base_url=served.base_url, api_key="x", max_retries=0,
                               timeout=20) as oai:
                reply = oai.chat.completions.create(
                    model="", messages=[{"role": "user", "content": "plain"}])
            assert reply.choices[0].message.content == "Seen 0."
            assert not any(f.done() for f in waiting)  # the image requests are still held
        finally:
            release.set()
        assert [f.result().status for f in waiting] == [200] * len(waiting)


def test_each_client_decodes_one_request_at_a_time_and_another_client_is_not_held_up(
        vision_engine: EngineClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first tool sends three image requests at once, the second one: the second's image
    is decoded while the first's first is (held), and the first's others wait their turn."""
    tokens = ("token-of-the-first-tool", "token-of-the-second-tool")
    entered: list[bytes] = []
    changed, release = threading.Condition(), threading.Event()
    real = images.decode_image

    def held(data: bytes, name: str = "") -> Any:
        with changed:
            entered.append(data)
            changed.notify_all()
        assert release.wait(60)
        return real(data, name)

    def send(token: str, data: bytes) -> int:
        part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(data)}"}}
        return request(served.port, "POST", "/v1/chat/completions",
                       {"model": "", "messages": [{"role": "user", "content": [part]}]},
                       {"Authorization": f"Bearer {token}"}).status

    monkeypatch.setattr(images, "decode_image", held)
    first = [png(200 + n) for n in range(3)]
    second = png(300)
    with serving(vision_engine, token=" ".join(tokens)) as served, ThreadPoolExecutor(4) as pool:
        try:
            busy = [pool.submit(send, tokens[0], data) for data in first]
            with changed:
                assert changed.wait_for(lambda: entered, 30)
            other = pool.submit(send, tokens[1], second)
            with changed:
                assert changed.wait_for(lambda: second in entered, 30)
                assert len(entered) == 2  # one of each client's: the first's others wait
        finally:
            release.set()
        assert other.result() == 200 and [f.result() for f in busy] == [200] * 3
