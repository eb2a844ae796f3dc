"""The GUI thread at model actions, measured with ui/heartbeat.py (a 10 ms timer's lateness): the
longest stall of each action, from the call to the window's answer (goal: none over 100 ms).
Prints one JSON line. Run by bench/run.py in its own process (offscreen unless told otherwise),
the window at 700 × 600 with the bundled model loaded.

  actions_open_gemma_max_stall_ms     File › Open model on the 253 MB Gemma 3 270M (a 262k
                                      vocabulary in its header), until it is loaded
  actions_smaller_copy_max_stall_ms   Library › Smaller copy of the bundled model to Q4_0, from
                                      Make the copy until the copy is checked and listed
  actions_theme_dark_max_stall_ms     View › Theme › Dark, then Light (a 400-message chat and
  actions_theme_light_max_stall_ms      the Models dialog open: every widget is styled again)
  actions_load_back_max_stall_ms      the bundled model loaded again after Gemma
  actions_unload_max_stall_ms         Unload, until the window says no model is loaded
  actions_load_max_stall_ms           Reload the bundled model, until it is loaded

`--quick`: the bundled file opened in Gemma's place (as `open_gemma`), no load back, 100 ms
instead of 500 to settle before and after each action.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/ helpers

from PySide6.QtCore import QEventLoop, QTimer

TIMEOUT_MS = 300_000


def main() -> int:
    quick = "--quick" in sys.argv
    home = tempfile.TemporaryDirectory()
    os.environ["INGLENOOK_HOME"] = home.name
    from tests.helpers.long_chat import add_long_chat

    from common import open_window  # bench/common.py: this script's folder is on sys.path
    from inglenook.ui.heartbeat import Heartbeat
    from inglenook.ui.window.menus import use_theme

    app, window = open_window()
    result: dict[str, float] = {}
    beat = Heartbeat()

    def wait(signal: object, ms: int = TIMEOUT_MS) -> None:
        loop = QEventLoop()
        signal.connect(loop.quit)  # type: ignore[attr-defined]
        QTimer.singleShot(ms, loop.quit)
        loop.exec()
        signal.disconnect(loop.quit)  # type: ignore[attr-defined]

    def settle() -> None:  # quick: the same steps with less waiting (12 settles of 500 ms)
        loop = QEventLoop()
        QTimer.singleShot(100 if quick else 500, loop.quit)
        loop.exec()

    def measure(name: str, action: Callable[[], object], until: object | None) -> None:
        settle()
        beat.start()
        action()
        if until is not None:
            wait(until)
        settle()  # what follows the answer (a list refreshed, a layout) counts too
        beat.stop()
        result[f"actions_{name}_max_stall_ms"] = round(beat.max_stall_ms, 1)

    if window.models.model is None:
        wait(window.model_ready)
    bundled = window.models.path

    from tests.gemma_gguf import gemma_gguf
    gemma = None if quick else gemma_gguf()
    if quick:  # the same path with the bundled file standing in for Gemma: it runs, quickly
        measure("open_gemma", lambda: window.models.open_paths([bundled]), window.model_ready)
    elif gemma is not None:
        measure("open_gemma", lambda: window.models.open_paths([str(gemma)]),
                window.model_ready)
        measure("load_back", lambda: window.models.load(bundled), window.model_ready)

    # A Q4_0 copy of the 98 MB file takes a few seconds, quick or not.
    from inglenook.ui.models.quantize_dialog import QuantizeDialog

    window.models.show_dialog()
    library = window.models._dialog.library  # type: ignore[union-attr]
    dialog = QuantizeDialog(bundled, library)
    dialog.type.setCurrentText("Q4_0")
    dialog.made.connect(library._quantized)
    dialog.open()
    measure("smaller_copy", dialog.start, dialog.made)
    window.models._dialog.hide()  # type: ignore[union-attr]

    window.chats.open(add_long_chat(window.chats.store, 400))
    window.models.show_dialog()
    measure("theme_dark", lambda: use_theme(window, "dark"), None)
    measure("theme_light", lambda: use_theme(window, "light"), None)
    window.models._dialog.hide()  # type: ignore[union-attr]

    measure("unload", window.worker.unload, window.models.unloaded)
    measure("load", lambda: window.models.load(bundled), window.model_ready)

    window.close()
    app.quit()
    print(json.dumps(result))
    home.cleanup()
    return 0



if __name__ == "__main__":
    raise SystemExit(main())
