"""Reading a GGUF header from the (fake) Hub with Range requests of its first megabytes: the
bundled model's real bytes are served, and what comes back equals reading the file locally,
while far fewer bytes than the file cross the wire."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.models import fit, hub
from inglenook.models import remote_header as remote_header_module
from inglenook.models.gguf import GGUFError, GGUFHeader, read_header
from inglenook.models.remote_header import remote_header
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub, Fault, RequestRecord

fake_hub = fakehub.fake_hub  # the fixture, under its own name

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
NAME = "SmolLM2-135M-Instruct-Q4_1.gguf"
KiB, MiB = 2**10, 2**20


@pytest.fixture(scope="module")
def local(bundled_model: Path) -> GGUFHeader:
    return read_header(bundled_model)


@pytest.fixture
def served(fake_hub: FakeHub, bundled_model: Path) -> FakeFile:
    fake_hub.add_repo(REPO)
    return fake_hub.add_file(REPO, FakeFile(NAME, source=bundled_model))


def asked(rec: RequestRecord) -> tuple[int, int]:
    """The [start, end) a request's Range header asked for; fails for an open-ended one."""
    spec = rec.headers["range"].removeprefix("bytes=")
    start, _, last = spec.partition("-")
    assert last, f"an open-ended Range asks for the rest of the file: {spec}"
    return int(start), int(last) + 1


def assert_same_header(remote: GGUFHeader, local: GGUFHeader) -> None:
    for field in ("version", "tensor_count", "kv_count", "alignment", "data_offset", "file_size",
                  "metadata", "tensors"):
        assert getattr(remote, field) == getattr(local, field), field


@pytest.mark.parametrize("via_cdn", [True, False], ids=["cdn-redirect", "direct"])
def test_the_header_comes_from_the_first_megabytes(fake_hub: FakeHub, served: FakeFile,
                                                   local: GGUFHeader, via_cdn: bool) -> None:
    fake_hub.redirect_to_cdn = via_cdn
    remote = remote_header(REPO, NAME)

    assert_same_header(remote, local)
    assert remote.path == f"{fake_hub.url}/{REPO}/resolve/main/{NAME}"
    assert remote.name == local.name and remote.quantization == "Q4_1"
    assert fit.shape_from_header(remote) == fit.shape_from_header(local)

    byte_requests = fake_hub.byte_requests(NAME)
    assert len(byte_requests) == 1  # the 1.8 MB header fits in the first 8 MiB
    assert [r.status for r in byte_requests] == [206]
    assert asked(byte_requests[0]) == (0, 8 * MiB)
    served_bytes = sum(r.body_bytes for r in fake_hub.requests)
    assert served_bytes <= 8 * MiB < served.size
    assert all(r.method == "GET" for r in fake_hub.requests)
    # The token goes to the Hub, never to the CDN.
    for r in fake_hub.requests:
        has_token = r.headers.get("authorization") == "Bearer hf_fake_token_for_tests"
        assert has_token == (r.server == "hub"), r


def test_a_header_larger_than_the_first_request_is_read_in_steps(
        fake_hub: FakeHub, served: FakeFile, local: GGUFHeader) -> None:
    remote = remote_header(REPO, NAME, first_bytes=256 * KiB)
    assert_same_header(remote, local)
    ranges = [asked(r) for r in fake_hub.byte_requests(NAME)]
    # Each step asks only for the bytes after the previous one, doubling the prefix, until the
    # 1.8 MB header is inside it.
    assert ranges == [(0, 256 * KiB), (256 * KiB, 512 * KiB), (512 * KiB, MiB), (MiB, 2 * MiB)]
    assert sum(r.body_bytes for r in fake_hub.requests) == 2 * MiB


