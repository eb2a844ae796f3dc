"""ui/heartbeat.py, the GUI-thread probe the stall benches use: a beat held up by work on the
GUI thread is counted late by at least as long as the work held it (a lower bound, which
scheduling can only raise)."""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from inglenook.ui.heartbeat import Heartbeat


def test_work_on_the_gui_thread_shows_as_a_late_beat(qtbot: QtBot) -> None:
    beat = Heartbeat()
    beat.start()
    qtbot.waitUntil(lambda: beat.beats >= 3)

    def hold() -> None:
        beat.mark("held")
        until = time.perf_counter() + 0.15
        while time.perf_counter() < until:
            pass

    QTimer.singleShot(0, hold)
    qtbot.waitUntil(lambda: beat.max_stall_ms > 0 and beat.worst_at == "held")
    beat.stop()
    assert beat.max_stall_ms >= 150 - beat.interval_ms
    assert beat.stalls(100) and beat.worst_at == "held"
