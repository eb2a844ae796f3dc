"""The engine's scheduler: replies in lanes (one by default), owners take turns, loads go
first and alone, engines independent, cancel from any thread (real threads, synchronised
with events, never with sleeps)."""

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
        self._changed = threading.Condition()

    def state(self, state: QueueState) -> None:
        with self._changed:
            self.states.append(state)
            self._changed.notify_all()

    def idle(self) -> None:
        """Wait until nothing runs or waits."""
        with self._changed:
            assert self._changed.wait_for(
                lambda: self.states and self.states[-1] == QueueState(None, ()), WAIT_S)

    def job(self, name: str, owner: str = "", rid: int | None = None,
            gate: threading.Event | None = None, exclusive: bool = False) -> Job:
        started, finished = threading.Event(), threading.Event()

        def run() -> None:
            self.ran.append(name)
            started.set()
            if gate is not None:
                assert gate.wait(WAIT_S)
            finished.set()

        job = Job(run, owner=owner, request_id=rid, exclusive=exclusive,
                  dropped=lambda: self.dropped.append(name))
        job.started = started  # type: ignore[attr-defined]
        job.finished = finished  # type: ignore[attr-defined]
        return job


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def scheduler(recorder: Recorder):
    s = Scheduler(recorder.cancelled.append, recorder.state)
    yield s
    s.close()


def drain(scheduler: Scheduler, recorder: Recorder) -> None:
    recorder.idle()


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
    scheduler = Scheduler(recorder.cancelled.append, recorder.state)
    gate = threading.Event()
    running = recorder.job("running", "a", 1, gate)
    scheduler.submit(running)
    assert running.started.wait(WAIT_S)  # type: ignore[attr-defined]
    scheduler.submit(recorder.job("waiting", "b", 2))
    assert QueueState(("a", 1), (("b", 2),), (("a", 1),)) in recorder.states
    closer = threading.Thread(target=scheduler.close)
    closer.start()
    gate.set()
    closer.join(WAIT_S)
    assert recorder.dropped == ["waiting"] and recorder.ran == ["running"]
    with pytest.raises(RuntimeError):
        scheduler.submit(recorder.job("late"))


def test_replies_run_side_by_side_in_their_engines_lanes(recorder: Recorder) -> None:
    lanes = {"": 2, "other": 1}
    scheduler = Scheduler(recorder.cancelled.append, recorder.state,
                          lambda group: lanes.get(group, 1))
    try:
        gates = [threading.Event() for _ in range(5)]
        a = recorder.job("a", "chat:1", 1, gates[0])
        b = recorder.job("b", "chat:2", 2, gates[1])
        c = recorder.job("c", "api:x", 3, gates[2])
        d = Job(recorder.job("d", "api:y", 4, gates[3]).run, owner="api:y", request_id=4,
                group="other")
        for job in (a, b, c, d):
            scheduler.submit(job)
        assert a.started.wait(WAIT_S) and b.started.wait(WAIT_S)  # type: ignore[attr-defined]
        assert c.started.is_set() is False  # type: ignore[attr-defined]
        state = scheduler.state()
        assert state.lanes == 2 and {rid for _, rid in state.busy} >= {1, 2}
        assert state.ahead_of("api:x", 3) == ("chat:1", 1)
        assert state.activity()["api:x"] == "waiting"
        # Another engine's lane is free: its reply runs beside the window's two.
        assert scheduler.busy_in("other") == 1 and scheduler.busy_in("") == 2
        # A load of the window's engine waits for its replies, and c waits for the load.
        loaded = threading.Event()
        scheduler.submit(Job(loaded.set, owner="engine", exclusive=True))
        gates[0].set()
        assert a.finished.wait(WAIT_S)  # type: ignore[attr-defined]
        assert not loaded.is_set()  # b still runs on that engine
        gates[1].set()
        assert loaded.wait(WAIT_S)
        assert c.started.wait(WAIT_S)  # type: ignore[attr-defined]
        for gate in gates:
            gate.set()
    finally:
        scheduler.close()
    assert recorder.ran.index("c") > recorder.ran.index("a")


def test_a_waiting_exclusive_job_with_an_id_can_be_cancelled(
        scheduler: Scheduler, recorder: Recorder) -> None:
    gate = threading.Event()
    running = recorder.job("reply", "chat:1", 1, gate)
    scheduler.submit(running)
    assert running.started.wait(WAIT_S)  # type: ignore[attr-defined]
    scheduler.submit(recorder.job("tune", "engine", -5, exclusive=True))
    assert scheduler.cancel(-5) is True and recorder.dropped == ["tune"]
    gate.set()
    drain(scheduler, recorder)
    assert recorder.ran == ["reply"]
