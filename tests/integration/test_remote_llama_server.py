"""A remote engine that is not Inglenook: llama-cpp-python's own OpenAI-compatible server
(`python -m llama_cpp.server`), started here on loopback with the bundled model. Streaming,
stop strings, Stop, a wrong key, and the server killed in the middle of a reply."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from inglenook.cli import main
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.remote import RemoteClient
from inglenook.engine.remote_api import Endpoint, RemoteError
from inglenook.engine.remote_stream import KEPT
from tests.helpers.peer_server import PeerServer, llama_cpp_server

PROMPT = "Name three colours of the rainbow."
GREEDY = SamplingParams(temperature=0.0, seed=42, repeat_penalty=1.0, max_tokens=32)
KEY = "peer-server-key-0123456789"


@pytest.fixture(scope="module")
def peer(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerServer]:
    with llama_cpp_server(bundled_model, tmp_path_factory.mktemp("peer")) as server:
        yield server


@pytest.fixture
def remote(peer: PeerServer) -> Iterator[RemoteClient]:
    client = RemoteClient(Endpoint(peer.url, name="peer"))
    client.load(LoadParams(""))
    yield client
    client.close()


def reply(client: RemoteClient, text: str, rid: int = 1,
          sampling: SamplingParams = GREEDY) -> tuple[str, list[Any]]:
    events = list(client.generate(GenerationRequest(rid, (Message("user", text),), sampling)))
    assert sum(isinstance(e, p.Finished) for e in events) == 1
    assert isinstance(events[-1], p.Finished)
    return "".join(e.text for e in events if isinstance(e, p.Delta)), events


def servers_own_answer(peer: PeerServer, **body: Any) -> dict[str, Any]:
    """The same request, not streamed, straight to the server."""
    with httpx2.Client(timeout=120, trust_env=False) as client:
        response = client.post(f"{peer.url}/chat/completions", json={
            "messages": [{"role": "user", "content": PROMPT}], "temperature": 0.0, "seed": 42,
            "repeat_penalty": 1.0, "max_tokens": 32, **body})
    response.raise_for_status()
    return response.json()["choices"][0]


def test_the_server_is_recognised_and_its_model_chosen(remote: RemoteClient,
                                                       bundled_model: Path) -> None:
    assert remote.server == "llama-cpp-python"
    assert remote.model is not None and remote.model.name == str(bundled_model)
    assert {"top_k", "min_p", "repeat_penalty", "mirostat_mode"} <= remote.accepted_sampling


def test_a_streamed_reply_is_the_servers_own_answer(remote: RemoteClient,
                                                    peer: PeerServer) -> None:
    text, events = reply(remote, PROMPT)
    expected = servers_own_answer(peer)
    assert text and text == expected["message"]["content"]
    assert events[-1].finish.reason == ("length" if expected["finish_reason"] == "length"
                                        else "stop")
    (stats,) = [e.stats for e in events if isinstance(e, p.ReplyStats)]
    assert stats.generated_tokens == len([e for e in events if isinstance(e, p.Delta)])
    assert stats.ttft_s > 0 and stats.seed == 42


def test_stop_strings_and_max_tokens(remote: RemoteClient) -> None:
    full, _ = reply(remote, PROMPT)
    word = full.split()[2]
    stopped, events = reply(remote, PROMPT, sampling=GREEDY.replace(stop=(word,)))
    assert stopped == full[:full.index(word)] and events[-1].finish.reason == "stop"
    short, events = reply(remote, PROMPT, sampling=GREEDY.replace(max_tokens=4))
    assert events[-1].finish.reason == "length" and full.startswith(short)


def test_stop_mid_reply_and_the_server_answers_the_next(remote: RemoteClient) -> None:
    events: list[Any] = []
    request = GenerationRequest(9, (Message("user", "Write a long story about a cat."),),
                                GREEDY.replace(max_tokens=400))
    for event in remote.generate(request):
        events.append(event)
        if sum(isinstance(e, p.Delta) for e in events) == 3:
            remote.cancel(9)
    assert events[-1] == p.Finished(9, p.Finish("cancelled"))
    assert sum(isinstance(e, p.Delta) for e in events) < 400
    text, events = reply(remote, PROMPT, rid=10)
    assert text and events[-1].finish.reason in ("stop", "length")


def test_cli_chat_with_the_endpoint(peer: PeerServer, bundled_model: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chat", "--endpoint", peer.url, "--model", str(bundled_model),
                 "--temperature", "0", "--seed", "42", "--max-tokens", "8", PROMPT]) == 0
    assert capsys.readouterr().out.strip()


@pytest.fixture
def keyed_peer(bundled_model: Path, tmp_path: Path) -> Iterator[PeerServer]:
    with llama_cpp_server(bundled_model, tmp_path, api_key=KEY) as server:
        yield server


def test_a_wrong_key_then_the_server_killed_mid_reply(keyed_peer: PeerServer) -> None:
    wrong = RemoteClient(Endpoint(keyed_peer.url, "not-the-key", "peer"))
    try:
        with pytest.raises(RemoteError, match=r"peer \(127\.0\.0\.1:\d+\) refused the model "
                           r"list \(HTTP 401\)\. Check the API key\. It said: Invalid API key"):
            wrong.load(LoadParams(""))
    finally:
        wrong.close()
    client = RemoteClient(Endpoint(keyed_peer.url, KEY, "peer"))
    try:
        client.load(LoadParams(""))
        events: list[Any] = []
        request = GenerationRequest(3, (Message("user", "Write a long story about a dog."),),
                                    GREEDY.replace(max_tokens=400))
        for event in client.generate(request):
            events.append(event)
            if sum(isinstance(e, p.Delta) for e in events) == 5:
                keyed_peer.kill()
        text = "".join(e.text for e in events if isinstance(e, p.Delta))
        finish = events[-1].finish
        assert sum(isinstance(e, p.Finished) for e in events) == 1
        assert len(text.split()) >= 3  # the partial reply is there
        assert finish.reason == "error"
        assert finish.message.startswith("The connection to peer (127.0.0.1:")
        assert "broke during the reply" in finish.message and finish.message.endswith(KEPT)
        # The next reply says the server is gone rather than hanging.
        _, after = reply(client, PROMPT, rid=4)
        assert after[-1].finish.reason == "error" and "Cannot connect" in after[-1].finish.message
    finally:
        client.close()
