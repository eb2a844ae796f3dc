"""The API with several models and several principals, on the real engine: a model a request
names is loaded for it (a host of its own) and unloaded after its idle time-out; one model's
engine killed while another streams; `n` choices; and a client that guesses another's prompt
learns nothing from `cached_tokens`."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest

from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.engine.client import EngineClient
from inglenook.engine.router import EngineRouter
from inglenook.engine.scheduler import Scheduler
from inglenook.server import ApiServer, ServerConfig
from tests.helpers.api import Watch
from tests.integration.conftest import GREEDY

TOKEN_A, TOKEN_B = "token-of-the-editor-0001", "token-of-the-agent-00002"
SAMPLING: dict[str, Any] = {"temperature": 0, "seed": 42, "repeat_penalty": 1.0}
SECRET = ("You keep notes for the user. Notes: the door code is {pin}. The wifi password is "
          "kept elsewhere. Never tell anyone the code unless they ask for it by name. "
          + " ".join(f"Note {i}: the plant on shelf {i} needs water every {i + 2} days."
                     for i in range(8)))


@contextmanager
def served_router(router: EngineRouter, **config: Any) -> Iterator[str]:
    scheduler = Scheduler(router.cancel, lanes=router.lanes)
    server = ApiServer(scheduler, router, ServerConfig(port=0, **config))
    try:
        yield server.start() + "/v1"
    finally:
        server.stop()
        scheduler.close()


@pytest.fixture(scope="module")
def other_model(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("library") / "other-model.gguf"
    shutil.copyfile(bundled_model, path)
    return path


@pytest.fixture
def router(bundled_model: Path, other_model: Path, tmp_path: Path) -> Iterator[EngineRouter]:
    r = EngineRouter(EngineClient(log_path=tmp_path / "engine.log"),
                     library=lambda: [(other_model.stem, str(other_model)),
                                      (bundled_model.stem, str(bundled_model))],
                     api_params=lambda path: LoadParams(path, n_ctx=1024, n_slots=1,
                                                        prompt_lookup=False))
    r.load(LoadParams(str(bundled_model), n_ctx=2048, n_slots=2, prompt_lookup=False))
    yield r
    r.close()


def client(url: str, token: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=token, max_retries=0, timeout=300)


def test_a_model_named_by_a_request_is_loaded_for_it_and_unloaded_when_idle(
        router: EngineRouter, other_model: Path, bundled_model: Path) -> None:
    changes: Watch[int] = Watch(0)
    router.on_change = lambda: changes.update(len(router.loaded_models()))
    with served_router(router) as url, client(url) as api:
        listed = [m.id for m in api.models.list().data]
        assert listed[0] == bundled_model.stem and other_model.stem in listed
        reply = api.chat.completions.create(
            model=other_model.stem, messages=[{"role": "user", "content": "Hi"}],
            max_tokens=4, extra_body={**SAMPLING, "keep_alive": 1})
        assert reply.model == other_model.stem and reply.choices[0].message.content
        names = [m.name for m in router.loaded_models()]
        assert names == [bundled_model.stem, other_model.stem]
        hosted = router.loaded_models()[1]
        assert not hosted.by_window and hosted.keep_alive_s == 1
        assert router.local.pid is not None
        # Unloaded once idle past its keep_alive (the window's model stays).
        changes.wait_for(lambda n: n == 1, timeout=30)
        assert [m.name for m in router.loaded_models()] == [bundled_model.stem]


def test_one_models_engine_killed_while_another_streams(
        router: EngineRouter, other_model: Path) -> None:
    with served_router(router) as url, client(url) as api:
        streamed: dict[str, Any] = {}
        started = threading.Event()

        def long_reply() -> None:
            text, finish = [], None
            for chunk in api.chat.completions.create(
                    model="", messages=[{"role": "user", "content": "Tell a long story."}],
                    max_tokens=160, stream=True, extra_body=SAMPLING):
                if chunk.choices and chunk.choices[0].delta.content:
                    text.append(chunk.choices[0].delta.content)
                    started.set()
                if chunk.choices and chunk.choices[0].finish_reason:
                    finish = chunk.choices[0].finish_reason
            streamed.update(text="".join(text), finish=finish)

        window_model = threading.Thread(target=long_reply)
        window_model.start()
        assert started.wait(120)
        with pytest.raises(openai.APIError):
            for chunk in api.chat.completions.create(
                    model=other_model.stem, stream=True, max_tokens=400,
                    messages=[{"role": "user", "content": "Tell another long story."}],
                    extra_body=SAMPLING):
                if chunk.choices and chunk.choices[0].delta.content:
                    hosted = router.engine_of(str(other_model))
                    assert hosted is not None and hosted is not router.local
                    hosted.kill()  # fault injection: that engine dies mid-reply
        window_model.join(300)
        assert streamed["finish"] == "length" and streamed["text"]
        # The model that died is loaded again by the next request naming it.
        again = api.chat.completions.create(
            model=other_model.stem, messages=[{"role": "user", "content": "Hi"}],
            max_tokens=4, extra_body=SAMPLING)
        assert again.choices[0].message.content


def test_n_choices_are_n_sequences_each_its_own_sample(router: EngineRouter) -> None:
    with served_router(router) as url, client(url) as api:
        messages = [{"role": "user", "content": "Name a fruit and say why you like it."}]
        sampled = {"temperature": 0.9, "repeat_penalty": 1.0}
        many = api.chat.completions.create(model="", messages=messages, n=3, seed=5,  # type: ignore[arg-type]
                                           max_tokens=16, extra_body=sampled)
        assert [c.index for c in many.choices] == [0, 1, 2]
        assert many.usage is not None and many.usage.completion_tokens > 16
        for i, choice in enumerate(many.choices):
            one = api.chat.completions.create(model="", messages=messages, seed=5 + i,  # type: ignore[arg-type]
                                              max_tokens=16, extra_body=sampled)
            assert choice.message.content == one.choices[0].message.content
        texts: dict[int, str] = {}
        for chunk in api.chat.completions.create(model="", messages=messages, n=2, seed=5,  # type: ignore[arg-type]
                                                 max_tokens=16, stream=True,
                                                 extra_body=sampled):
            for c in chunk.choices:
                texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
        assert texts == {0: many.choices[0].message.content, 1: many.choices[1].message.content}


def probe(api: openai.OpenAI, pin: str) -> int:
    """cached_tokens of a chat that guesses the code."""
    reply = api.chat.completions.create(
        model="", messages=[{"role": "system", "content": SECRET.format(pin=pin)},  # type: ignore[arg-type]
                            {"role": "user", "content": "What is on the list?"}],
        max_tokens=2, extra_body=SAMPLING)
    assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
    return int(reply.usage.prompt_tokens_details.cached_tokens or 0)


def test_a_guess_at_another_tokens_prompt_gets_the_same_figures_right_or_wrong(
        router: EngineRouter) -> None:
    with served_router(router, token=f"{TOKEN_A} {TOKEN_B}") as url, \
            client(url, TOKEN_A) as victim, client(url, TOKEN_B) as attacker:
        probe(victim, "4827")  # the victim's prompt holds the code
        first = probe(attacker, "0000")
        wrong, right = probe(attacker, "1111"), probe(attacker, "4827")
        assert first == 0  # nothing of the victim's was reused
        assert wrong == right  # each only reuses the attacker's own earlier guess
        # Within one principal the same guess does tell: the data is its own.
        mine_wrong, mine_right = probe(victim, "9999"), probe(victim, "4827")
        assert mine_right > mine_wrong


def test_the_windows_chats_are_never_reused_for_an_api_request(router: EngineRouter) -> None:
    """A server without tokens: every API client is one principal, the window another."""
    chat = (Message("system", SECRET.format(pin="4827")), Message("user", "What is on the list?"))
    events = list(router.generate(GenerationRequest(1, chat, GREEDY.replace(max_tokens=2),
                                                    conversation="chat:1")))
    assert events
    with served_router(router) as url, client(url) as api:
        first, wrong, right = probe(api, "0000"), probe(api, "1111"), probe(api, "4827")
        assert first == 0 and wrong == right


def test_an_embedding_model_named_by_a_request_loads_at_its_own_context(
        bundled_model: Path, minilm_model: Path, tmp_path: Path) -> None:
    """`inglenook serve --ctx 2048`: the MiniLM embedder (trained on 512) a request names is
    loaded at 512, not refused as beyond its training (on main: a 400 naming 512 tokens)."""
    from inglenook.cli.serve import api_params

    served = LoadParams(str(bundled_model), n_ctx=2048, n_slots=1, prompt_lookup=False)
    r = EngineRouter(EngineClient(log_path=tmp_path / "engine.log"),
                     library=lambda: [(minilm_model.stem, str(minilm_model))],
                     api_params=api_params(served))
    try:
        r.load(served)
        with served_router(r) as url, client(url) as api:
            made = api.embeddings.create(model=minilm_model.stem, input="a lighthouse")
            assert len(made.data[0].embedding) == 384
            hosted = r.engine_of(str(minilm_model))
            assert hosted is not None and hosted.model is not None
            assert hosted.model.n_ctx == 512
    finally:
        r.close()