def test_a_header_larger_than_the_cap_is_refused(fake_hub: FakeHub, served: FakeFile) -> None:
    with pytest.raises(GGUFError, match=r"larger than 0\.5 MiB"):
        remote_header(REPO, NAME, first_bytes=64 * KiB, max_bytes=512 * KiB)
    assert max(asked(r)[1] for r in fake_hub.byte_requests(NAME)) == 512 * KiB
    assert sum(r.body_bytes for r in fake_hub.requests) == 512 * KiB


def test_a_server_that_ignores_range_is_not_read_to_the_end(
        fake_hub: FakeHub, bundled_model: Path, local: GGUFHeader) -> None:
    fake_hub.add_repo(REPO, [FakeFile(NAME, source=bundled_model,
                                      faults=(Fault("ignore_range", times=-1),))])
    remote = remote_header(REPO, NAME)
    assert_same_header(remote, local)
    (rec,) = fake_hub.byte_requests(NAME)
    assert rec.status == 200
    # The server writes until the client hangs up: 8 MiB plus what the socket buffers took.
    assert rec.body_bytes < 64 * MiB < local.file_size


def test_offline_mode_sends_nothing(fake_hub: FakeHub, served: FakeFile,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hub.HubOffline):
        remote_header(REPO, NAME)
    assert fake_hub.requests == []


def test_missing_repository_and_file(fake_hub: FakeHub, served: FakeFile) -> None:
    with pytest.raises(hub.HubNotFound, match="not found"):
        remote_header("nobody/nothing-GGUF", NAME)
    with pytest.raises(hub.HubNotFound, match="not found"):
        remote_header(REPO, "other-Q4_K_M.gguf")


def test_bad_names_are_refused_before_any_request(fake_hub: FakeHub) -> None:
    with pytest.raises(hub.HubError, match="owner/name"):
        remote_header("not a repo", NAME)
    with pytest.raises(hub.HubError, match="Refusing"):
        remote_header(REPO, "../../etc/passwd.gguf")
    assert fake_hub.requests == []


def test_not_a_gguf_file(fake_hub: FakeHub) -> None:
    fake_hub.add_repo(REPO, [FakeFile(NAME, 3 * MiB)])  # random bytes
    with pytest.raises(GGUFError, match="Not a GGUF file"):
        remote_header(REPO, NAME)
    assert len(fake_hub.byte_requests(NAME)) == 1


def test_a_file_cut_short_on_the_hub(fake_hub: FakeHub, bundled_model: Path) -> None:
    with open(bundled_model, "rb") as f:
        prefix = f.read(3 * MiB)  # the whole header, a little of the tensor data
    fake_hub.add_repo(REPO, [FakeFile(NAME, content=prefix)])
    with pytest.raises(GGUFError, match="truncated on the Hub"):
        remote_header(REPO, NAME)


def test_a_file_smaller_than_the_first_request(fake_hub: FakeHub, bundled_model: Path) -> None:
    with open(bundled_model, "rb") as f:
        prefix = f.read(MiB)  # the header is cut: no amount of asking gets more
    fake_hub.add_repo(REPO, [FakeFile(NAME, content=prefix)])
    with pytest.raises(GGUFError, match="truncated"):
        remote_header(REPO, NAME)
    assert len(fake_hub.byte_requests(NAME)) == 1


def test_a_range_answer_trickled_a_header_line_at_a_time_ends_at_its_deadline(
        fake_hub: FakeHub, served: FakeFile, monkeypatch: pytest.MonkeyPatch) -> None:
    """Discover reads a file's header to say whether it fits: a CDN that sends a header line
    every 0.1 s (each read within its timeout) held that for as long as it liked."""
    fake_hub.trickle_headers = {"cdn"}
    monkeypatch.setattr(remote_header_module, "RANGE_SECONDS", 0.5)
    with pytest.raises(hub.HubTooSlow, match=r"did not finish answering within 0\.5 s"):
        remote_header_module.remote_header(REPO, NAME)
    fake_hub.stop()
    assert fake_hub.trickled and fake_hub.trickled[0] < fakehub.TRICKLE_LINES // 2
