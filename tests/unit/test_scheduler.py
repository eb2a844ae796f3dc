"""The engine's scheduler: one job at a time, owners take turns, loads go first, cancel from
any thread (real threads, synchronised with events, never with sleeps)."""

from __future__ import annotations

import threading

import pytest

from inglenook.engine.scheduler import Job, QueueState, Scheduler

WAIT_S = 10


class Recorder:
    def __init__(self) -> None:
        self.ran: list[str] = []
        self.dropped: list[str] = []
        self.cancelled: list[int] = []
        self.states: list[QueueState] = []

    def job(self, name: str, owner: str = "", rid: int | None = None,
            gate: threading.Event | None = None, exclusive: bool = False) -> Job:
        started = threading.Event()

        def run() -> None:
            self.ran.append(name)
            started.set()
            if gate is not None:
                assert gate.wait(WAIT_S)

        job = Job(run, owner=owner, request_id=rid, exclusive=exclusive,
                  dropped=lambda: self.dropped.append(name))
        job.started = started  # type: ignore[attr-defined]
        return job


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def scheduler(recorder: Recorder):
    s = Scheduler(recorder.cancelled.append, recorder.states.append)
    yield s
    s.close()


def drain(scheduler: Scheduler, recorder: Recorder) -> None:
    done = threading.Event()
    scheduler.submit(Job(done.set, owner="~end"))
    assert done.wait(WAIT_S)


def test_owners_take_turns_and_loads_go_first(scheduler: Scheduler, recorder: Recorder) -> None:
    gate = threading.Event()
    first = recorder.job("busy", "x", 1, gate)
    scheduler.submit(first)
    assert first.started.wait(WAIT_S)  # type: ignore[attr-defined]
    for name, owner, rid in (("a1", "a", 2), ("a2", "a", 3), ("a3", "a", 4), ("b1", "b", 5)):
        scheduler.submit(recorder.job(name, owner, rid))
    scheduler.submit(recorder.job("load", "engine", exclusive=True))
    state = scheduler.state()
    assert state.running == ("x", 1)
    assert [rid for _, rid in state.waiting] == [None, 2, 5, 3, 4]
    gate.set()
    drain(scheduler, recorder)
    assert recorder.ran == ["busy", "load", "a1", "b1", "a2", "a3"]


def test_cancel_drops_a_waiting_job_and_stops_a_running_one(
        scheduler: Scheduler, recorder: Recorder) -> None:
    gate = threading.Event()
    running = recorder.job("running", "a", 1, gate)
    scheduler.submit(running)
    assert running.started.wait(WAIT_S)  # type: ignore[attr-defined]
    scheduler.submit(recorder.job("waiting", "b", 2))
    assert scheduler.cancel(2) is True
    assert recorder.dropped == ["waiting"]
    assert scheduler.cancel(1) is False and recorder.cancelled == [1]  # the engine's cancel
    assert scheduler.cancel(99) is False
    gate.set()
    drain(scheduler, recorder)
    assert recorder.ran == ["running"]


def test_a_failing_job_does_not_stop_the_engine_thread(
        scheduler: Scheduler, recorder: Recorder, caplog: pytest.LogCaptureFixture) -> None:
    def boom() -> None:
        raise RuntimeError("boom")

    scheduler.submit(Job(boom, owner="a", request_id=1))
    drain(scheduler, recorder)
    assert "engine job failed" in caplog.text
    assert scheduler.state() == QueueState(None, ())


def test_every_change_is_reported_and_close_drops_what_waits(recorder: Recorder) -> None:
    scheduler = Scheduler(recorder.cancelled.append, recorder.states.append)
    gate = threading.Event()
    running = recorder.job("running", "a", 1, gate)
    scheduler.submit(running)
    assert running.started.wait(WAIT_S)  # type: ignore[attr-defined]
    scheduler.submit(recorder.job("waiting", "b", 2))
    assert QueueState(("a", 1), (("b", 2),)) in recorder.states
    closer = threading.Thread(target=scheduler.close)
    closer.start()
    gate.set()
    closer.join(WAIT_S)
    assert recorder.dropped == ["waiting"] and recorder.ran == ["running"]
    with pytest.raises(RuntimeError):
        scheduler.submit(recorder.job("late"))
