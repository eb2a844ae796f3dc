"""Ollama's /api/pull from the (fake) Hugging Face Hub, through the official `ollama` client
and raw HTTP: Ollama's progress lines, the app's download queue underneath (resumable,
sha256-checked), the pulled model listed and answering at once by the name it was pulled by;
refused unless the user allows downloads; a client that leaves mid-pull leaves no model in the
Library, only a partial file the next pull resumes."""

from __future__ import annotations

import hashlib
import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import ollama
import pytest
from gguf import GGMLQuantizationType

from inglenook import paths
from inglenook.engine.client import EngineClient
from inglenook.models.download_queue import DownloadManager, DownloadState, DownloadStatus
from inglenook.models.library import installed_models
from inglenook.models.partials import part_path
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub, Fault
from tests.gguf_tools import write_gguf
from tests.helpers.api import WAIT_S, Served, Watch, request, serving

fake_hub = fakehub.fake_hub  # the fixture, under its own name
REPO = "org/Tiny-GGUF"
MODEL = "tiny.Q4_K_M.gguf"
NAME = f"hf.co/{REPO}:Q4_K_M"
TINY = {"general.architecture": "llama", "general.name": "Tiny", "general.file_type": 15,
        "llama.block_count": 2, "llama.context_length": 2048, "llama.embedding_length": 64,
        "llama.attention.head_count": 2, "llama.attention.head_count_kv": 2,
        "tokenizer.chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}


def tiny_gguf(folder: Path, floats: int) -> bytes:
    path = folder / "tiny.gguf"
    write_gguf(path, TINY, [("token_embd.weight", (floats,), GGMLQuantizationType.F32, None)])
    return path.read_bytes()



@pytest.fixture
def hub_repo(fake_hub: FakeHub, tmp_path: Path) -> FakeHub:
    """A repository with two quantizations of a tiny GGUF model (4 MB: several progress
    steps when sent slowly)."""
    data = tiny_gguf(tmp_path, 1 << 20)
    fake_hub.add_repo(REPO, [FakeFile(MODEL, content=data),
                             FakeFile("tiny.Q8_0.gguf", content=data + b"\0" * 32)])
    return fake_hub


@pytest.fixture
def downloads() -> Iterator[DownloadManager]:
    """The queue the server's pulls go through, as the window's is."""
    manager = DownloadManager()
    try:
        yield manager
    finally:
        manager.close()


@pytest.fixture
def served(echo_engine: EngineClient, downloads: DownloadManager) -> Iterator[Served]:
    with serving(echo_engine, downloads=downloads, ollama=True, allow_pull=True) as s:
        yield s


def lines(raw: bytes) -> list[dict]:
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


def slowly(hub: FakeHub) -> None:
    """The model's first GET sends 64 KiB at a time (about 1.5 s in all)."""
    hub.file(REPO, MODEL).faults.append(Fault("slow", chunk=64 << 10, delay=0.02))


def test_pull_with_the_ollama_client_then_list_show_and_chat(hub_repo: FakeHub,
                                                             served: Served) -> None:
    slowly(hub_repo)
    with ollama.Client(host=served.url) as client:
        check_pull_list_show_chat(hub_repo, client)


def check_pull_list_show_chat(hub_repo: FakeHub, client: ollama.Client) -> None:
    parts = list(client.pull(NAME, stream=True))
    statuses = [p.status for p in parts]
    assert statuses[0] == "pulling manifest"
    assert statuses[-3:] == ["verifying sha256 digest", "writing manifest", "success"]
    sha = hub_repo.file(REPO, MODEL).sha256
    pulling = [p for p in parts if p.digest]
    assert {p.status for p in pulling} == {f"pulling {sha[:12]}"}
    assert {p.digest for p in pulling} == {f"sha256:{sha}"}
    completed = [p.completed or 0 for p in pulling]
    assert len(completed) >= 3 and completed == sorted(completed)  # monotone, in steps
    assert completed[-1] == pulling[-1].total == hub_repo.file(REPO, MODEL).size
    installed = paths.models_dir() / MODEL
    assert hashlib.sha256(installed.read_bytes()).hexdigest() == sha
    assert installed.stem in [m.name for m in installed_models()]  # in the Library

    listed = {m.model: m for m in client.list().models}
    assert NAME in listed and listed[NAME].digest == sha  # by the name it was pulled by
    assert listed[NAME].size == installed.stat().st_size
    assert client.show(NAME).details.quantization_level == "Q4_K_M"
    reply = client.chat(model=NAME, messages=[{"role": "user", "content": "hi"}])
    assert reply.message.content == "Echo: hi"  # usable at once
    assert client.chat(model=installed.stem, messages=[{"role": "user", "content": "a"}]
                       ).message.content == "Echo: a"  # and by its file's name


def test_stream_false_answers_one_object_and_a_second_pull_verifies(hub_repo: FakeHub,
                                                                    served: Served) -> None:
    got = request(served.port, "POST", "/api/pull",
                  {"model": f"{REPO}:q8_0", "stream": False, "insecure": False})
    assert (got.status, got.json()) == (200, {"status": "success"})
    assert (paths.models_dir() / "tiny.Q8_0.gguf").exists()
    assert f"{REPO}:q8_0" in [m["name"] for m in request(served.port, "GET",
                                                           "/api/tags").json()["models"]]
    hub_repo.clear_log()
    again = request(served.port, "POST", "/api/pull", {"model": f"{REPO}:q8_0"})
    assert lines(again.body)[-1] == {"status": "success"}
    assert hub_repo.byte_requests("tiny.Q8_0.gguf") == []  # installed: checked, not fetched


def test_untagged_means_q4_k_m_and_latest(hub_repo: FakeHub, served: Served) -> None:
    got = request(served.port, "POST", "/api/pull",
                  {"model": f"huggingface.co/{REPO}", "stream": False})
    assert got.status == 200, got.body
    assert (paths.models_dir() / MODEL).exists()
    with ollama.Client(host=served.url) as client:
        names = [m.model for m in client.list().models]
    assert f"huggingface.co/{REPO}:latest" in names


def test_refused_unless_the_user_allows_downloads(hub_repo: FakeHub, echo_engine: EngineClient,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with serving(echo_engine, ollama=True) as off:
        with ollama.Client(host=off.url) as client, \
                pytest.raises(ollama.ResponseError) as refused:
            list(client.pull(NAME, stream=True))
        assert refused.value.status_code == 403
        assert "--allow-pull" in refused.value.error and "API server settings" in \
            refused.value.error
    with serving(echo_engine, ollama=True, allow_pull=True) as on:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        got = request(on.port, "POST", "/api/pull", {"model": NAME})
        assert got.status == 403 and "Offline mode" in got.json()["error"]
    assert hub_repo.requests == []  # nothing was sent to the Hub
    assert not (paths.models_dir() / MODEL).exists()


@pytest.mark.parametrize(("name", "said"), [
    ("hf.co/org/Missing-GGUF:Q4_K_M", "Missing-GGUF"),
    (f"hf.co/{REPO}:Q2_K", "its tags: Q4_K_M, Q8_0"),
    ("llama3.2", "Ollama's own library"),
])
def test_unknown_repository_or_quantization_is_a_404(hub_repo: FakeHub, served: Served,
                                                     name: str, said: str) -> None:
    with ollama.Client(host=served.url) as client, \
            pytest.raises(ollama.ResponseError) as missing:
        list(client.pull(name, stream=True))
    assert missing.value.status_code == 404 and said in missing.value.error
    whole = request(served.port, "POST", "/api/pull", {"model": name, "stream": False})
    assert whole.status == 404 and set(whole.json()) == {"error"}
    assert not list(paths.models_dir().glob("*.gguf*"))


def test_a_client_that_leaves_mid_pull_leaves_a_partial_the_next_pull_resumes(
        hub_repo: FakeHub, served: Served, downloads: DownloadManager) -> None:
    slowly(hub_repo)
    seen: Watch[DownloadStatus | None] = Watch(None)
    downloads.watch(seen.update)
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=WAIT_S)
    conn.request("POST", "/api/pull", json.dumps({"model": NAME}),
                 {"Content-Type": "application/json"})
    response = conn.getresponse()
    while True:  # until some bytes, not all, have arrived
        line = json.loads(response.readline())
        if 0 < line.get("completed", 0) < line.get("total", 0):
            break
    conn.close()
    paused = seen.wait_for(lambda s: s is not None and s.state is DownloadState.PAUSED)
    final = paths.models_dir() / MODEL
    assert 0 < paused.done_bytes < hub_repo.file(REPO, MODEL).size
    assert not final.exists() and part_path(final).exists()
    assert MODEL not in [Path(m.path).name for m in installed_models()]

    again = request(served.port, "POST", "/api/pull", {"model": NAME, "stream": False})
    assert again.json() == {"status": "success"}
    resumed = hub_repo.byte_requests(MODEL)[-1]
    assert resumed.range_start is not None and resumed.range_start > 0
    assert hashlib.sha256(final.read_bytes()).hexdigest() == hub_repo.file(REPO, MODEL).sha256
    assert not part_path(final).exists()


def test_a_vision_repository_brings_its_projector(fake_hub: FakeHub, served: Served,
                                                  tmp_path: Path) -> None:
    model = FakeFile("seeing-Q4_K_M.gguf", content=tiny_gguf(tmp_path, 1024))
    projector = FakeFile("mmproj-model-f16.gguf", 20_000)
    fake_hub.add_repo("org/Seeing-GGUF", [model, projector])
    got = request(served.port, "POST", "/api/pull", {"model": "hf.co/org/Seeing-GGUF"})
    digests = {line["digest"] for line in lines(got.body) if "digest" in line}
    assert digests == {f"sha256:{model.sha256}", f"sha256:{projector.sha256}"}
    assert lines(got.body)[-1] == {"status": "success"}
    assert (paths.models_dir() / "Seeing-mmproj-model-f16.gguf").exists()
    assert (paths.models_dir() / "seeing-Q4_K_M.gguf").exists()


def test_bytes_that_arrive_corrupt_end_the_pull_with_an_error(hub_repo: FakeHub,
                                                             served: Served) -> None:
    hub_repo.file(REPO, MODEL).faults.append(Fault("wrong_bytes", times=-1))
    with ollama.Client(host=served.url) as client, \
            pytest.raises(ollama.ResponseError) as corrupt:
        list(client.pull(NAME, stream=True))
    assert "arrived corrupt" in corrupt.value.error
    assert not list(paths.models_dir().glob("*.gguf*"))  # nothing kept, nothing listed
    whole = request(served.port, "POST", "/api/pull", {"model": NAME, "stream": False})
    assert whole.status == 500 and "arrived corrupt" in whole.json()["error"]


def test_one_client_leaving_does_not_stop_another_pulling_the_same_model(
        hub_repo: FakeHub, served: Served) -> None:
    slowly(hub_repo)
    first = http.client.HTTPConnection("127.0.0.1", served.port, timeout=WAIT_S)
    first.request("POST", "/api/pull", json.dumps({"model": NAME}),
                  {"Content-Type": "application/json"})
    response = first.getresponse()
    while "completed" not in json.loads(response.readline()):  # its download has begun
        pass
    with ollama.Client(host=served.url) as client:
        second = client.pull(NAME, stream=True)
        while not next(second).digest:  # it follows the download now
            pass
        first.close()  # the first client goes; the second goes on following it
        assert [p.status for p in second][-1] == "success"
    assert hub_repo.file(REPO, MODEL).size == (paths.models_dir() / MODEL).stat().st_size
    assert len(hub_repo.byte_requests(MODEL)) == 1  # one download, never paused
