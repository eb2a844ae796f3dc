"""A real engine host with the bundled model, shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient

GREEDY = SamplingParams(temperature=0.0, seed=42, repeat_penalty=1.0)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="module")
def engine(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineClient]:
    client = EngineClient(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    client.load(LoadParams(str(bundled_model), n_ctx=4096))
    yield client
    client.close()


def ask(client: EngineClient, messages: tuple[Message, ...], rid: int,
        sampling: SamplingParams = GREEDY) -> tuple[str, list[object]]:
    """Run one request to the end; return the reply text and all events."""
    events = list(client.generate(GenerationRequest(rid, messages, sampling)))
    text = "".join(e.text for e in events if isinstance(e, p.Delta))
    return text, events


def stats_of(events: list[object]) -> p.ReplyStats:
    (stats,) = [e for e in events if isinstance(e, p.ReplyStats)]
    return stats


def finish_of(events: list[object]) -> p.Finished:
    assert isinstance(events[-1], p.Finished)
    assert sum(isinstance(e, p.Finished) for e in events) == 1
    return events[-1]
