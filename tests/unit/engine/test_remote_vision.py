"""Remote models and images, against fake OpenAI-compatible servers on 127.0.0.1: whether a model
reads images comes from its server where the server says (LM Studio, Ollama, OpenRouter's
listing), else from the user's mark in Remote engines…; a model that reads them is sent a
message's images as image_url data: URLs, from the window's router, the API and `inglenook chat
--endpoint --image`."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from inglenook.cli import main
from inglenook.core.images import read_image
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, ImageRef, Message
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from inglenook.engine.providers import Provider, ProviderStore
from inglenook.engine.remote import RemoteClient
from inglenook.engine.remote_api import Endpoint, ModelListing, parse_models
from inglenook.engine.remote_catalog import ProviderListing
from inglenook.engine.router import EngineRouter
from inglenook.engine.scheduler import Scheduler
from inglenook.server import ApiServer, ServerConfig
from tests.helpers.api import request
from tests.helpers.vision_peer import REPLY, VisionPeer, vision_peer

MODELS = {"seeing-model": True, "text-model": False}


def picture(path: Path) -> Path:
    out = io.BytesIO()
    Image.new("RGB", (24, 16), (40, 160, 90)).save(out, "PNG")
    path.write_bytes(out.getvalue())
    return path


def as_data_url(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


@pytest.mark.parametrize("kind", ["lm-studio", "ollama", "openrouter"])
def test_the_server_says_which_models_read_images(kind: str) -> None:
    with vision_peer(kind, MODELS) as peer:
        client = RemoteClient(Endpoint(peer.url), marked=["text-model"])  # the server wins
        try:
            assert client.load(LoadParams("seeing-model")).vision is True
            assert client.vision_said is True
            assert client.load(LoadParams("text-model")).vision is False
            assert client.vision_said is False
        finally:
            client.close()
        asked = {"lm-studio": "GET /api/v0/models", "ollama": "POST /api/show"}.get(kind)
        assert asked is None or asked in peer.asked


def test_where_the_server_says_nothing_the_users_mark_decides() -> None:
    with vision_peer("generic", MODELS) as peer:
        client = RemoteClient(Endpoint(peer.url))
        try:
            assert client.load(LoadParams("seeing-model")).vision is False
            assert client.vision_said is None
            client.marked = frozenset({"seeing-model"})
            assert client.load(LoadParams("seeing-model")).vision is True
        finally:
            client.close()
        assert peer.asked == ["GET /v1/models"] * 2  # a generic server is asked nothing more


def test_an_answer_nested_past_the_stack_says_nothing() -> None:
    """json.loads of 100,000 nested brackets raises RecursionError, not ValueError: it must not
    escape the load (the user's mark decides, as for a server that says nothing)."""
    with vision_peer("ollama-deep", MODELS) as peer:
        client = RemoteClient(Endpoint(peer.url), marked=["seeing-model"])
        try:
            assert client.load(LoadParams("seeing-model")).vision is True
            assert client.vision_said is None
        finally:
            client.close()
        assert "POST /api/show" in peer.asked


def test_a_listing_is_read_with_bounds() -> None:
    items = [{"id": "a", "architecture": {"input_modalities": ["text", "image"]}},
             {"id": "b", "architecture": {"input_modalities": "image"}},  # not a list
             {"id": "c", "capabilities": ["completion", "vision"]},
             {"id": "d", "architecture": {"input_modalities": ["text"] * 100 + ["image"]}}]
    models = parse_models({"data": items})
    assert models is not None
    assert [m.vision for m in models] == [True, None, True, False]


def test_the_picker_marks_what_the_listing_or_the_user_says() -> None:
    items = [{"id": "said", "architecture": {"input_modalities": ["text", "image"]}},
             {"id": "said-not", "architecture": {"input_modalities": ["text"]}},
             {"id": "marked"}, {"id": "plain"}]
    models = parse_models({"data": items})
    assert models is not None
    provider = Provider("p1", "Box", "http://box:8080/v1", vision_models=("marked", "said-not"))
    entry = ProviderListing(provider, ModelListing(models, 0.01, "generic"))
    assert [m for _, m in entry.refs if entry.sees(m)] == ["said", "marked"]  # the server first
    assert ProviderListing(provider, error="down").sees("marked")  # not listed: the mark


@pytest.fixture
def router(tmp_path: Path) -> Iterator[tuple[EngineRouter, VisionPeer, str]]:
    with vision_peer("generic", MODELS) as peer:
        store = ProviderStore()
        provider = store.save("GPU box", peer.url)
        store.mark_vision(provider.id, ["seeing-model"])
        local = EngineClient(log_path=tmp_path / "engine.log")  # never started here
        r = EngineRouter(local, store)
        yield r, peer, provider.ref("seeing-model")
        r.close()


def test_a_marked_remote_model_gets_the_chats_images(
        router: tuple[EngineRouter, VisionPeer, str], tmp_path: Path) -> None:
    r, peer, ref = router
    assert r.load(LoadParams(ref)).vision is True
    photo = picture(tmp_path / "photo.png")
    sha = read_image(photo).sha256
    events = list(r.generate(GenerationRequest(1, (Message(
        "user", "What is this?", images=(ImageRef(sha, str(photo)),)),))))
    assert "".join(e.text for e in events if isinstance(e, p.Delta)) == REPLY
    assert peer.image_urls() == [as_data_url(photo)]
    assert peer.chats[-1]["messages"][0]["content"][-1] == {"type": "text",
                                                            "text": "What is this?"}


def test_the_api_passes_images_on_to_a_remote_model_that_reads_them(
        router: tuple[EngineRouter, VisionPeer, str], tmp_path: Path) -> None:
    r, peer, ref = router
    r.load(LoadParams(ref))
    url = as_data_url(picture(tmp_path / "photo.png"))
    scheduler = Scheduler(r.cancel, lanes=r.lanes)
    server = ApiServer(scheduler, r, ServerConfig(port=0))
    try:
        port = int(server.start().rsplit(":", 1)[1])
        response = request(port, "POST", "/v1/chat/completions", {
            "model": "", "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": url}},
                {"type": "text", "text": "What is this?"}]}]})
    finally:
        server.stop()
        scheduler.close()
    assert response.status == 200, response.body
    assert response.json()["choices"][0]["message"]["content"] == REPLY
    assert peer.image_urls() == [url]


