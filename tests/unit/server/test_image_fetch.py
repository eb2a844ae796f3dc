"""Images an API request names by http(s) URL: refused unless the server was started with image
fetching on; then fetched under server/image_fetch.py's rules from a real HTTP server on
127.0.0.1 (the address policy is widened to loopback for it; the app's own refuses loopback):
too large, redirected to a private address, not an image, or with credentials, refused; the
connection goes to the address that was checked; the request log names the host. The Responses
API's `input_image` parts follow the same rules (data: URLs always)."""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from inglenook.core.load import LoadParams
from inglenook.engine.client import EngineClient
from inglenook.server.errors import ApiError
from inglenook.server.image_fetch import FetchPolicy, ImageFetcher, is_public
from inglenook.server.images import fetching
from inglenook.server.openai_responses import parse_responses
from tests.helpers.api import request, serving
from tests.helpers.image_server import (
    LOOPBACK,
    ImageServer,
    Route,
    chat,
    chat_of,
    image_server,
    parsed,
    png,
    refused,
)


@pytest.fixture
def served_images() -> Iterator[ImageServer]:
    with image_server() as s:
        s.routes["/cat.png"] = Route(body=png(), headers={"Content-Type": "image/png"})
        yield s


def test_off_by_default_nothing_is_fetched(served_images: ImageServer) -> None:
    assert "nothing is fetched" in refused(chat(served_images.url("/cat.png")), None)
    assert served_images.seen == []


def test_a_url_image_is_fetched_when_allowed(served_images: ImageServer) -> None:
    fetcher = ImageFetcher(LOOPBACK)
    call = parsed(chat(served_images.url("/cat.png")), fetcher)
    (ref,) = call.messages[0].images
    assert ref.sha256 == hashlib.sha256(png()).hexdigest()
    assert Path(ref.path).read_bytes() == png()
    assert fetcher.notes == [f"image fetched from 127.0.0.1 ({len(png())} B)"]


def test_the_apps_own_policy_refuses_this_machine_and_private_networks(
        served_images: ImageServer) -> None:
    message = refused(chat(served_images.url("/cat.png")), ImageFetcher())
    assert "private network (127.0.0.1)" in message and served_images.seen == []
    for address, public in (("127.0.0.1", False), ("10.1.2.3", False), ("192.168.1.1", False),
                            ("172.16.0.9", False), ("169.254.169.254", False),
                            ("100.64.0.1", False), ("224.0.0.251", False), ("0.0.0.0", False),
                            ("::1", False), ("fe80::1", False), ("fd00::1", False),
                            ("::ffff:127.0.0.1", False), ("ff02::1", False),
                            ("93.184.216.34", True), ("2606:4700::1111", True)):
        assert is_public(ipaddress.ip_address(address)) is public, address


def test_an_image_too_large_is_refused_declared_or_not(served_images: ImageServer) -> None:
    big = png(size=(400, 400), color=(1, 2, 3)) + bytes(5000)
    served_images.routes["/big.png"] = Route(body=big, headers={"Content-Type": "image/png"})
    served_images.routes["/chunked.png"] = Route(body=big, chunked=True,
                                                 headers={"Content-Type": "image/png"})
    small = ImageFetcher(FetchPolicy(address_allowed=LOOPBACK.address_allowed, max_bytes=2000))
    for path in ("/big.png", "/chunked.png"):
        message = refused(chat(served_images.url(path)), small)
        assert "images up to 2,000 bytes are read" in message


def test_a_redirect_is_checked_again_at_each_hop(served_images: ImageServer) -> None:
    port = served_images.port
    served_images.routes["/private"] = Route(302, headers={"Location": "http://10.0.0.7/x.png"})
    served_images.routes["/elsewhere"] = Route(
        301, headers={"Location": f"http://localhost:{port}/cat.png"})
    served_images.routes["/loop"] = Route(302, headers={"Location": "/loop"})
    message = refused(chat(served_images.url("/private")), ImageFetcher(LOOPBACK))
    assert "10.0.0.7" in message and "private network" in message
    assert [path for path, _host in served_images.seen] == ["/private"]  # never went there
    call = parsed(chat(served_images.url("/elsewhere")), ImageFetcher(LOOPBACK))
    assert call.messages[0].images[0].sha256 == hashlib.sha256(png()).hexdigest()
    assert "more than 3 redirects" in refused(chat(served_images.url("/loop")),
                                              ImageFetcher(LOOPBACK))


