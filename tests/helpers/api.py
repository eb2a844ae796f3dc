"""Helpers for API server tests: a server on loopback, raw HTTP, and waiting on state."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

from inglenook.engine.client import EngineClient
from inglenook.engine.scheduler import QueueState, Scheduler
from inglenook.models.download_queue import DownloadManager
from inglenook.server import ApiServer, ServerConfig, ServerStatus

T = TypeVar("T")
WAIT_S = 30.0


class Watch(Generic[T]):
    """The latest value a callback reported, and a way to wait for one that satisfies a
    condition (the callback wakes the waiter; nothing sleeps)."""

    def __init__(self, initial: T) -> None:
        self.value = initial
        self.history: list[T] = [initial]
        self._cond = threading.Condition()

    def update(self, value: T) -> None:
        with self._cond:
            self.value = value
            self.history.append(value)
            self._cond.notify_all()

    def wait_for(self, condition: Callable[[T], bool], timeout: float = WAIT_S) -> T:
        with self._cond:
            if not self._cond.wait_for(lambda: condition(self.value), timeout):
                raise AssertionError(f"timed out; last value {self.value!r}")
            return self.value


@dataclass
class Served:
    server: ApiServer
    scheduler: Scheduler
    url: str
    status: Watch[ServerStatus]
    queue: Watch[QueueState]

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 0


@contextmanager
def serving(client: EngineClient, on_engine_lost: Callable[[str], None] | None = None,
            downloads: DownloadManager | None = None, **config: Any) -> Iterator[Served]:
    """An ApiServer on 127.0.0.1 (a free port) over its own scheduler on `client`
    (`downloads`: the queue Ollama's pulls go through, as the window's)."""
    queue: Watch[QueueState] = Watch(QueueState(None, ()))
    status: Watch[ServerStatus] = Watch(ServerStatus())
    scheduler = Scheduler(client.cancel, queue.update)
    server = ApiServer(scheduler, client, ServerConfig(port=0, **config),
                       on_engine_lost=on_engine_lost, on_status=status.update,
                       downloads=downloads)
    try:
        url = server.start()
        yield Served(server, scheduler, url, status, queue)
    finally:
        server.stop()
        scheduler.close()


@dataclass
class RawResponse:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request(port: int, method: str, path: str,
            body: bytes | dict | Iterable[bytes] | None = None,
            headers: dict[str, str] | None = None) -> RawResponse:
    """One HTTP request with exactly these headers (Host included when given); a body given
    as an iterable of bytes is sent chunked, with no Content-Length."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    chunked = data is not None and not isinstance(data, bytes)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S)
    try:
        given = dict(headers or {})
        conn.putrequest(method, path, skip_host="Host" in given,
                        skip_accept_encoding=True)
        if data is not None:
            given.setdefault("Content-Type", "application/json")
            if chunked:
                given["Transfer-Encoding"] = "chunked"
            else:
                given.setdefault("Content-Length", str(len(data)))  # type: ignore[arg-type]
        for name, value in given.items():
            conn.putheader(name, value)
        conn.endheaders(data, encode_chunked=chunked)
        response = conn.getresponse()
        return RawResponse(response.status, response.headers, response.read())
    finally:
        conn.close()


def chat_body(text: str = "Hi", **extra: Any) -> dict[str, Any]:
    return {"model": "", "messages": [{"role": "user", "content": text}], **extra}


@contextmanager
def sent_stream(port: int, body: dict[str, Any]) -> Iterator[http.client.HTTPConnection]:
    """A streaming chat request, sent; leaving the block closes the connection (the client
    goes). The server sends its headers with the first text, so nothing is read here."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S)
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps({**body, "stream": True}),
                     {"Content-Type": "application/json"})
        yield conn
    finally:
        conn.close()


@contextmanager
def open_stream(port: int, body: dict[str, Any]) -> Iterator[http.client.HTTPResponse]:
    """A streaming chat request and its response (once the first text is on its way)."""
    with sent_stream(port, body) as conn:
        yield conn.getresponse()


def first_event(response: http.client.HTTPResponse) -> dict[str, Any]:
    """The first `data:` event of a stream that carries text."""
    while True:
        line = response.readline()
        assert line, "the stream ended before any text"
        if line.startswith(b"data: {"):
            event = json.loads(line[6:])
            if event["choices"] and event["choices"][0]["delta"].get("content"):
                return event


@contextmanager
def openai_client(engine: EngineClient) -> Iterator[Any]:
    """The official openai client on `inglenook serve`'s routes over this engine."""
    import openai

    served: Served
    with serving(engine) as served, openai.OpenAI(
            base_url=served.base_url, api_key="unused", max_retries=0) as client:
        yield client


@contextmanager
def fake_qwen3_engine(model: Any, folder: Any, script: dict[str, Any]) -> Iterator[EngineClient]:
    """A fake engine host (tests/helpers/fake_host.py) answering by `script`, with the bundled
    model's file loaded under Qwen3's chat template (tool calls and reasoning)."""
    import sys
    from pathlib import Path

    from inglenook.core.load import LoadParams
    from tests.templates import QWEN3

    script_file = Path(folder) / "script.json"
    script_file.write_text(json.dumps(script))
    client = EngineClient(log_path=Path(folder) / "engine.log",
                          command=[sys.executable, "-m", "tests.helpers.fake_host",
                                   str(script_file)])
    try:
        client.load(LoadParams(str(model), chat_template=QWEN3))
        yield client
    finally:
        client.close()
