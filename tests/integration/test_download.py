"""Downloads against the fake Hub, one injected fault at a time. Whatever happens, the models
folder never holds a .gguf whose bytes are not the Hub's."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import threading
from pathlib import Path

import pytest

from inglenook import paths
from inglenook.models import download as dl
from inglenook.models import hub, library
from inglenook.models.filenames import UnsafeFileName
from inglenook.models.partials import discard_partial, find_partials
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub, Fault

fake_hub = fakehub.fake_hub  # the fixture, under its own name

REPO = "org/Tiny-GGUF"
NAME = "tiny.Q4_K_M.gguf"
SIZE = 3 << 20
# Fast retries so that the fault tests take milliseconds; the shape is the default policy's.
FAST = dl.RetryPolicy(base_delay_s=0.01, max_delay_s=0.05, max_retry_after_s=0.2,
                      connect_timeout_s=2.0, read_timeout_s=2.0)


def serve(hub_: FakeHub, *faults: Fault, name: str = NAME, size: int = SIZE,
          **kw: object) -> FakeFile:
    if REPO not in hub_.repos:
        hub_.add_repo(REPO)
    return hub_.add_file(REPO, FakeFile(name, size, faults=faults, **kw))  # type: ignore[arg-type]


def fetch(name: str = NAME, **kw: object) -> Path:
    kw.setdefault("policy", FAST)
    return dl.download_file(REPO, name, **kw)  # type: ignore[arg-type]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers() -> list[str]:
    return sorted(p.name for p in paths.models_dir().iterdir())


@pytest.fixture(autouse=True)
def no_corrupt_model_ever(fake_hub: FakeHub) -> object:
    """After every test: each .gguf in the models folder has exactly the Hub's bytes."""
    yield
    for path in paths.models_dir().glob("*.gguf"):
        served = fake_hub.repos[REPO].file(path.name)
        assert served is not None and sha256(path) == served.sha256, path


@pytest.mark.parametrize("via_cdn", [True, False], ids=["cdn-redirect", "direct"])
def test_happy_path(fake_hub: FakeHub, via_cdn: bool) -> None:
    fake_hub.redirect_to_cdn = via_cdn
    served = serve(fake_hub)
    calls: list[tuple[int, int, float, float | None]] = []

    def progress(done: int, total: int, speed: float, eta: float | None) -> None:
        calls.append((done, total, speed, eta))
        listed = [m.name for m in library.installed_models()]
        assert "tiny.Q4_K_M" not in listed  # a partial download is never a model

    path = fetch(progress=progress)
    assert path == paths.models_dir() / NAME
    assert path.read_bytes() == served.content() and sha256(path) == served.sha256
    assert "tiny.Q4_K_M" in [m.name for m in library.installed_models()]
    assert leftovers() == [NAME]  # no .part, no resume record
    assert calls[0][:2] == (0, SIZE) and calls[-1] == (SIZE, SIZE, calls[-1][2], 0.0)
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)
    # The token goes to the Hub, never to the CDN it redirects to.
    for r in fake_hub.requests:
        assert ("authorization" in r.headers) == (r.server == "hub"), r


def test_dropped_connection_resumes(fake_hub: FakeHub) -> None:
    served = serve(fake_hub, Fault("drop", after=1 << 20))
    notices: list[dl.RetryNotice] = []
    path = fetch(on_retry=notices.append)
    assert sha256(path) == served.sha256
    first, second = fake_hub.byte_requests(NAME)
    assert first.range_start is None and (second.range_start or 0) > 0 and second.status == 206
    assert second.headers.get("if-range") == f'"{served.cdn_etag}"'  # the byte server's ETag
    assert len(notices) == 1 and "connection" in notices[0].reason


def test_a_body_that_never_ends_is_read_up_to_the_announced_size(fake_hub: FakeHub) -> None:
    # No Content-Length, the file's bytes, then zeros without end: only the file is written.
    served = serve(fake_hub, Fault("endless", chunk=1 << 20), size=1 << 20)
    path = fetch()
    assert sha256(path) == served.sha256 and path.stat().st_size == 1 << 20
    assert leftovers() == [NAME]
    (request,) = fake_hub.byte_requests(NAME)
    # Stopped reading and closed: the server wrote no more than the socket buffers took.
    assert request.body_bytes < 64 << 20


def test_range_ignored_restarts_from_zero(fake_hub: FakeHub) -> None:
    served = serve(fake_hub, Fault("drop", after=1 << 20), Fault("ignore_range"))
    path = fetch()
    assert path.read_bytes() == served.content()
    _, second = fake_hub.byte_requests(NAME)
    assert (second.range_start or 0) > 0 and second.status == 200  # whole file, not appended


