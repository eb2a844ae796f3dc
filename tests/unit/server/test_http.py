"""The API server over HTTP, on a fake engine host (scripted replies, no llama.cpp): the
official openai client, the security defaults, bad requests, clients that go away, turns."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from inglenook.cli import main
from inglenook.core.load import LoadParams
from inglenook.engine.client import EngineClient
from inglenook.engine.scheduler import Job
from inglenook.server import ApiServer, ConfigError, ServerConfig, connections, replying
from inglenook.server.api_server import BACKLOG
from inglenook.server.connections import PER_ADDRESS
from inglenook.server.engine_link import FIRST_API_REQUEST_ID
from tests.helpers.api import (
    Served,
    Watch,
    chat_body,
    first_event,
    open_stream,
    request,
    sent_stream,
    serving,
)

LONG = " ".join(f"w{i}" for i in range(400))  # 400 tokens at 20 ms: 8 s unless stopped
TOKEN = "s3cret-token-for-tests"


class Script:
    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, default: dict[str, Any] | None = None,
              replies: list[dict[str, Any]] | None = None) -> None:
        self.path.write_text(json.dumps({
            "default": default or {"text": "Echo: {last}", "token_ms": 0},
            "replies": replies or [{"match": "long", "text": LONG, "token_ms": 20}]}))


@pytest.fixture(scope="module")
def fake(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[EngineClient, Script]]:
    folder = tmp_path_factory.mktemp("fake-engine")
    script = Script(folder / "script.json")
    script.write()
    client = EngineClient(log_path=folder / "engine.log",
                          command=[sys.executable, "-m", "tests.helpers.fake_host",
                                   str(script.path)])
    client.load(LoadParams(str(bundled_model)))
    yield client, script
    client.close()


@pytest.fixture()
def served(fake: tuple[EngineClient, Script]) -> Iterator[Served]:
    fake[1].write()
    with serving(fake[0], max_body_bytes=64 * 1024) as s:
        yield s


@pytest.fixture()
def api(served: Served) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=served.base_url, api_key="unused", max_retries=0) as client:
        yield client


# ---- the openai client ------------------------------------------------------------------------
def test_models_lists_the_loaded_model(api: openai.OpenAI, bundled_model: Path) -> None:
    (model,) = api.models.list().data
    assert model.id == bundled_model.stem and model.owned_by == "inglenook"
    assert api.models.retrieve(model.id).id == model.id


def test_chat_without_streaming(api: openai.OpenAI) -> None:
    reply = api.chat.completions.create(
        model="", messages=[{"role": "user", "content": "hello there"}], seed=3)
    (choice,) = reply.choices
    assert choice.message.content == "Echo: hello there"
    assert choice.message.role == "assistant" and choice.finish_reason == "stop"
    assert reply.object == "chat.completion" and reply.id.startswith("chatcmpl-")
    assert reply.usage is not None and reply.usage.completion_tokens == 3
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + 3


def test_chat_streaming_with_usage(api: openai.OpenAI) -> None:
    chunks = list(api.chat.completions.create(
        model="", messages=[{"role": "user", "content": "one two"}], stream=True,
        stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Echo: one two"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert not chunks[-1].choices and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 3
    assert len({c.id for c in chunks}) == 1


def test_max_tokens_ends_with_length(api: openai.OpenAI) -> None:
    reply = api.chat.completions.create(
        model="", messages=[{"role": "user", "content": "a b c d e f"}], max_tokens=2)
    assert reply.choices[0].finish_reason == "length"
    assert reply.choices[0].message.content == "Echo: a "


def test_completions_streaming_and_not(api: openai.OpenAI) -> None:
    reply = api.completions.create(model="", prompt="Once upon")
    assert reply.choices[0].text == "Echo: Once upon" and reply.object == "text_completion"
    streamed = "".join(c.choices[0].text for c in api.completions.create(
        model="", prompt="Once upon", stream=True))
    assert streamed == "Echo: Once upon"


def test_an_engine_error_is_a_clear_error_not_a_traceback(
        served: Served, fake: tuple[EngineClient, Script], api: openai.OpenAI) -> None:
    fake[1].write(replies=[{"match": "boom", "error": "The engine failed: kaput"}])
    with pytest.raises(openai.InternalServerError) as caught:
        api.chat.completions.create(model="", messages=[{"role": "user", "content": "boom"}])
    assert "kaput" in str(caught.value) and "Traceback" not in str(caught.value)
    assert served.server.status().last_error == "The engine failed: kaput"
    api.models.list()
    api.chat.completions.create(model="", messages=[{"role": "user", "content": "fine"}])
    status = served.server.status()
    assert status.last_error == ""  # an error is the last one until a request succeeds
    assert status.requests == len(status.recent) == 3  # what its log shows (issue 35)


def test_without_a_model_requests_get_503_and_no_models_are_listed(tmp_path: Path) -> None:
    client = EngineClient(log_path=tmp_path / "engine.log")  # never started: nothing loaded
    with serving(client) as s:
        assert request(s.port, "GET", "/v1/models").json()["data"] == []
        response = request(s.port, "POST", "/v1/chat/completions", chat_body())
        assert response.status == 503
        assert response.json()["error"]["code"] == "model_not_loaded"


def test_an_engine_crash_mid_reply_is_an_error_and_the_owner_is_told(
        bundled_model: Path, tmp_path: Path) -> None:
    script = Script(tmp_path / "script.json")
    script.write(replies=[{"match": "crash", "text": "one two three", "crash": True}])
    client = EngineClient(log_path=tmp_path / "engine.log", command=[
        sys.executable, "-m", "tests.helpers.fake_host", str(script.path)])
    client.load(LoadParams(str(bundled_model)))
    lost: Watch[str] = Watch("")
    try:
        with serving(client, on_engine_lost=lost.update) as s:
            response = request(s.port, "POST", "/v1/chat/completions", chat_body("crash"))
            assert response.status == 503
            assert response.json()["error"]["code"] == "engine_unavailable"
            assert lost.wait_for(bool)
            assert request(s.port, "POST", "/v1/chat/completions",
                           chat_body("again")).json()["error"]["code"] == "model_not_loaded"
    finally:
        client.close()


def test_too_many_requests_at_once_get_503(fake: tuple[EngineClient, Script]) -> None:
    with serving(fake[0], max_pending=1) as s:
        gate = threading.Event()
        s.scheduler.submit(Job(gate.wait, owner="window", request_id=1))
        try:
            with sent_stream(s.port, chat_body("first")):
                s.queue.wait_for(lambda q: len(q.waiting) == 1)
                busy = request(s.port, "POST", "/v1/chat/completions", chat_body("second"))
                assert busy.status == 503
                assert busy.json()["error"]["code"] == "server_busy"
        finally:
            gate.set()


# ---- security defaults ------------------------------------------------------------------------
@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.test",
                                  "0.0.0.0:{port}", ""])
def test_a_foreign_host_header_is_refused(served: Served, host: str) -> None:
    response = request(served.port, "GET", "/v1/models",
                       headers={"Host": host.format(port=served.port)})
    assert response.status == 403
    assert response.json()["error"]["code"] == "host_not_allowed"


@pytest.mark.parametrize("host", ["localhost:{port}", "127.0.0.1:{port}", "LOCALHOST",
                                  "[::1]:{port}"])
def test_own_host_names_are_answered(served: Served, host: str) -> None:
    response = request(served.port, "GET", "/v1/models",
                       headers={"Host": host.format(port=served.port)})
    assert response.status == 200


def test_a_foreign_origin_gets_no_cors_header_and_no_reply(served: Served) -> None:
    response = request(served.port, "POST", "/v1/chat/completions", chat_body(),
                       headers={"Origin": "https://evil.example", "Content-Type": "text/plain"})
    assert response.status == 403
    assert "access-control-allow-origin" not in response.headers
    preflight = request(served.port, "OPTIONS", "/v1/chat/completions", headers={
        "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert preflight.status == 403 and "access-control-allow-origin" not in preflight.headers
    assert served.status.value.active == 0 and served.scheduler.state().running is None


def test_a_listed_origin_gets_exactly_its_own_cors_header(
        fake: tuple[EngineClient, Script]) -> None:
    origin = "http://localhost:3000"
    with serving(fake[0], cors_origins=(origin,)) as s:
        preflight = request(s.port, "OPTIONS", "/v1/chat/completions", headers={
            "Origin": origin, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, x-stainless-os"})
        assert preflight.status == 204
        assert preflight.headers["access-control-allow-origin"] == origin
        assert "x-stainless-os" in preflight.headers["access-control-allow-headers"]
        response = request(s.port, "POST", "/v1/chat/completions", chat_body(),
                           headers={"Origin": origin})
        assert response.status == 200
        assert response.headers.get_all("access-control-allow-origin") == [origin]
        other = request(s.port, "GET", "/v1/models", headers={"Origin": "http://localhost:3001"})
        assert other.status == 403 and "access-control-allow-origin" not in other.headers
        no_origin = request(s.port, "GET", "/v1/models")
        assert "access-control-allow-origin" not in no_origin.headers


def test_a_token_is_required_when_set(fake: tuple[EngineClient, Script]) -> None:
    with serving(fake[0], token=TOKEN) as s:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN},
                        {"Authorization": f"Basic {TOKEN}"}):
            response = request(s.port, "GET", "/v1/models", headers=headers)
            assert response.status == 401
            assert response.json()["error"]["code"] == "invalid_api_key"
        assert request(s.port, "GET", "/v1/models",
                       headers={"Authorization": f"Bearer {TOKEN}"}).status == 200
        with openai.OpenAI(base_url=s.base_url, api_key=TOKEN, max_retries=0) as good:
            assert good.chat.completions.create(
                model="", messages=[{"role": "user", "content": "x"}]).choices
        with openai.OpenAI(base_url=s.base_url, api_key="nope", max_retries=0) as bad, \
                pytest.raises(openai.AuthenticationError):
            bad.models.list()


def test_a_network_address_without_a_token_is_refused_at_start_up(
        fake: tuple[EngineClient, Script]) -> None:
    with pytest.raises(ConfigError, match="token"):
        ApiServer(None, fake[0], ServerConfig(host="0.0.0.0"))  # type: ignore[arg-type]


def test_serve_refuses_a_network_address_without_a_token(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INGLENOOK_API_TOKEN", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--model", "/nonexistent.gguf"]) == 1
    assert "token" in capsys.readouterr().err
    assert main(["serve", "--cors-origin", "*", "--model", "/nonexistent.gguf"]) == 1


# ---- bad requests: 4xx with an OpenAI error body, never a 500 ---------------------------------
@pytest.mark.parametrize(("body", "status"), [
    (b"{not json", 400),
    (b'{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}', 400),
    (json.dumps(chat_body(max_tokens=-5)).encode(), 400),
    (json.dumps(chat_body(temperature="hot")).encode(), 400),
    (json.dumps({"messages": [{"role": "root", "content": "x"}]}).encode(), 400),
    (json.dumps({"messages": [{"role": "user", "content": {"a": 1}}]}).encode(), 400),
    (b"[1, 2]", 400),
    (b"", 400),
])
def test_bad_requests_get_4xx_error_bodies(served: Served, body: bytes, status: int) -> None:
    response = request(served.port, "POST", "/v1/chat/completions", body)
    assert response.status == status
    error = response.json()["error"]
    assert error["message"] and error["type"] == "invalid_request_error"
    assert served.scheduler.state().running is None


def test_a_huge_body_is_refused_with_413(served: Served) -> None:
    big = json.dumps(chat_body("x" * 100_000)).encode()
    assert request(served.port, "POST", "/v1/chat/completions", big).status == 413
    chunked = request(served.port, "POST", "/v1/chat/completions",
                      (big[i:i + 8192] for i in range(0, len(big), 8192)))
    assert chunked.status == 413
    assert chunked.json()["error"]["code"] == "body_too_large"


def test_unknown_paths_and_methods_get_error_bodies(served: Served) -> None:
    missing = request(served.port, "GET", "/v1/nothing")
    assert missing.status == 404 and missing.json()["error"]["message"]
    wrong = request(served.port, "GET", "/v1/chat/completions")
    assert wrong.status == 405 and wrong.json()["error"]["message"]


# ---- clients that go away -----------------------------------------------------------------------
def test_a_client_leaving_mid_stream_stops_its_reply(served: Served) -> None:
    with open_stream(served.port, chat_body("long story")) as stream:
        first_event(stream)
        assert served.scheduler.state().running is not None
    ended = served.status.wait_for(lambda s: s.requests == 1 and s.active == 0)
    assert ended.active == 0 and ended.tokens < 100  # of 400, at 20 ms each
    served.queue.wait_for(lambda q: q.running is None)
    assert request(served.port, "POST", "/v1/chat/completions", chat_body("still")).status == 200


def test_a_client_leaving_while_it_waits_leaves_the_queue(served: Served) -> None:
    gate = threading.Event()
    # The window's chat, generating.
    served.scheduler.submit(Job(gate.wait, owner="window", request_id=1))
    try:
        with sent_stream(served.port, chat_body("queued")):
            served.queue.wait_for(lambda q: any(o.startswith("api:") for o, _ in q.waiting))
        served.queue.wait_for(lambda q: not q.waiting)
        assert served.status.wait_for(lambda s: s.requests == 1).tokens == 0
    finally:
        gate.set()


def test_a_hundred_aborted_streams_and_the_server_still_answers(served: Served) -> None:
    for _ in range(100):
        with open_stream(served.port, chat_body("long story")) as stream:
            first_event(stream)
    served.status.wait_for(lambda s: s.requests == 100 and s.active == 0)
    served.queue.wait_for(lambda q: q.running is None and not q.waiting)
    assert served.server.link.pending == 0
    response = request(served.port, "POST", "/v1/chat/completions", chat_body("after"))
    assert response.status == 200
    assert response.json()["choices"][0]["message"]["content"] == "Echo: after"


# ---- one engine, many clients -----------------------------------------------------------------
def test_two_clients_at_once_take_turns_and_both_complete(served: Served) -> None:
    gate = threading.Event()
    served.scheduler.submit(Job(gate.wait, owner="window", request_id=1))
    results: dict[str, str] = {}

    def ask(user: str, text: str) -> None:
        response = request(served.port, "POST", "/v1/chat/completions",
                           chat_body(text, user=user))
        results[text] = response.json()["choices"][0]["message"]["content"]

    threads = [threading.Thread(target=ask, args=("a", f"a{i}")) for i in range(3)]
    try:
        for t in threads:
            t.start()
        served.queue.wait_for(lambda q: len(q.waiting) == 3)
        threads.append(threading.Thread(target=ask, args=("b", "b0")))
        threads[-1].start()
        waiting = served.queue.wait_for(lambda q: len(q.waiting) == 4).waiting
        # b arrived last but goes second: owners take turns, not first come first served
        assert [owner for owner, _ in waiting] == ["api:a", "api:b", "api:a", "api:a"]
        assert all(rid >= FIRST_API_REQUEST_ID for _, rid in waiting)
    finally:
        gate.set()
        for t in threads:
            t.join(30)
    assert results == {"a0": "Echo: a0", "a1": "Echo: a1", "a2": "Echo: a2", "b0": "Echo: b0"}
    ran = [q.running[0] for q in served.queue.history if q.running is not None]
    order = [owner for i, owner in enumerate(ran) if i == 0 or ran[i - 1] != owner]
    assert order == ["window", "api:a", "api:b", "api:a"]


def test_stop_ends_open_streams_and_frees_the_engine(fake: tuple[EngineClient, Script]) -> None:
    with serving(fake[0]) as s, open_stream(s.port, chat_body("long story")) as stream:
        first_event(stream)
        s.server.stop()
        rest = stream.read()
        assert b'"code":"cancelled"' in rest
        assert not s.server.status().running
        s.queue.wait_for(lambda q: q.running is None)


# ---- connections that never become requests ---------------------------------------------------
# Opens `count` connections to the port, each sending half a request head, holds them, says how
# many it opened, and closes them all when its stdin closes.
HALF_OPEN = textwrap.dedent("""
    import resource, socket, sys
    port, count = int(sys.argv[1]), int(sys.argv[2])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 100), hard))
    held = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /v1/models HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n")
        held.append(s)
    print(len(held), flush=True)
    sys.stdin.read()
