"""Hub search and repository listings against the fake Hub on 127.0.0.1."""

from __future__ import annotations

import socket
import tracemalloc
from collections.abc import Iterator

import pytest

from inglenook.models import hub
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub

fake_hub = fakehub.fake_hub  # the fixture, under its own name


@pytest.fixture
def hub_with_repos(fake_hub: FakeHub) -> FakeHub:
    fake_hub.add_repo("alice/Tiny-Chat-GGUF", [
        FakeFile("tiny-chat.Q4_K_M.gguf", 4000), FakeFile("tiny-chat.Q8_0.gguf", 8000),
        FakeFile("tiny-chat.IQ2_XS.gguf", 2000), FakeFile("README.md", content=b"# hi", lfs=False),
        FakeFile("../escape.gguf", 10),
        *(FakeFile(f"BF16/tiny-chat-BF16-0000{i}-of-00003.gguf", 5000) for i in (1, 2, 3)),
    ], downloads=500, likes=3, last_modified="2024-05-01T00:00:00.000Z")
    fake_hub.add_repo("bob/Tiny-Coder-GGUF", [FakeFile("coder.Q4_0.gguf", 100)],
                      downloads=100, likes=50, last_modified="2024-09-01T00:00:00.000Z")
    fake_hub.add_repo("carol/tiny-safetensors", [], tags=("safetensors",), downloads=10**6)
    fake_hub.add_repo("dave/Other-GGUF", [FakeFile("other.Q4_0.gguf", 100)], downloads=10)
    return fake_hub


@pytest.mark.parametrize(("sort", "expected"), [
    ("downloads", ["alice/Tiny-Chat-GGUF", "bob/Tiny-Coder-GGUF"]),
    ("likes", ["bob/Tiny-Coder-GGUF", "alice/Tiny-Chat-GGUF"]),
    ("recent", ["bob/Tiny-Coder-GGUF", "alice/Tiny-Chat-GGUF"]),
])
def test_search_finds_gguf_repositories_in_the_chosen_order(
        hub_with_repos: FakeHub, sort: str, expected: list[str]) -> None:
    results = hub.search_models("tiny", sort=sort)
    assert [r.id for r in results] == expected  # the safetensors repo is filtered out
    (request,) = hub_with_repos.requests
    assert request.query["filter"] == ["gguf"] and request.query["search"] == ["tiny"]
    assert request.headers["authorization"] == "Bearer hf_fake_token_for_tests"  # HF_TOKEN
    first = results[0]
    assert first.author == first.id.split("/")[0] and first.last_modified is not None


def test_search_limit(hub_with_repos: FakeHub) -> None:
    assert len(hub.search_models("", limit=2)) == 2
    assert hub_with_repos.requests[0].query["limit"] == ["2"]


def test_repository_files_grouped_by_quantization(hub_with_repos: FakeHub) -> None:
    listing = hub.list_gguf_files("alice/Tiny-Chat-GGUF")
    repo = hub_with_repos.repos["alice/Tiny-Chat-GGUF"]
    assert listing.commit == repo.commit
    groups = listing.by_quant()
    assert list(groups) == ["IQ2_XS", "Q4_K_M", "Q8_0", "BF16"]  # smallest first
    q4 = groups["Q4_K_M"][0]
    assert q4.size == 4000 and q4.parts[0].sha256 == repo.file("tiny-chat.Q4_K_M.gguf").sha256
    (bf16,) = groups["BF16"]
    assert bf16.is_split and bf16.complete and bf16.size == 15000
    assert bf16.name == "tiny-chat-BF16.gguf" and len(bf16.parts) == 3
    names = [p.path for m in listing.models for p in m.parts]
    assert "../escape.gguf" not in names and "README.md" not in names


def test_offline_mode_makes_no_connection(hub_with_repos: FakeHub,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hub.HubOffline, match="HF_HUB_OFFLINE"):
        hub.search_models("tiny")
    with pytest.raises(hub.HubOffline):
        hub.list_gguf_files("alice/Tiny-Chat-GGUF")
    assert hub_with_repos.requests == []


def test_offline_is_read_at_call_time_not_import_time(hub_with_repos: FakeHub,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "yes")
    assert hub.is_offline()
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert not hub.is_offline() and hub.search_models("coder")


def test_unknown_repository(hub_with_repos: FakeHub) -> None:
    with pytest.raises(hub.HubNotFound, match="nobody/nothing was not found"):
        hub.list_gguf_files("nobody/nothing")
    with pytest.raises(hub.HubError, match="not a repository id"):
        hub.list_gguf_files("../etc")


def test_server_errors_become_readable_hub_errors(hub_with_repos: FakeHub) -> None:
    hub_with_repos.api_faults.append((503, "7"))
    with pytest.raises(hub.HubError, match="HTTP 503") as info:
        hub.search_models("tiny")
    assert info.value.retryable and info.value.retry_after == 7.0
    hub_with_repos.api_faults.append((429, None))
    with pytest.raises(hub.HubError, match="limiting requests"):
        hub.search_models("tiny")
    assert len(hub_with_repos.requests) == 2  # no hidden retries: search is interactive


