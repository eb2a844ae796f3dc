"""Images through the API: an OpenAI `image_url` part with a data: URL reaches the prompt of the
bundled model loaded with the tiny projector of tests/mmproj_tools.py (its positions counted in
`usage`), through a real server on 127.0.0.1 and the engine host."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from inglenook.core.load import LoadParams
from inglenook.engine.client import EngineClient
from tests.helpers.api import Served, request, serving
from tests.mmproj_tools import IMAGE_TOKENS, model_n_embd, write_mmproj

QUESTION = "What is in this picture?"


@pytest.fixture(scope="module")
def served(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("api-vision")
    mmproj = write_mmproj(folder / "mmproj-tiny.gguf", model_n_embd(bundled_model))
    client = EngineClient(log_path=folder / "engine.log")
    assert client.load(LoadParams(str(bundled_model), n_ctx=1024, n_slots=1,
                                  mmproj_path=str(mmproj))).vision
    with serving(client, ollama=True) as s:
        yield s
    client.close()


def ask(served: Served, content: Any) -> Any:
    response = request(served.port, "POST", "/v1/chat/completions", {
        "model": "", "messages": [{"role": "user", "content": content}],
        "max_tokens": 1, "temperature": 0, "seed": 42})
    assert response.status == 200, response.body
    return response.json()


def test_a_data_url_image_reaches_the_prompt(served: Served) -> None:
    out = io.BytesIO()
    Image.new("RGB", (50, 40), (200, 10, 10)).save(out, "PNG")
    url = "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()
    plain = ask(served, QUESTION)
    seen = ask(served, [{"type": "image_url", "image_url": {"url": url}},
                        {"type": "text", "text": QUESTION}])
    assert seen["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"] + IMAGE_TOKENS


def png_base64() -> str:
    out = io.BytesIO()
    Image.new("RGB", (50, 40), (10, 200, 10)).save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def test_anthropic_and_ollama_images_reach_the_prompt_too(served: Served) -> None:
    plain = ask(served, QUESTION)["usage"]["prompt_tokens"]
    anthropic = request(served.port, "POST", "/v1/messages/count_tokens", {
        "model": "", "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": png_base64()}},
            {"type": "text", "text": QUESTION}]}]})
    assert anthropic.status == 200, anthropic.body
    assert anthropic.json()["input_tokens"] > plain  # the image's positions are counted
    ollama = request(served.port, "POST", "/api/chat", {
        "model": "", "stream": False, "options": {"num_predict": 1, "temperature": 0},
        "messages": [{"role": "user", "content": QUESTION, "images": [png_base64()]}]})
    assert ollama.status == 200, ollama.body
    assert ollama.json()["prompt_eval_count"] == plain + IMAGE_TOKENS
    shown = request(served.port, "POST", "/api/show", {"model": ""})
    assert "vision" in shown.json()["capabilities"]
    remote = request(served.port, "POST", "/v1/messages", {
        "model": "", "max_tokens": 1, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]}]})
    assert remote.status == 400 and "nothing is fetched" in remote.json()["error"]["message"]
