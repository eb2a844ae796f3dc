"""Guards against known-bad Qt for Python releases."""

from __future__ import annotations

import sys

import pytest
from PySide6.QtCore import QObject, Signal


class _Emitter(QObject):
    ping = Signal(int, str)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="True is immortal from Python 3.12")
def test_signal_emission_keeps_reference_counts(qapp: object) -> None:
    # PySide6 6.12.0 decremented True's count on every emit; the process aborted once it hit 0.
    emitter = _Emitter()
    received: list[int] = []
    emitter.ping.connect(lambda n, _text: received.append(n))
    before = sys.getrefcount(True)
    for n in range(200):
        emitter.ping.emit(n, "x")
    assert len(received) == 200
    assert sys.getrefcount(True) - before > -10
