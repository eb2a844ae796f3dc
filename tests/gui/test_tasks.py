"""ui/tasks: background work handed back on the GUI thread, stale answers dropped by handle."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from PySide6.QtCore import QObject
from pytestqt.qtbot import QtBot

from inglenook.ui import tasks


def test_a_result_is_delivered_on_the_gui_thread(qtbot: QtBot) -> None:
    gui = threading.current_thread()
    ran_on: list[threading.Thread] = []
    delivered_on: list[threading.Thread] = []

    def work(a: int, b: int) -> int:
        ran_on.append(threading.current_thread())
        return a + b

    task = tasks.run(work, 2, 3, on_done=lambda _r: delivered_on.append(
        threading.current_thread()))
    with qtbot.waitSignal(task.done, timeout=5_000) as done:
        pass
    assert done.args == [5] and ran_on[0] is not gui and delivered_on == [gui]
    assert task.finished and not task.running


def test_progress_then_the_result(qtbot: QtBot) -> None:
    seen: list[object] = []

    def work(report, n: int) -> str:
        for i in range(n):
            report(i)
        return "end"

    task = tasks.run(work, 3, reports=True, on_progress=seen.append, on_done=seen.append)
    qtbot.waitUntil(lambda: task.finished, timeout=5_000)
    assert seen == [0, 1, 2, "end"]


def test_a_failure_is_delivered(qtbot: QtBot) -> None:
    def work() -> None:
        raise ValueError("no such repo")

    done: list[object] = []
    task = tasks.run(work, on_done=done.append)
    with qtbot.waitSignal(task.failed, timeout=5_000) as failed:
        pass
    assert isinstance(failed.args[0], ValueError) and str(failed.args[0]) == "no such repo"
    assert done == []


def test_a_stale_result_is_dropped(qtbot: QtBot) -> None:
    """Cancelled, replaced by a newer task, or its owner destroyed: it never answers."""
    release = threading.Event()
    answers: list[str] = []

    def work(text: str) -> str:
        release.wait(10)
        return text

    cancelled = tasks.run(work, "cancelled", on_done=answers.append)
    cancelled.cancel()
    older = tasks.run(work, "older", on_done=answers.append)
    newer = tasks.run(work, "newer", on_done=answers.append, replaces=older)
    owner = QObject()
    orphan = tasks.run(work, "orphan", on_done=answers.append, owner=owner)
    owner.deleteLater()
    qtbot.waitUntil(lambda: not orphan.running or orphan.stale, timeout=5_000)
    alive = QObject()
    kept = tasks.run(work, "kept", on_done=answers.append, owner=alive)
    release.set()
    qtbot.waitUntil(lambda: newer.finished and kept.finished and orphan.finished,
                    timeout=5_000)
    assert sorted(answers) == ["kept", "newer"] and older.cancelled and orphan.stale


def test_a_future_completed_elsewhere_answers_on_the_gui_thread(qtbot: QtBot) -> None:
    future: Future[int] = Future()
    task = tasks.from_future(future)
    threading.Thread(target=future.set_result, args=(7,)).start()
    with qtbot.waitSignal(task.done, timeout=5_000) as done:
        pass
    assert done.args == [7]
    failing: Future[int] = Future()
    task = tasks.from_future(failing)
    threading.Thread(target=failing.set_exception, args=(OSError("gone"),)).start()
    with qtbot.waitSignal(task.failed, timeout=5_000) as failed:
        pass
    assert isinstance(failed.args[0], OSError)


def test_debounce_coalesces_a_burst_into_one_call(qtbot: QtBot) -> None:
    owner = QObject()
    calls: list[int] = []
    debounced = tasks.debounce(20, lambda: calls.append(1), owner)
    for _ in range(5):
        debounced.call()
    assert calls == [] and debounced.pending
    qtbot.waitUntil(lambda: calls == [1], timeout=5_000)
    assert not debounced.pending  # one call, and none still to come
    debounced.call()
    debounced.flush()
    assert calls == [1, 1] and not debounced.pending
    debounced.call()
    debounced.cancel()
    debounced.flush()  # nothing pending: nothing runs
    assert calls == [1, 1]


def test_writers_are_joined_with_a_bounded_wait(qtbot: QtBot) -> None:
    release = threading.Event()
    task = tasks.run(release.wait, 10, writer=True, name="slow-writer")
    assert tasks.join_writers(0.05) == ["inglenook-slow-writer"]
    release.set()
    assert tasks.join_writers(5) == []
    qtbot.waitUntil(lambda: task.finished, timeout=5_000)