def test_changed_validator_restarts_from_zero(fake_hub: FakeHub) -> None:
    """If-Range: a server whose file changed sends all of it (200), never a spliced mix."""
    served = serve(fake_hub, Fault("drop", after=1 << 20))
    cancel = threading.Event()
    with pytest.raises(dl.DownloadCancelled):  # stop at the first retry: a partial is left
        fetch(cancel=cancel, on_retry=lambda n: cancel.set())
    record_path = paths.models_dir() / (NAME + ".part.json")
    record = json.loads(record_path.read_text())
    record["validator"] = '"some-other-etag"'
    record_path.write_text(json.dumps(record))
    assert sha256(fetch()) == served.sha256
    last = fake_hub.byte_requests(NAME)[-1]
    assert last.headers["if-range"] == '"some-other-etag"' and last.status == 200


def test_short_body_is_retried(fake_hub: FakeHub) -> None:
    served = serve(fake_hub, Fault("short", after=500_000))
    assert sha256(fetch()) == served.sha256
    assert [r.body_bytes for r in fake_hub.byte_requests(NAME)] == [500_000, SIZE - 500_000]


def test_wrong_bytes_fail_the_checksum_and_leave_nothing(fake_hub: FakeHub) -> None:
    serve(fake_hub, Fault("wrong_bytes", times=-1))
    with pytest.raises(dl.ChecksumMismatch, match=r"arrived corrupt.*deleted"):
        fetch()
    assert leftovers() == []


def test_429_honours_retry_after(fake_hub: FakeHub) -> None:
    served = serve(fake_hub, Fault("status", status=429, retry_after="1"))
    notices: list[dl.RetryNotice] = []
    assert sha256(fetch(on_retry=notices.append)) == served.sha256
    (notice,) = notices
    assert notice.delay_s == FAST.max_retry_after_s  # Retry-After: 1, cut to the policy's bound
    assert "429" in notice.reason


def test_500_repeatedly_gives_up_after_bounded_retries(fake_hub: FakeHub) -> None:
    serve(fake_hub, Fault("status", status=500, times=-1))
    with pytest.raises(dl.DownloadError, match=r"Giving up on tiny\.Q4_K_M\.gguf after 6 tries"):
        fetch()
    assert sum(r.status == 500 for r in fake_hub.requests) == FAST.max_failures
    assert leftovers() == []  # nothing arrived, nothing kept


def test_slow_drip_completes(fake_hub: FakeHub) -> None:
    served = serve(fake_hub, Fault("slow", chunk=16 << 10, delay=0.005), size=256 << 10)
    assert sha256(fetch()) == served.sha256


def test_stalled_server_times_out_and_resumes(fake_hub: FakeHub) -> None:
    served = serve(fake_hub, Fault("stall", after=1 << 20, delay=10))
    policy = dl.RetryPolicy(base_delay_s=0.01, read_timeout_s=0.3)
    assert sha256(fetch(policy=policy)) == served.sha256
    assert (fake_hub.byte_requests(NAME)[-1].range_start or 0) > 0


