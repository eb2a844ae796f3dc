"""The longest GUI-thread stall while a reply streams at full speed into a 10,000-message
conversation (mixed Markdown, imported into the store), measured by a QTimer probe; also the
GUI thread's CPU time to send the message (only the turns the model could hold are read and
sent: chat/history.py), and the RSS of the window and engine processes. Prints one JSON
line. Run by bench/run.py in its own process (offscreen unless told otherwise).

`--quick`: 200 messages (of which a 512-token context holds a few), a short reply.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from long_chat import fill

PROBE_MS = 5
HISTORY = 10_000


def main() -> int:
    quick = "--quick" in sys.argv
    history, max_tokens = (200, 48) if quick else (HISTORY, 1500)
    home = tempfile.TemporaryDirectory()
    os.environ["INGLENOOK_HOME"] = home.name
    long_id, _ = fill(history)
    from inglenook.core.settings import Settings
    from inglenook.ui.app import configure, started
    from inglenook.ui.main_window import MainWindow

    app = QApplication(sys.argv[:1])
    configure(app)
    settings = Settings()
    # quick: less history to read before streaming
    settings.load = settings.load.replace(n_ctx=512 if quick else 4096)
    settings.sampling = settings.sampling.replace(temperature=0.0, seed=1, max_tokens=max_tokens,
                                                  repeat_penalty=1.0)
    window = MainWindow(settings=settings)
    app.aboutToQuit.connect(window.shutdown)
    window.resize(1280, 820)
    window.show()
    started()
    window.chats.open(long_id)

    gaps: list[float] = []
    last = [0.0]
    probing = [False]

    def probe() -> None:
        now = time.perf_counter()
        if probing[0] and last[0]:
            gaps.append(now - last[0])
        last[0] = now

    timer = QTimer()
    timer.setInterval(PROBE_MS)
    timer.timeout.connect(probe)
    result: dict[str, float] = {}

    def start() -> None:
        window.composer.edit.setPlainText(
            "Write a long, detailed story about a lighthouse keeper and a storm.")
        cpu = time.thread_time()
        window.composer.send_requested.emit(window.composer.edit.toPlainText(), [])
        result["gui_send_ms"] = round((time.thread_time() - cpu) * 1000, 1)
        timer.start()

    def first_text() -> None:
        probing[0] = True

    def finished(_rid: int, _finish: object) -> None:
        probing[0] = False
        timer.stop()
        bubble = window.chat.bubbles[-1]
        window_rss = psutil.Process().memory_info().rss
        engine_rss = psutil.Process(window.worker.client.pid).memory_info().rss
        result.update(
            gui_max_stall_ms=round(max(gaps) * 1000 - PROBE_MS, 1) if gaps else -1.0,
            gui_stall_p99_ms=round(sorted(gaps)[int(len(gaps) * 0.99)] * 1000 - PROBE_MS, 1),
            gui_streamed_chars=len(bubble.text),
            gui_history_messages=history,
            gui_bubbles=len(window.chat.bubbles),
            rss_window_mb=round(window_rss / 2**20, 1),
            rss_engine_mb=round(engine_rss / 2**20, 1))
        window.close()
        app.quit()

    window.model_ready.connect(lambda _info: QTimer.singleShot(200, start))
    window.worker.token_delta.connect(first_text)
    window.reply_finished.connect(finished)
    QTimer.singleShot(180_000, app.quit)
    app.exec()
    print(json.dumps(result))
    home.cleanup()
    return 0 if "gui_max_stall_ms" in result else 1


if __name__ == "__main__":
    raise SystemExit(main())