@pytest.fixture
def closed_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]  # bound but not listening: connections are refused


def test_network_errors_become_readable_hub_errors(
        closed_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("HF_TOKEN", "hf_fake")  # hermetic: no look for a saved login
    with pytest.raises(hub.HubError, match=r"Cannot connect to 127\.0\.0\.1") as info:
        hub.search_models("tiny")
    assert info.value.retryable and "Traceback" not in str(info.value)


def test_the_fake_hub_speaks_huggingface_hub(hub_with_repos: FakeHub,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """HfApi itself parses the fake Hub's answers: the shapes are the real Hub's."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.utils import close_session

    # huggingface_hub read these at import time; and telemetry would ask the real Hub for its
    # agent list (see hub.py), so it is turned off here.
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    api = HfApi(endpoint=hub_with_repos.url, token=False)
    try:
        found = [m.id for m in api.list_models(search="tiny", filter="gguf", sort="likes")]
        assert found == ["bob/Tiny-Coder-GGUF", "alice/Tiny-Chat-GGUF"]
        info = api.model_info("alice/Tiny-Chat-GGUF", files_metadata=True)
        by_name = {s.rfilename: s for s in info.siblings or ()}
        fake = hub_with_repos.file("alice/Tiny-Chat-GGUF", "tiny-chat.Q8_0.gguf")
        sib = by_name["tiny-chat.Q8_0.gguf"]
        assert sib.size == 8000 and sib.lfs is not None and sib.lfs.sha256 == fake.sha256
        tree = {f.path: f for f in api.list_repo_tree("alice/Tiny-Chat-GGUF")}
        assert tree["tiny-chat.Q8_0.gguf"].lfs.sha256 == fake.sha256  # type: ignore[union-attr]
        assert tree["README.md"].lfs is None  # type: ignore[union-attr]
    finally:
        close_session()  # its process-wide client would keep the sockets open
    assert all(r.server == "hub" for r in hub_with_repos.requests)


@pytest.mark.parametrize(("answer", "said"), [
    ("endless_list", "larger than 32 MB; it was not read further"),
    ("gzip_bomb", "larger than 32 MB; it was not read further"),  # 256 MB inflated
    ("endless_error", r"had a problem \(HTTP 500\)"),
])
def test_answers_that_never_end_are_read_only_up_to_a_bound(
        hub_with_repos: FakeHub, answer: fakehub.ApiAnswer, said: str) -> None:
    hub_with_repos.api_answer = answer
    tracemalloc.start()
    try:
        with pytest.raises(hub.HubError, match=said):
            hub.search_models("tiny")
        with pytest.raises(hub.HubError, match=said):
            hub.list_gguf_files("alice/Tiny-Chat-GGUF")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * hub.MAX_JSON_BYTES  # the bound and its copies; read whole: 320 MB
    for request in hub_with_repos.requests:  # each read stopped, the connection closed
        assert request.body_bytes < hub.MAX_JSON_BYTES + (64 << 20)


@pytest.mark.parametrize("call", ["search", "files"])
def test_an_answer_trickled_a_header_line_at_a_time_ends_at_the_deadline(
        hub_with_repos: FakeHub, monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    """A header line every 0.1 s keeps each read within its timeout: the deadline for the whole
    exchange alone ends it (Discover's search and listing, `inglenook models files`)."""
    monkeypatch.setattr(hub, "MAX_JSON_SECONDS", 1.0)
    hub_with_repos.trickle_headers = {"hub"}
    with pytest.raises(hub.HubTooSlow, match=r"did not finish answering within 1 s") as info:
        if call == "search":
            hub.search_models("tiny")
        else:
            hub.list_gguf_files("alice/Tiny-Chat-GGUF")
    assert info.value.retryable and info.value.status is None
    hub_with_repos.stop()  # the trickle's count is in once its handler ended
    assert len(hub_with_repos.trickled) == 1
    assert hub_with_repos.trickled[0] < fakehub.TRICKLE_LINES // 2  # the client went away


def test_the_deadline_covers_each_exchange_not_the_client(
        hub_with_repos: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    """One client, several exchanges, each within its own deadline (the client's pooled
    connection is reused: the watchdog knows its socket from the first exchange)."""
    monkeypatch.setattr(hub, "MAX_JSON_SECONDS", 1.0)
    with hub.client() as c:
        url = f"{hub.endpoint()}/api/models/alice/Tiny-Chat-GGUF"
        assert hub._get_json(c, url, "it")["id"] == "alice/Tiny-Chat-GGUF"
        hub_with_repos.trickle_headers = {"hub"}
        with pytest.raises(hub.HubTooSlow):
            hub._get_json(c, url, "it")
        hub_with_repos.trickle_headers = set()
        assert hub._get_json(c, url, "it")["id"] == "alice/Tiny-Chat-GGUF"
    hub_with_repos.stop()
    assert len(hub_with_repos.requests) == 3
    assert hub_with_repos.trickled[0] < fakehub.TRICKLE_LINES // 2  # its socket was shut down