def test_cli_chat_sends_an_image_to_an_endpoint(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    photo = picture(tmp_path / "photo.png")
    with vision_peer("generic", MODELS) as peer:  # says nothing: --image is the user's word
        code = main(["chat", "--endpoint", peer.url, "--model", "seeing-model",
                     "--image", str(photo), "What is this?"])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert out == f"{REPLY}\n" and peer.image_urls() == [as_data_url(photo)]
    with vision_peer("lm-studio", MODELS) as peer:  # says the model reads none: believed
        code = main(["chat", "--endpoint", peer.url, "--model", "text-model",
                     "--image", str(photo), "What is this?"])
        assert code == 1 and peer.chats == []
        assert "says text-model reads no images" in capsys.readouterr().err


def test_the_marks_are_kept_with_the_endpoint_and_read_with_bounds() -> None:
    store = ProviderStore()
    provider = store.save("GPU box", "http://gpu-box:8000/v1")
    store.mark_vision(provider.id, ["llava", "llava", "", "x" * 300, "qwen-vl"])
    store.save("GPU server", "http://gpu-box:8000/v1", provider_id=provider.id)  # renamed
    assert store.get(provider.id).vision_models == ("llava", "qwen-vl")  # type: ignore[union-attr]
    data = json.loads(store.path.read_text())
    data["providers"][0]["vision_models"] = ["a", 5, None, *[f"m{i}" for i in range(2000)]]
    store.path.write_text(json.dumps(data))
    marked = store.get(provider.id).vision_models  # type: ignore[union-attr]
    assert marked[0] == "a" and len(marked) == 512
    store.mark_vision(provider.id, [])
    assert "vision_models" not in json.loads(store.path.read_text())["providers"][0]
