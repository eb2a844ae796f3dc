"""Two chats in the window replying at once (issue 18): both stream (for how long at the same
time), and the longest GUI-thread stall meanwhile, measured by a QTimer probe. One JSON line;
run by bench/run.py in its own process (offscreen unless told otherwise). `--quick`: short
replies.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from inglenook.core.settings import Settings
from inglenook.ui.app import configure
from inglenook.ui.main_window import MainWindow

PROBE_MS = 5


def main() -> int:
    quick = "--quick" in sys.argv
    app = QApplication(sys.argv[:1])
    configure(app)
    settings = Settings()
    settings.load = settings.load.replace(n_ctx=2048)
    settings.sampling = settings.sampling.replace(temperature=0.0, seed=1, repeat_penalty=1.0,
                                                  max_tokens=48 if quick else 400)
    window = MainWindow(settings=settings)
    app.aboutToQuit.connect(window.shutdown)
    window.resize(1280, 820)
    window.show()
    gaps: list[float] = []
    last = [0.0]
    streaming: dict[int, list[float]] = {}  # request id -> times text arrived
    ended: set[int] = set()
    result: dict[str, float] = {}

    def probe() -> None:
        now = time.perf_counter()
        if streaming and last[0]:
            gaps.append(now - last[0])
        last[0] = now

    timer = QTimer()
    timer.setInterval(PROBE_MS)
    timer.timeout.connect(probe)

    def send(text: str) -> None:
        window.composer.edit.setPlainText(text)
        window.composer.send_requested.emit(text, [])

    def start() -> None:
        timer.start()
        send("Write a long, detailed story about a lighthouse keeper and a storm.")
        window.chats.new_chat()
        send("Write a long, detailed story about a baker and a dragon.")

    def delta(rid: int, _text: str) -> None:
        streaming.setdefault(rid, []).append(time.perf_counter())

    def finished(rid: int, _finish: object) -> None:
        ended.add(rid)
        if len(ended) < 2:
            return
        timer.stop()
        spans = [(times[0], times[-1]) for times in streaming.values() if times]
        both = max(0.0, min(e for _, e in spans) - max(s for s, _ in spans)) if len(
            spans) == 2 else 0.0
        result.update(
            two_chats_max_stall_ms=round(max(gaps) * 1000 - PROBE_MS, 1) if gaps else -1.0,
            two_chats_streamed=len(spans), two_chats_overlap_s=round(both, 2))
        window.close()
        app.quit()

    window.model_ready.connect(lambda _info: QTimer.singleShot(200, start))
    window.worker.token_delta.connect(delta)
    window.reply_finished.connect(finished)
    QTimer.singleShot(300_000, app.quit)
    app.exec()
    print(json.dumps(result))
    return 0 if result else 1


if __name__ == "__main__":
    raise SystemExit(main())
