"""RemoteClient, the engine router and `inglenook chat --endpoint` against Inglenook's own API
server (ApiServer on loopback) over a fake engine host (scripted replies, no llama.cpp)."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inglenook.cli import main
from inglenook.core.load import LoadParams, ModelInfo
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient, EngineError
from inglenook.engine.providers import ProviderStore, model_ref
from inglenook.engine.remote import NO_INSPECT, RemoteClient
from inglenook.engine.remote_api import Endpoint, RemoteError
from inglenook.engine.router import EngineRouter
from tests.helpers import keyrings
from tests.helpers.api import Served, serving
from tests.helpers.keyrings import MemoryKeyring
from tests.helpers.peer_server import free_port

memory_keyring = keyrings.memory_keyring
TOKEN = "remote-test-token-0123456789"
LONG = " ".join(f"w{i}" for i in range(400))  # 400 words at 20 ms: 8 s unless stopped


def fake_client(folder: Path, script: Path) -> EngineClient:
    return EngineClient(log_path=folder / "engine.log",
                        command=[sys.executable, "-m", "tests.helpers.fake_host", str(script)])


@pytest.fixture(scope="module")
def engine(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[EngineClient]:
    folder = tmp_path_factory.mktemp("remote-fake")
    script = folder / "script.json"
    script.write_text(json.dumps({
        "default": {"text": "Echo: {last}", "token_ms": 0},
        "replies": [{"match": "long", "text": LONG, "token_ms": 20}]}))
    client = fake_client(folder, script)
    client.load(LoadParams(str(bundled_model)))
    yield client
    client.close()


@pytest.fixture(scope="module")
def served(engine: EngineClient) -> Iterator[Served]:
    with serving(engine, token=TOKEN) as s:
        yield s


@pytest.fixture
def remote(served: Served) -> Iterator[RemoteClient]:
    client = RemoteClient(Endpoint(served.base_url, TOKEN, "Other Inglenook"))
    yield client
    client.close()


def ask(client: Any, text: str, rid: int = 1, **sampling: Any) -> tuple[str, list[Any]]:
    events = list(client.generate(GenerationRequest(
        rid, (Message("user", text),), SamplingParams(**sampling))))
    assert sum(isinstance(e, p.Finished) for e in events) == 1
    assert isinstance(events[-1], p.Finished)
    return "".join(e.text for e in events if isinstance(e, p.Delta)), events


def test_load_chooses_a_listed_model_and_knows_the_server(
        remote: RemoteClient, bundled_model: Path) -> None:
    info = remote.load(LoadParams(""))
    assert info.name == bundled_model.stem and info.path == bundled_model.stem
    assert remote.server == "inglenook" and "Inglenook" in info.architecture
    assert remote.model == info and remote.alive and remote.pid is None
    assert {"top_k", "min_p", "repeat_penalty"} <= remote.accepted_sampling
    with pytest.raises(RemoteError, match=f"does not offer the model 'nope'.*{bundled_model.stem}"):
        remote.load(LoadParams("nope"))


def test_a_streamed_reply_with_the_servers_token_counts(remote: RemoteClient) -> None:
    remote.load(LoadParams(""))
    text, events = ask(remote, "Hello there", temperature=0.0, top_k=5, min_p=0.2,
                       repeat_penalty=1.3, seed=9, max_tokens=100, stop=tuple("vwxyz"))
    assert text == "Echo: Hello there"
    assert isinstance(events[0], p.Started)
    (stats,) = [e.stats for e in events if isinstance(e, p.ReplyStats)]
    assert stats.generated_tokens == 3 and stats.prompt_tokens > 0  # usage from the server
    assert events[-1].finish == p.Finish("stop")


def test_max_tokens_ends_with_length(remote: RemoteClient) -> None:
    remote.load(LoadParams(""))
    text, events = ask(remote, "Hello there friend", max_tokens=2)
    assert text == "Echo: Hello " and events[-1].finish.reason == "length"


def test_stop_from_another_thread_ends_the_reply_and_the_servers_generation(
        remote: RemoteClient, served: Served) -> None:
    remote.load(LoadParams(""))
    events: list[Any] = []
    for event in remote.generate(GenerationRequest(7, (Message("user", "a long one"),))):
        events.append(event)
        if isinstance(event, p.Delta):
            stopper = threading.Thread(target=remote.cancel, args=(7,))
            stopper.start()
            stopper.join()
    assert events[-1] == p.Finished(7, p.Finish("cancelled"))
    assert len([e for e in events if isinstance(e, p.Delta)]) < 100  # not the 400 words
    served.queue.wait_for(lambda q: q.running is None and not q.waiting)  # the server stopped
    assert ask(remote, "still there?")[0] == "Echo: still there?"


def test_a_stop_before_the_request_runs_sends_nothing(remote: RemoteClient,
                                                      served: Served) -> None:
    remote.load(LoadParams(""))
    before = served.status.value.requests
    remote.cancel(11)
    _, events = ask(remote, "Hello", rid=11)
    assert events == [p.Finished(11, p.Finish("cancelled"))]
    assert served.status.value.requests == before


def test_a_missing_or_wrong_key_is_explained(served: Served) -> None:
    for key, hint in (("", "The server wants an API key"), ("wrong", "Check the API key")):
        client = RemoteClient(Endpoint(served.base_url, key))
        try:
            with pytest.raises(RemoteError, match=rf"refused the model list \(HTTP 401\)\. {hint}"):
                client.load(LoadParams(""))
        finally:
            client.close()


def test_nobody_listening_is_explained_at_load_and_in_a_reply() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    client = RemoteClient(Endpoint(url))
    try:
        with pytest.raises(RemoteError, match=r"Cannot connect to 127\.0\.0\.1.*server running"):
            client.load(LoadParams("m"))
        client.model = ModelInfo("m", "m", "remote", 0, 0, 0, 0, 0, False, False, "", "gguf")
        _, events = ask(client, "Hello")
        assert events[-1].finish.reason == "error"
        assert "Cannot connect" in events[-1].finish.message
        assert "kept" not in events[-1].finish.message  # nothing arrived to keep
    finally:
        client.close()


def test_the_prompt_view_is_not_available(remote: RemoteClient) -> None:
    remote.load(LoadParams(""))
    with pytest.raises(EngineError, match="not available for a remote engine"):
        remote.inspect(GenerationRequest(1, (Message("user", "x"),)))
    assert "server applies its own chat template" in NO_INSPECT
    assert not remote.can_embed
    with pytest.raises(EngineError, match="from a local model"):
        remote.embed(["x"])


# ---- the router: one engine object for the window -----------------------------------------------
@pytest.fixture
def router(served: Served, bundled_model: Path, tmp_path: Path,
           memory_keyring: MemoryKeyring) -> Iterator[tuple[EngineRouter, str]]:
    store = ProviderStore()
    provider = store.save("Other Inglenook", served.base_url, TOKEN)
    script = tmp_path / "local.json"
    script.write_text(json.dumps({"default": {"text": "Local: {last}", "token_ms": 0}}))
    r = EngineRouter(fake_client(tmp_path, script), store)
    yield r, provider.ref(bundled_model.stem)
    r.close()


def test_the_router_switches_between_the_local_engine_and_a_remote_one(
        router: tuple[EngineRouter, str], bundled_model: Path) -> None:
    r, ref = router
    r.start()
    local = r.load(LoadParams(str(bundled_model)))
    assert not r.is_remote and r.accepted_sampling is None
    assert ask(r, "hi")[0] == "Local: hi"
    info = r.load(LoadParams(ref))
    assert r.is_remote and info.path == ref and r.model == info
    assert r.local.model is None and r.local.alive  # memory freed; the host stays
    assert ask(r, "hi")[0] == "Echo: hi"
    with pytest.raises(EngineError, match="not available for a remote engine"):
        r.inspect(GenerationRequest(1, (Message("user", "x"),)))
    assert r.load(LoadParams(str(bundled_model))).path == local.path
    assert r.remote is None and ask(r, "again")[0] == "Local: again"


def test_the_router_explains_an_endpoint_gone_or_a_key_not_kept(
        router: tuple[EngineRouter, str]) -> None:
    r, ref = router
    with pytest.raises(EngineError, match="no longer in Remote engines"):
        r.load(LoadParams(model_ref("removed", "m")))
    provider = r.providers.providers()[0]
    r.providers.save(provider.name, provider.base_url, "session-key", provider_id=provider.id,
                     key_place="session")
    keyrings.remote_keys.forget_for_session(provider.account)  # a new session
    with pytest.raises(EngineError, match="kept for one session only"):
        r.load(LoadParams(ref))


# ---- the command line ---------------------------------------------------------------------------
def test_cli_chat_with_an_endpoint(served: Served, bundled_model: Path,
                                   capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    code = main(["chat", "--endpoint", served.base_url, "--api-key", TOKEN,
                 "--model", bundled_model.stem, "--stats", "How are you?"])
    out, err = capsys.readouterr()
    assert code == 0 and out == "Echo: How are you?\n" and "tokens" in err
    monkeypatch.setenv("INGLENOOK_REMOTE_API_KEY", TOKEN)
    assert main(["chat", "--endpoint", served.url, "Hi"]) == 0  # /v1 added, first model
    assert capsys.readouterr().out == "Echo: Hi\n"


def test_cli_chat_with_a_saved_endpoint_and_its_stored_key(
        served: Served, memory_keyring: MemoryKeyring,
        capsys: pytest.CaptureFixture[str]) -> None:
    ProviderStore().save("Other Inglenook", served.base_url, TOKEN)
    assert main(["chat", "--endpoint", "other inglenook", "Hi"]) == 0
    assert capsys.readouterr().out == "Echo: Hi\n"


def test_cli_chat_says_why_an_endpoint_fails(served: Served,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chat", "--endpoint", served.base_url, "--api-key", "wrong", "Hi"]) == 1
    assert "refused the model list (HTTP 401). Check the API key." in capsys.readouterr().err
    assert main(["chat", "--endpoint", "ftp://x", "Hi"]) == 2
    assert "--endpoint: The address must start with http://" in capsys.readouterr().err
