"""The tune request with the real model: it measures, applies the fastest thread counts, and
the chat that was live comes back from its saved state afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.replies import Stats
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from inglenook.engine.host import logical_cores, physical_cores
from inglenook.engine.tune import thread_choices
from tests.integration.conftest import GREEDY, stats_of

CHAT = (Message("user", "Name three rivers in Europe and say in one sentence each why they "
                        "mattered for trade in the Middle Ages."),)


@pytest.fixture(scope="module")
def client(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[EngineClient]:
    engine = EngineClient(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    engine.load(LoadParams(str(bundled_model), n_ctx=2048, n_batch=256))
    yield engine
    engine.close()


def ask(client: EngineClient, rid: int, messages: tuple[Message, ...]) -> tuple[str, Stats]:
    events = list(client.generate(GenerationRequest(rid, messages, GREEDY.replace(max_tokens=32),
                                                    conversation="chat:t")))
    return "".join(e.text for e in events if isinstance(e, p.Delta)), stats_of(events).stats


def test_threads_default_to_physical_cores_for_decoding_and_all_for_prompts(
        client: EngineClient) -> None:
    assert client.model is not None
    assert client.model.n_threads == physical_cores()
    assert client.model.n_threads_batch == logical_cores()


def test_tune_measures_applies_threads_and_keeps_the_chat(client: EngineClient) -> None:
    reply, first = ask(client, 1, CHAT)
    result = client.tune(2, seconds_per_trial=0.05)
    assert not result.error and not result.cancelled and result.applied
    choices = thread_choices(physical_cores(), logical_cores())
    assert result.n_threads in choices and result.n_threads_batch in choices
    assert result.n_batch in (64, 128, 256)
    assert {t.kind for t in result.trials} == {"decode", "prompt"}
    assert all(t.tok_s > 0 for t in result.trials)
    fastest = max(t.tok_s for t in result.trials if t.kind == "decode")
    assert result.decode_tok_s == fastest
    assert client.model is not None
    assert (client.model.n_threads, client.model.n_threads_batch) == (
        result.n_threads, result.n_threads_batch)
    follow_up = (*CHAT, Message("assistant", reply), Message("user", "Which is longest?"))
    _, second = ask(client, 3, follow_up)
    assert second.cache_source == "ram"
    assert second.cached_tokens >= first.prompt_tokens


def test_a_cancelled_tune_says_so_and_changes_nothing(client: EngineClient) -> None:
    assert client.model is not None
    before = client.model
    client.cancel(4)  # before it starts: the host stops it at the first trial
    result = client.tune(4, seconds_per_trial=0.05)
    assert result.cancelled and not result.applied and not result.trials
    assert client.model == before


def test_tune_needs_a_model(tmp_path: Path) -> None:
    engine = EngineClient(log_path=tmp_path / "engine.log")
    try:
        engine.start()
        assert engine.tune(1).error == "No model is loaded."
    finally:
        engine.close()
