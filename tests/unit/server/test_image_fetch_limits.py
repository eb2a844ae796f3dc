"""The bounds of fetching images by URL (server/image_fetch.py), against slow and odd servers on
127.0.0.1: a deadline that holds while the headers arrive a line at a time and across
redirects, not only in the body; at most so many images and bytes for one request; host names
in IDNA; 6to4, Teredo and site-local addresses judged; port 0 and https→http refused."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import replace

import pytest

from inglenook.server.image_fetch import FetchRefused, ImageFetcher, is_public, next_hop
from tests.helpers.image_server import (
    LOOPBACK,
    TRICKLE_PIECES,
    ImageServer,
    Route,
    chat,
    chat_of,
    image_server,
    parsed,
    png,
    refused,
)

# Short enough for a fast test, long enough that a loaded machine answers a quick hop in time.
QUICK = replace(LOOPBACK, timeout_s=0.5, deadline_s=1.0)


@pytest.fixture
def served_images() -> Iterator[ImageServer]:
    with image_server() as s:
        s.routes["/cat.png"] = Route(body=png(), headers={"Content-Type": "image/png"})
        yield s


@pytest.mark.parametrize("phase", ["headers", "body"])
def test_the_deadline_holds_while_the_answer_trickles_in(
        served_images: ImageServer, phase: str) -> None:
    """A header line (or a byte) every 0.1 s keeps each read within its 0.5 s timeout: the
    deadline alone ends the fetch, and the server sees the client go."""
    served_images.routes["/slow.png"] = Route(trickle=phase)
    fetcher = ImageFetcher(QUICK)
    message = refused(chat(served_images.url("/slow.png")), fetcher)
    assert "127.0.0.1 took longer than 1 s" in message
    assert fetcher.notes == ["image from 127.0.0.1 refused"]
    assert served_images.trickled.get(timeout=10) < TRICKLE_PIECES // 2


def test_the_deadline_covers_every_redirect(served_images: ImageServer) -> None:
    for hop in range(3):  # each hop answers within the read timeout, together past the deadline
        served_images.routes[f"/hop{hop}"] = Route(302, delay_s=0.4,
                                                   headers={"Location": f"/hop{hop + 1}"})
    served_images.routes["/hop3"] = Route(body=png(), headers={"Content-Type": "image/png"})
    message = refused(chat(served_images.url("/hop0")), ImageFetcher(QUICK))
    assert "took longer than 1 s" in message
    assert [path for path, _ in served_images.seen] == ["/hop0", "/hop1", "/hop2"]


def test_one_request_fetches_so_many_images_and_bytes_in_all(
        served_images: ImageServer) -> None:
    cat = served_images.url("/cat.png")
    few = ImageFetcher(replace(LOOPBACK, max_images=2))
    message = refused(chat_of(cat, cat, cat, cat), few)
    assert "at most 2 images are fetched for one request" in message
    assert len(served_images.seen) == 2 and few.fetched == 2  # the third was not asked for
    small = ImageFetcher(replace(LOOPBACK, max_request_bytes=len(png()) * 3 // 2))
    message = refused(chat_of(cat, cat), small)
    assert "of images are fetched for one request; this one would pass it" in message
    assert len(parsed(chat_of(cat), ImageFetcher(LOOPBACK)).messages[0].images) == 1


def test_one_requests_fetches_share_one_deadline(served_images: ImageServer) -> None:
    served_images.routes["/late.png"] = Route(body=png(), delay_s=0.4,
                                              headers={"Content-Type": "image/png"})
    late = served_images.url("/late.png")
    fetcher = ImageFetcher(replace(QUICK, request_deadline_s=0.6))
    message = refused(chat_of(late, late, late), fetcher)
    assert "took longer than" in message  # the second, cut at the request's 0.6 s
    assert fetcher.notes[0].startswith("image fetched") and fetcher.fetched == 2


def test_an_internationalised_host_is_asked_for_by_its_idna_name(
        served_images: ImageServer) -> None:
    asked: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    fetcher = ImageFetcher(replace(LOOPBACK, resolve=resolve))
    port = served_images.port
    call = parsed(chat(f"http://bücher.example:{port}/cat.png"), fetcher)
    assert len(call.messages[0].images) == 1
    assert asked == ["xn--bcher-kva.example"]
    assert served_images.seen == [("/cat.png", f"xn--bcher-kva.example:{port}")]
    assert fetcher.notes[0].startswith("image fetched from xn--bcher-kva.example")
    too_long = f"http://{'ü' * 70}.example:{port}/cat.png"  # a label longer than 63
    assert "not a valid internationalised name" in refused(chat(too_long), fetcher)
    assert fetcher.notes[-1].endswith("refused") and len(asked) == 1


def test_port_zero_and_a_downgrade_to_http_are_refused(served_images: ImageServer) -> None:
    with pytest.raises(FetchRefused, match="port is not a number from 1 to 65535"):
        ImageFetcher(LOOPBACK).fetch("http://127.0.0.1:0/cat.png")  # not taken as port 80
    assert served_images.seen == []
    # An https test server would need a CA the app trusts: the rule is checked where it is made.
    with pytest.raises(FetchRefused, match="from https to an unencrypted URL"):
        next_hop("https://a.example/x.png", "http://a.example/x.png", "a.example")
    assert next_hop("http://a.example/x.png", "https://b.example/y", "a.example") \
        == "https://b.example/y"
    assert next_hop("https://a.example/x/1.png", "2.png", "a.example") \
        == "https://a.example/x/2.png"
    with pytest.raises(FetchRefused, match="redirected without a Location"):
        next_hop("https://a.example/x.png", "", "a.example")


@pytest.mark.parametrize(("address", "why"), [
    ("2002:7f00:1::", "6to4 around 127.0.0.1"),
    ("2002:a9fe:a9fe::1", "6to4 around 169.254.169.254 (cloud metadata)"),
    ("2002:c0a8:101::", "6to4 around 192.168.1.1"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo, client 127.0.0.1"),
    ("fec0::1", "site-local"),
    ("::ffff:10.0.0.1", "IPv4-mapped private"),
])
def test_addresses_wrapping_private_ones_are_refused(address: str, why: str) -> None:
    assert not is_public(ipaddress.ip_address(address)), why


def test_public_addresses_in_ipv6_clothes_are_fetched() -> None:
    assert is_public(ipaddress.ip_address("2002:5db8:d822::1"))  # 6to4 around 93.184.216.34
    assert is_public(ipaddress.ip_address("2606:4700::1111"))