""")


@contextlib.contextmanager
def half_open(port: int, count: int) -> Iterator[None]:
    attacker = subprocess.Popen([sys.executable, "-c", HALF_OPEN, str(port), str(count)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert attacker.stdout is not None
        assert attacker.stdout.readline().strip() == str(count)
        yield
    finally:
        attacker.communicate(timeout=60)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_half_open_connections_do_not_shut_out_clients(served: Served) -> None:
    with half_open(served.port, 300):
        answered = request(served.port, "GET", "/v1/models")
        assert answered.status == 200  # was 503: uvicorn counted all 300 against its limit


def test_more_connections_than_file_descriptors_do_not_use_them_up(
        fake: tuple[EngineClient, Script]) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        with serving(fake[0]) as s:
            before = open_fds()
            # Room for what the server may hold, and some (the usual default of 1,024 held
            # 1,100 connections before; the suite itself may already hold hundreds).
            room = PER_ADDRESS + 2 * BACKLOG + 64
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, before + room), hard))
            with half_open(s.port, room + 150):
                held = open_fds() - before
                answered = request(s.port, "GET", "/v1/models")
            assert answered.status == 200
            # The rest were closed as they came: at most a backlog of them at a time.
            assert held <= PER_ADDRESS + 2 * BACKLOG
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_client_that_never_finishes_its_request_is_closed(
        fake: tuple[EngineClient, Script], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connections, "HEAD_TIMEOUT_S", 0.5)
    with serving(fake[0]) as s, socket.create_connection(("127.0.0.1", s.port)) as slow:
        slow.settimeout(20)
        slow.sendall(b"GET /v1/models HTTP/1.1\r\n")
        slow.sendall(b"Host: 127.0.0.1\r\n")  # a header now and then: never the blank line
        assert slow.recv(1024) == b""  # closed by the server, without an answer


def test_a_body_that_trickles_is_refused_with_408(
        served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replying, "BODY_TIMEOUT_S", 0.5)
    with socket.create_connection(("127.0.0.1", served.port)) as slow:
        slow.settimeout(20)
        slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"mod")
        answer = b""
        while b"body_timeout" not in answer and (chunk := slow.recv(4096)):
            answer += chunk  # the head and the body may come in two pieces
    assert answer.startswith(b"HTTP/1.1 408 ") and b"body_timeout" in answer
