"""`inglenook serve` with a text model and a vision copy in its library: a request naming the
vision copy is read with that copy's projector (its image's positions counted), and one naming
the text model is refused for its image, as its own projector-less load says. Before, every
model a request named was loaded with the first model's projector (or its lack of one)."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from inglenook.cli.serve import api_params
from inglenook.core.load import LoadParams
from inglenook.engine.client import EngineClient
from inglenook.engine.router import EngineRouter
from inglenook.engine.scheduler import Scheduler
from inglenook.models.projector import with_projector
from inglenook.server import ApiServer, ServerConfig
from tests.helpers.api import request
from tests.mmproj_tools import IMAGE_TOKENS
from tests.unit.cli.test_serve import library

QUESTION = "What is in this picture?"


@pytest.fixture
def served(bundled_model: Path, tmp_path: Path) -> Iterator[tuple[int, Path, Path]]:
    text, vision, _ = library(bundled_model, tmp_path)
    load = with_projector(LoadParams(str(text), n_ctx=1024, n_slots=1))  # as serve reads it
    router = EngineRouter(EngineClient(log_path=tmp_path / "engine.log"),
                          library=lambda: [(text.stem, str(text)), (vision.stem, str(vision))],
                          api_params=api_params(load))
    router.load(load)
    scheduler = Scheduler(router.cancel, lanes=router.lanes)
    server = ApiServer(scheduler, router, ServerConfig(port=0))
    try:
        url = server.start()
        yield int(url.rsplit(":", 1)[1]), text, vision
    finally:
        server.stop()
        scheduler.close()
        router.close()


def ask(port: int, model: str, image: bool) -> tuple[int, dict]:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), (20, 90, 200)).save(out, "PNG")
    url = "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()
    content: list[dict] = [{"type": "image_url", "image_url": {"url": url}}] if image else []
    response = request(port, "POST", "/v1/chat/completions", {
        "model": model, "max_tokens": 1, "temperature": 0, "seed": 1,
        "messages": [{"role": "user", "content": [*content, {"type": "text", "text": QUESTION}]}]})
    return response.status, response.json()


def test_each_model_a_request_names_has_its_own_projector(
        served: tuple[int, Path, Path]) -> None:
    port, text, vision = served
    status, plain = ask(port, vision.stem, image=False)
    assert status == 200, plain
    status, seen = ask(port, vision.stem, image=True)
    assert status == 200, seen
    assert seen["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"] + IMAGE_TOKENS
    status, refused = ask(port, text.stem, image=True)
    assert status == 400 and "cannot see images" in refused["error"]["message"]
