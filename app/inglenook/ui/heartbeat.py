"""A GUI-thread heartbeat: a timer that should fire every INTERVAL_MS, and how late it was.

A late beat is time the GUI thread spent on something else (work done on it, a layout, a
paint): the window could not answer the user meanwhile. bench/model_actions_stall.py and the
other stall benches measure with it; tests use `Heartbeat.beats` to wait for the event loop to
have turned (never for a figure: no timed assertions).

    beat = Heartbeat()
    beat.start()
    …  # the action, with the event loop running
    beat.stop()
    beat.max_stall_ms, beat.stalls(100)
"""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, Qt, QTimer

INTERVAL_MS = 10


class Heartbeat(QObject):
    """Measures the lateness of a precise timer on the thread that owns it (the GUI thread)."""

    def __init__(self, parent: QObject | None = None, interval_ms: int = INTERVAL_MS) -> None:
        super().__init__(parent)
        self.interval_ms = interval_ms
        self._timer = QTimer(self, interval=interval_ms)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.timeout.connect(self._beat)
        self._last = 0.0
        self.lateness_ms: list[float] = []  # how late each beat was
        self.worst_at = ""  # the label (mark()) in force at the worst beat
        # CPU time the GUI thread used between the beats of the worst stall: near its length,
        # the thread was busy; near zero, it waited (for a core on a loaded machine, the GIL)
        self.worst_cpu_ms = 0.0
        self._cpu = 0.0
        self._label = ""

    @property
    def beats(self) -> int:
        return len(self.lateness_ms)

    def start(self) -> None:
        self.lateness_ms.clear()
        self.worst_at = ""
        self.worst_cpu_ms = 0.0
        self._last, self._cpu = time.perf_counter(), time.thread_time()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        self._beat()  # a stall that ends with the measurement counts too

    def mark(self, label: str) -> None:
        """Name what runs from now on (the worst stall says which)."""
        self._label = label

    def _beat(self) -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        late = max(0.0, (now - self._last) * 1000 - self.interval_ms)
        if late > self.max_stall_ms:
            self.worst_at = self._label
            self.worst_cpu_ms = (cpu - self._cpu) * 1000
        self.lateness_ms.append(late)
        self._last, self._cpu = now, cpu

    @property
    def max_stall_ms(self) -> float:
        return max(self.lateness_ms, default=0.0)

    def stalls(self, over_ms: float) -> list[float]:
        """The beats later than `over_ms`."""
        return [late for late in self.lateness_ms if late > over_ms]
