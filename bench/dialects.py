"""What each dialect's route costs over the OpenAI chat route (issue 22), for server_bench.py:

  dialect_stream_over_openai_{anthropic,ollama,responses}
      the wall time of a streamed reply on /v1/chat/completions ÷ on that dialect's route
      (/v1/messages, /api/chat, /v1/responses): 1.0 costs the same, below it costs more
      (goal ≥ 0.95). The same prompt, max_tokens and greedy sampling through each dialect's
      official client; the replies must have the same length, or the figure would compare
      different work. Rounds interleave the four, so drift in machine speed hits all alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import anthropic
import ollama
import openai

ASK = "Write a long, detailed story about a lighthouse keeper and a storm."


def _timed(stream: Callable[[], Any], text_of: Callable[[Any], str]) -> tuple[float, int]:
    """Wall time of a whole streamed reply, and how many characters it had."""
    sent, length = time.perf_counter(), 0
    for event in stream():
        length += len(text_of(event) or "")
    return time.perf_counter() - sent, length


def _routes(url: str, max_tokens: int) -> tuple[dict[str, Callable[[], tuple[float, int]]],
                                                 list[Any]]:
    """One timed streamed reply per dialect, and the clients to close."""
    base = url.removesuffix("/v1")
    oai = openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=600)
    ant = anthropic.Anthropic(base_url=base, api_key="x", max_retries=0, timeout=600)
    oll = ollama.Client(host=base, timeout=600)
    messages: Any = [{"role": "user", "content": ASK}]
    model = oai.models.list().data[0].id  # Ollama's client insists on a name
    greedy: dict[str, Any] = {"temperature": 0}

    def chat_text(chunk: Any) -> str:
        return chunk.choices[0].delta.content if chunk.choices else ""

    def messages_text(event: Any) -> str:
        return event.delta.text if event.type == "content_block_delta" else ""

    def responses_text(event: Any) -> str:
        return event.delta if event.type == "response.output_text.delta" else ""

    routes = {
        "openai": lambda: _timed(lambda: oai.chat.completions.create(
            model=model, messages=messages, max_tokens=max_tokens, stream=True, seed=1,
            **greedy), chat_text),
        "anthropic": lambda: _timed(lambda: ant.messages.create(
            model=model, messages=messages, max_tokens=max_tokens, stream=True,
            extra_body=greedy), messages_text),
        "ollama": lambda: _timed(lambda: oll.chat(
            model=model, messages=messages, stream=True,
            options={"num_predict": max_tokens, "seed": 1, **greedy}),
            lambda part: part.message.content),
        "responses": lambda: _timed(lambda: oai.responses.create(
            model=model, input=ASK, max_output_tokens=max_tokens, stream=True, **greedy),
            responses_text),
    }
    return routes, [oai, ant]


def dialect_overheads(url: str, rounds: int, max_tokens: int) -> dict[str, float]:
    """`url`: an `inglenook serve --ollama` whose OpenAI base is `url` (…/v1)."""
    routes, clients = _routes(url, max_tokens)
    walls: dict[str, list[float]] = {name: [] for name in routes}
    try:
        for route in routes.values():  # each route's first reply off the clock
            route()
        for _ in range(rounds):
            lengths = {}
            for name, route in routes.items():
                wall, lengths[name] = route()
                walls[name].append(wall)
            if len(set(lengths.values())) != 1:
                raise SystemExit(f"the dialects wrote replies of different lengths: {lengths}")
    finally:
        for c in clients:
            c.close()
    openai_wall = statistics.median(walls["openai"])
    return {f"dialect_stream_over_openai_{name}": round(
        openai_wall / statistics.median(walls[name]), 3) for name in routes if name != "openai"}
