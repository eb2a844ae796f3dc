"""The official SDKs' clients for the server a test module serves (its `served` fixture), as
fixtures: a module takes them by importing them (`from tests.helpers.sdk_clients import
claude, oai`), as pytest finds fixtures in a module's names."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest

from tests.helpers.api import Served


@pytest.fixture
def oai(served: Served) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=served.base_url, api_key="x", max_retries=0) as client:
        yield client


@pytest.fixture
def claude(served: Served) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=served.url, api_key="x", max_retries=0) as client:
        yield client