def test_what_is_not_an_image_is_refused(served_images: ImageServer) -> None:
    served_images.routes["/page"] = Route(body=b"<html>hello</html>",
                                          headers={"Content-Type": "text/html"})
    served_images.routes["/fake.png"] = Route(body=b"not a picture at all",
                                              headers={"Content-Type": "image/png"})
    served_images.routes["/gone.png"] = Route(404, b"missing")
    fetcher = ImageFetcher(LOOPBACK)
    assert "sent text/html, not an image" in refused(chat(served_images.url("/page")), fetcher)
    assert "not an image in a format read here" in refused(
        chat(served_images.url("/fake.png")), fetcher)
    assert "answered HTTP 404" in refused(chat(served_images.url("/gone.png")), fetcher)
    for url in (f"http://user:secret@127.0.0.1:{served_images.port}/cat.png",
                "ftp://127.0.0.1/cat.png"):
        part = chat(url)
        part["messages"][0]["content"][1]["image_url"]["url"] = url
        message = refused(part, fetcher)
        assert "user name or password" in message or "data: URL" in message
    assert [path for path, _ in served_images.seen] == ["/page", "/fake.png", "/gone.png"]


def test_the_connection_goes_to_the_checked_address_with_the_name_as_host(
        served_images: ImageServer) -> None:
    """A name resolved once, checked, and connected to by address: DNS rebinding cannot
    swap the address after the check."""
    answers = iter([["127.0.0.1"], ["10.9.9.9"]])  # a second lookup would be refused
    policy = FetchPolicy(address_allowed=LOOPBACK.address_allowed,
                         resolve=lambda host, port: next(answers))
    url = f"http://images.example:{served_images.port}/cat.png"
    call = parsed(chat(url), ImageFetcher(policy))
    assert call.messages[0].images[0].sha256 == hashlib.sha256(png()).hexdigest()
    assert served_images.seen == [("/cat.png", f"images.example:{served_images.port}")]


def test_responses_input_image_follows_the_same_rules(served_images: ImageServer) -> None:
    body = {"model": "", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": served_images.url("/cat.png"), "detail": "auto"}]}]}
    token = fetching.set(ImageFetcher(LOOPBACK))
    try:
        call = parse_responses(body)
    finally:
        fetching.reset(token)
    assert call.messages[0].images[0].sha256 == hashlib.sha256(png()).hexdigest()
    with pytest.raises(ApiError, match="nothing is fetched"):
        parse_responses(body)
    inline = base64.b64encode(png((9, 9, 9))).decode()
    body["input"][0]["content"][1]["image_url"] = f"data:image/png;base64,{inline}"
    (message,) = parse_responses({**body, "instructions": None}).messages
    assert message.content == "What is this?"
    assert message.images[0].sha256 == hashlib.sha256(png((9, 9, 9))).hexdigest()
    for part, words in (({"type": "input_image", "file_id": "file-1"}, "keeps no files"),
                        ({"type": "input_image", "image_url": "x", "detail": "max"}, "detail")):
        body["input"][0]["content"][1] = part
        with pytest.raises(ApiError, match=words):
            parse_responses(body)
    body["input"][0]["role"] = "assistant"
    body["input"][0]["content"][1] = {"type": "input_image", "image_url": "data:,"}
    with pytest.raises(ApiError, match="must be text"):
        parse_responses(body)


@pytest.fixture
def engine(bundled_model: Path, tmp_path: Path) -> Iterator[EngineClient]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"default": {"text": "Saw {images}.", "token_ms": 0},
                                  "vision": 16}))
    client = EngineClient(log_path=tmp_path / "engine.log", command=[
        sys.executable, "-m", "tests.helpers.fake_host", str(script)])
    client.load(LoadParams(str(bundled_model)))
    yield client
    client.close()


def test_the_server_fetches_only_when_told_and_logs_the_host(
        engine: EngineClient, served_images: ImageServer) -> None:
    body = {**chat(served_images.url("/cat.png")), "max_tokens": 8}
    with serving(engine) as off:
        response = request(off.port, "POST", "/v1/chat/completions", body)
        assert response.status == 400 and "nothing is fetched" in response.body.decode()
    assert served_images.seen == []
    threads: list[str] = []  # where each fetch ran: never on the pool every parse shares

    def resolve(host: str, port: int) -> list[str]:
        threads.append(threading.current_thread().name)
        return ["127.0.0.1"]

    policy = replace(LOOPBACK, resolve=resolve)
    with serving(engine, fetch_images=True, fetch_policy=policy) as on:
        response = request(on.port, "POST", "/v1/chat/completions", body)
        assert response.status == 200, response.body
        assert response.json()["choices"][0]["message"]["content"] == "Saw 1."
        (record,) = on.status.wait_for(lambda status: len(status.recent) == 1).recent
        assert record.fetched == f"image fetched from 127.0.0.1 ({len(png())} B)"
        assert len(threads) == 1 and threads[0].startswith("image-fetch")
        many = {**chat_of(*[served_images.url("/cat.png")] * 17), "max_tokens": 8}
        response = request(on.port, "POST", "/v1/chat/completions", many)
        assert response.status == 400
        assert "at most 16 images are fetched for one request" in response.body.decode()
