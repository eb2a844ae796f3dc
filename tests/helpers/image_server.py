"""An HTTP server on 127.0.0.1 that serves images for server/image_fetch.py's tests: each path a
Route (status, body, headers, chunked or not), and slow ones: a Route may wait before it
answers, or send its header lines or its body a little at a time (as a server that holds a
fetch open does), until the client goes away."""

from __future__ import annotations

import io
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from PIL import Image

from inglenook.server.errors import ApiError
from inglenook.server.image_fetch import FetchPolicy, ImageFetcher
from inglenook.server.images import fetching
from inglenook.server.schemas import parse_chat

TRICKLE_EVERY_S = 0.1  # between two pieces of a trickled answer
TRICKLE_PIECES = 40  # then the answer ends: 4 s, longer than any test's deadline
# The app's rules, but for the test server's loopback address (the app's own refuse it).
LOOPBACK = FetchPolicy(address_allowed=lambda address: address.is_loopback)


def png(color: tuple[int, int, int] = (30, 120, 220), size: tuple[int, int] = (16, 12)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "PNG")
    return out.getvalue()


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    chunked: bool = False
    delay_s: float = 0.0  # before the answer begins
    trickle: str = ""  # "headers": a header line at a time; "body": a byte at a time, no length


@dataclass
class ImageServer:
    port: int
    routes: dict[str, Route]
    seen: list[tuple[str, str]]  # (path, Host header) of each request
    # For each trickled answer, once it ended: the pieces sent before the client went away.
    trickled: queue.Queue[int]

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@contextmanager
def image_server() -> Iterator[ImageServer]:
    routes: dict[str, Route] = {}
    seen: list[tuple[str, str]] = []
    trickled: queue.Queue[int] = queue.Queue()
    stopping = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            seen.append((self.path, self.headers.get("Host", "")))
            route = routes.get(self.path, Route(404, b"no"))
            if route.delay_s and stopping.wait(route.delay_s):
                return
            if route.trickle:
                self._trickle(route)
                return
            self.send_response(route.status)
            for name, value in route.headers.items():
                self.send_header(name, value)
            if route.chunked:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for start in range(0, len(route.body), 1000):
                    piece = route.body[start:start + 1000]
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
                return
            self.send_header("Content-Length", str(len(route.body)))
            self.end_headers()
            self.wfile.write(route.body)

        def _trickle(self, route: Route) -> None:
            head = b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n"
            if route.trickle == "body":
                head += b"Connection: close\r\n\r\n"  # no length: the body ends at the close
            pieces = [f"X-Slow-{i}: a\r\n".encode() if route.trickle == "headers" else b"\0"
                      for i in range(TRICKLE_PIECES)]
            sent = 0
            try:
                self.wfile.write(head)
                for piece in pieces:
                    if stopping.wait(TRICKLE_EVERY_S):
                        break
                    self.wfile.write(piece)
                    sent += 1
                if route.trickle == "headers":
                    self.wfile.write(b"Content-Length: 0\r\n\r\n")
            except OSError:
                pass  # the client went away: what it was meant to do
            trickled.put(sent)
            self.close_connection = True

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # A short poll: shutdown() waits for the loop to look (0.5 s by default, at every test).
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield ImageServer(server.server_address[1], routes, seen, trickled)
    finally:
        stopping.set()
        server.shutdown()
        server.server_close()


def chat(url: str) -> dict[str, Any]:
    return {"model": "", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": url}}]}]}


def chat_of(*urls: str) -> dict[str, Any]:
    body = chat(urls[0])
    body["messages"][0]["content"] += [{"type": "image_url", "image_url": {"url": url}}
                                       for url in urls[1:]]
    return body


def parsed(body: dict[str, Any], fetcher: ImageFetcher | None) -> Any:
    token = fetching.set(fetcher)
    try:
        return parse_chat(body)
    finally:
        fetching.reset(token)


def refused(body: dict[str, Any], fetcher: ImageFetcher | None) -> str:
    with pytest.raises(ApiError) as caught:
        parsed(body, fetcher)
    assert caught.value.status == 400
    return caught.value.message
