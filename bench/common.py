"""What the bench scripts share: their log line, the bundled model, N clients at once, and the
window the GUI-stall scripts measure."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from inglenook import paths


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def bundled_model() -> Path | None:
    """The bundled model, or None (said on stderr) when it is missing."""
    model = paths.bundled_model_path()
    if model is None:
        log("The bundled model is missing: run `make setup`.")
    return model


def at_once(n: int, ask: Callable[[int], None]) -> float:
    """ask(0) … ask(n - 1) on n threads started together; the seconds until all ended."""
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(n)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def open_window(max_tokens: int = -1) -> tuple[Any, Any]:
    """A QApplication and the real MainWindow on the default settings (with `max_tokens`, a
    reply's cap: -1, none), shown at 700 × 600 (the size the stall benches measure at); the
    window shuts down when the app quits."""
    from PySide6.QtWidgets import QApplication

    from inglenook.core.settings import Settings
    from inglenook.ui.app import configure, started
    from inglenook.ui.main_window import MainWindow

    app = QApplication(sys.argv[:1])
    configure(app)
    settings = Settings()
    settings.sampling = settings.sampling.replace(max_tokens=max_tokens)
    window = MainWindow(settings=settings)
    app.aboutToQuit.connect(window.shutdown)
    window.resize(700, 600)
    window.show()
    started()
    return app, window