def test_metadata_trickled_a_header_line_at_a_time_ends_at_its_deadline(
        fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    serve(fake_hub)
    fake_hub.trickle_headers = {"hub"}
    monkeypatch.setattr(hub, "HEAD_SECONDS", 0.5)
    policy = dl.RetryPolicy(base_delay_s=0.01, max_failures=2)
    with pytest.raises(dl.DownloadError, match=r"after 2 tries: .* did not finish answering "
                                               r"within 0\.5 s"):
        fetch(policy=policy)
    assert leftovers() == []
    fake_hub.stop()
    assert fake_hub.trickled and max(fake_hub.trickled) < fakehub.TRICKLE_LINES // 2


def test_bytes_whose_headers_trickle_are_asked_for_again(fake_hub: FakeHub) -> None:
    """The CDN sends its headers a line every 0.1 s, each read within the read timeout: the
    answer's deadline ends each try, and the download gives up with the reason."""
    serve(fake_hub)
    fake_hub.trickle_headers = {"cdn"}
    policy = dl.RetryPolicy(base_delay_s=0.01, max_failures=2, answer_deadline_s=0.5)
    with pytest.raises(dl.DownloadError, match=r"after 2 tries: .* did not finish answering "
                                               r"within 0\.5 s"):
        fetch(policy=policy)
    fake_hub.trickle_headers = set()
    assert sha256(fetch()) == fake_hub.file(REPO, NAME).sha256  # the Hub answers again: done


def test_pause_keeps_the_partial_and_resume_continues(fake_hub: FakeHub) -> None:
    served = serve(fake_hub, Fault("slow", chunk=32 << 10, delay=0.02))  # ~1.6 MB/s, once
    cancel = threading.Event()

    def pause_early(done: int, total: int, speed: float, eta: float | None) -> None:
        if done >= 100 << 10:
            cancel.set()

    with pytest.raises(dl.DownloadCancelled) as paused:
        fetch(progress=pause_early, cancel=cancel)
    kept = paused.value.kept_bytes
    assert 0 < kept < SIZE
    assert leftovers() == [NAME + ".part", NAME + ".part.json"]
    assert (paths.models_dir() / (NAME + ".part")).stat().st_size == kept
    (partial,) = find_partials()
    assert (partial.repo, partial.filename, partial.done_bytes) == (REPO, NAME, kept)
    assert sha256(fetch()) == served.sha256
    assert fake_hub.byte_requests(NAME)[-1].range_start == kept


def test_cancel_with_delete_removes_the_partial(fake_hub: FakeHub) -> None:
    serve(fake_hub, Fault("slow", chunk=32 << 10, delay=0.02))
    cancel = threading.Event()
    with pytest.raises(dl.DownloadCancelled):
        fetch(progress=lambda done, *_: cancel.set() if done else None, cancel=cancel)
    discard_partial(paths.models_dir() / NAME)
    assert leftovers() == []


def test_corrupt_partial_is_caught_on_resume(fake_hub: FakeHub) -> None:
    """The partial bytes are hashed again on resume, so damage on disk cannot slip through."""
    served = serve(fake_hub, Fault("drop", after=1 << 20))
    cancel = threading.Event()
    with pytest.raises(dl.DownloadCancelled):
        fetch(cancel=cancel, on_retry=lambda n: cancel.set())
    part = paths.models_dir() / (NAME + ".part")
    data = bytearray(part.read_bytes())
    data[10] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(dl.ChecksumMismatch):
        fetch()
    assert leftovers() == []
    assert sha256(fetch()) == served.sha256  # and a fresh try works


def test_partial_of_another_file_is_not_reused(fake_hub: FakeHub) -> None:
    served = serve(fake_hub)
    models = paths.models_dir()
    (models / (NAME + ".part")).write_bytes(b"x" * 1000)
    (models / (NAME + ".part.json")).write_text(json.dumps(
        {"version": 1, "repo": REPO, "filename": NAME, "size": SIZE, "sha256": "0" * 64}))
    assert sha256(fetch()) == served.sha256
    assert fake_hub.byte_requests(NAME)[0].range_start is None


@pytest.mark.parametrize("name", ["../evil.gguf", "a/../../evil.gguf", "/abs/evil.gguf",
                                  "..\\evil.gguf", "evil.sh", "ev\x00il.gguf"])
def test_unsafe_names_are_refused_before_any_request(fake_hub: FakeHub,
                                                     name: str) -> None:
    fake_hub.add_repo(REPO, [FakeFile("../evil.gguf", 100)])
    with pytest.raises(UnsafeFileName):
        fetch(name)
    assert fake_hub.requests == []
    assert leftovers() == []
    assert not (paths.data_dir() / "evil.gguf").exists()


def test_disk_too_small_is_refused_before_any_byte(fake_hub: FakeHub,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    serve(fake_hub)
    real = shutil.disk_usage(paths.models_dir())
    monkeypatch.setattr(dl.shutil, "disk_usage",
                        lambda _: real._replace(free=SIZE + dl.DISK_MARGIN - 1))
    with pytest.raises(dl.InsufficientSpace, match="Not enough disk space"):
        fetch()
    assert fake_hub.file_requests(NAME, "GET") == [] and leftovers() == []


def test_offline_download_makes_no_connection(fake_hub: FakeHub,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    serve(fake_hub)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hub.HubOffline):
        fetch()
    assert fake_hub.requests == []


def test_missing_file_fails_at_once(fake_hub: FakeHub) -> None:
    serve(fake_hub)
    with pytest.raises(hub.HubNotFound, match="not found"):
        fetch("other.Q8_0.gguf")
    assert len(fake_hub.requests) == 1 and leftovers() == []


def test_sha256_from_the_listing_when_head_has_none(fake_hub: FakeHub) -> None:
    served = serve(fake_hub, sha256_header=False)
    assert sha256(fetch()) == served.sha256
    assert any("/api/models/" in r.path and r.query.get("blobs") == ["true"]
               for r in fake_hub.requests)


def test_already_installed(fake_hub: FakeHub) -> None:
    serve(fake_hub)
    fetch()
    fake_hub.clear_log()
    assert sha256(fetch()) == fake_hub.file(REPO, NAME).sha256
    assert fake_hub.file_requests(NAME, "GET") == []  # verified in place, not fetched again
    other = paths.models_dir() / "other.Q4_K_M.gguf"
    serve(fake_hub, name=other.name)
    other.write_bytes(b"not this one")
    with pytest.raises(dl.DownloadError, match="A different file named"):
        fetch(other.name)
    other.unlink()


def test_two_downloads_of_one_file_do_not_mix(fake_hub: FakeHub) -> None:
    fcntl = pytest.importorskip("fcntl")  # POSIX: Windows has no advisory lock here
    serve(fake_hub)
    part = paths.models_dir() / (NAME + ".part")
    with open(part, "wb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # as another Inglenook downloading it
        with pytest.raises(dl.DownloadBusy):
            fetch()
    assert part.exists()  # the other download's partial is not touched


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links need privileges there")
def test_a_planted_symlink_is_not_written_through(fake_hub: FakeHub, tmp_path: Path) -> None:
    serve(fake_hub)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (paths.models_dir() / (NAME + ".part")).symlink_to(victim)
    with pytest.raises(UnsafeFileName, match="not a plain file"):
        fetch()
    assert victim.read_text() == "precious"
    (paths.models_dir() / (NAME + ".part")).unlink()
