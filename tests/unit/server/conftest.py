"""Fixtures the API server's tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.engine.client import EngineClient
from tests.helpers.api import fake_qwen3_engine

ECHO = {"default": {"text": "Echo: {last}", "token_ms": 0}}


@pytest.fixture(scope="module")
def echo_engine(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[EngineClient]:
    """A fake engine host (Qwen3's template) whose every reply is "Echo: <last message>"."""
    with fake_qwen3_engine(bundled_model, tmp_path_factory.mktemp("fake-echo"), ECHO) as client:
        yield client
