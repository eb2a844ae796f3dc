"""The download queue the Models page drives: pause, resume, cancel, order, restart."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable

from inglenook import paths
from inglenook.models.download_queue import DownloadManager, DownloadState, DownloadStatus
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub, Fault
from tests.integration.test_download import FAST, NAME, REPO, SIZE, leftovers, serve

fake_hub = fakehub.fake_hub  # the fixture, under its own name
SLOW = Fault("slow", chunk=32 << 10, delay=0.02)  # ~1.6 MB/s for the first request only


class Changes:
    """Every status the manager reports, and a bounded wait for one that matters."""

    def __init__(self) -> None:
        self.seen: list[DownloadStatus] = []
        self._cond = threading.Condition()

    def __call__(self, status: DownloadStatus) -> None:
        with self._cond:
            self.seen.append(status)
            self._cond.notify_all()

    def wait(self, predicate: Callable[[DownloadStatus], bool], timeout: float = 10) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: any(map(predicate, self.seen)), timeout)


def installed_sha256() -> str:
    return hashlib.sha256((paths.models_dir() / NAME).read_bytes()).hexdigest()


def test_pause_and_resume(fake_hub: FakeHub) -> None:
    served = serve(fake_hub, SLOW)
    changes = Changes()
    manager = DownloadManager(on_change=changes, policy=FAST)
    job = manager.add(REPO, NAME)
    changes.wait(lambda s: s.done_bytes > 0)
    manager.pause(job)
    paused = manager.wait(job, timeout=10)
    assert paused.state is DownloadState.PAUSED and 0 < paused.done_bytes < SIZE
    assert leftovers() == [NAME + ".part", NAME + ".part.json"]
    manager.resume(job)
    done = manager.wait(job, timeout=10)
    assert done.state is DownloadState.DONE and done.path == paths.models_dir() / NAME
    assert installed_sha256() == served.sha256
    assert (fake_hub.byte_requests(NAME)[-1].range_start or 0) > 0
    states = [s.state for s in changes.seen]
    assert states[0] is DownloadState.QUEUED and states[-1] is DownloadState.DONE
    assert DownloadState.PAUSED in states


def test_cancel_deletes_the_partial(fake_hub: FakeHub) -> None:
    serve(fake_hub, SLOW)
    changes = Changes()
    manager = DownloadManager(on_change=changes, policy=FAST)
    job = manager.add(REPO, NAME)
    changes.wait(lambda s: s.done_bytes > 0)
    manager.cancel(job, delete=True)
    assert manager.wait(job, timeout=10).state is DownloadState.CANCELLED
    assert leftovers() == []


def test_one_at_a_time_in_order(fake_hub: FakeHub) -> None:
    serve(fake_hub, SLOW)
    second = serve(fake_hub, name="second.Q8_0.gguf", size=100_000)
    manager = DownloadManager(policy=FAST)
    first_id = manager.add(REPO, NAME)
    second_id = manager.add(REPO, second.path)
    assert manager.add(REPO, NAME) == first_id  # the same file is not queued twice
    assert manager.status(second_id).state is DownloadState.QUEUED
    assert manager.wait(first_id, timeout=10).state is DownloadState.DONE
    assert manager.wait(second_id, timeout=10).state is DownloadState.DONE
    first_get, second_get = (r for r in fake_hub.requests if r.server == "cdn")
    assert (first_get.file, second_get.file) == (NAME, second.path)


def test_partials_are_adopted_after_a_restart(fake_hub: FakeHub) -> None:
    served = serve(fake_hub, SLOW)
    changes = Changes()
    before = DownloadManager(on_change=changes, policy=FAST)
    job = before.add(REPO, NAME)
    changes.wait(lambda s: s.done_bytes > 0)
    before.close()  # quitting the app pauses what runs
    assert before.status(job).state is DownloadState.PAUSED

    after = DownloadManager(policy=FAST)
    (adopted,) = after.adopt_partials()
    status = after.status(adopted)
    assert status.state is DownloadState.PAUSED and status.done_bytes > 0
    assert (status.repo, status.filename, status.total_bytes) == (REPO, NAME, SIZE)
    after.resume(adopted)
    assert after.wait(adopted, timeout=10).state is DownloadState.DONE
    assert installed_sha256() == served.sha256


def test_a_failure_is_reported_and_can_be_retried(fake_hub: FakeHub) -> None:
    served = serve(fake_hub, Fault("wrong_bytes"))
    manager = DownloadManager(policy=FAST)
    job = manager.add(REPO, NAME)
    failed = manager.wait(job, timeout=10)
    assert failed.state is DownloadState.FAILED and "corrupt" in failed.message
    assert leftovers() == []
    manager.resume(job)
    assert manager.wait(job, timeout=10).state is DownloadState.DONE
    assert installed_sha256() == served.sha256


def test_cancelling_a_paused_download_deletes_its_partial(fake_hub: FakeHub) -> None:
    fake_hub.add_repo(REPO, [FakeFile(NAME, SIZE, faults=(SLOW,))])
    changes = Changes()
    manager = DownloadManager(on_change=changes, policy=FAST)
    job = manager.add(REPO, NAME)
    changes.wait(lambda s: s.done_bytes > 0)
    manager.pause(job)
    manager.wait(job, timeout=10)
    manager.cancel(job)
    assert manager.status(job).state is DownloadState.CANCELLED and leftovers() == []
