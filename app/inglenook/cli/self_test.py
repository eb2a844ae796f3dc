"""`inglenook --self-test`: prove an installation works end to end, without a screen.

The real window starts on Qt's offscreen platform with a throw-away profile (the user's chats and
settings are never touched), loads the bundled model through the real engine host, writes a few
greedy tokens and quits. A bundle that lacks a Qt plugin, a llama.cpp library, the model or the
resources fails here rather than on a user's desktop. Exit status 0 means every step passed.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

TIMEOUT_S = 180.0
PROMPT = "Say hello."
MAX_TOKENS = 8


def _say(text: str) -> None:
    print(f"self-test: {text}", flush=True)


def run() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    # Set before anything reads paths: the profile (and the engine's log) live here.
    home = tempfile.mkdtemp(prefix="inglenook-self-test-")
    os.environ["INGLENOOK_HOME"] = home
    started = time.monotonic()

    from PySide6.QtCore import QTimer, QtMsgType, qInstallMessageHandler
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication

    from inglenook import paths
    from inglenook.core.load import LoadOptions
    from inglenook.core.settings import Settings
    from inglenook.ui.app import configure, stylesheet

    model = paths.bundled_model_path()
    if model is None:
        return _fail("the bundled model is missing", home)
    if not stylesheet():
        return _fail(f"no stylesheet under {paths.resources_dir()}", home)

    def qt_message(_kind: QtMsgType, _context: object, message: str) -> None:
        if "propagateSizeHints" not in message:  # the offscreen platform's one harmless note
            print(message, file=sys.stderr, flush=True)

    qInstallMessageHandler(qt_message)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    configure(app)  # type: ignore[arg-type]
    from inglenook.ui.main_window import MainWindow

    settings = Settings(last_model=str(model), load=LoadOptions(n_ctx=2048))
    settings.sampling = settings.sampling.replace(temperature=0.0, seed=1, max_tokens=MAX_TOKENS)
    win = MainWindow(settings=settings)
    outcome: dict[str, object] = {}

    def finish(ok: bool, text: str) -> None:
        if "ok" not in outcome:
            outcome.update(ok=ok, text=text)
            app.quit()

    def shown() -> None:
        _say(f"window shown after {time.monotonic() - started:.2f} s "
             f"({QGuiApplication.platformName()} platform)")

    def ready(info: object) -> None:
        _say(f"model loaded after {time.monotonic() - started:.2f} s: {model.name}")
        win.chats.send(PROMPT)

    def replied(_rid: int, result: object) -> None:
        reason = getattr(result, "reason", "?")
        turns = win.chats.session.turns()
        text = turns[-1].content if turns and turns[-1].role == "assistant" else ""
        if reason in ("stop", "length") and text.strip():
            finish(True, f"reply ({reason}): {text.strip()!r}")
        else:
            finish(False, f"reply ended with {reason}: {getattr(result, 'message', '')!r}")

    win.shown.connect(shown)
    win.model_ready.connect(ready)
    win.reply_finished.connect(replied)
    win.models.failed.connect(lambda _path, message: finish(False, f"load failed: {message}"))
    win.engine_lost.connect(lambda message: finish(False, f"engine lost: {message}"))
    QTimer.singleShot(int(TIMEOUT_S * 1000),
                      lambda: finish(False, f"no reply within {TIMEOUT_S:.0f} s"))
    win.show()
    app.exec()
    win.close()  # stops the engine host
    if not outcome.get("ok"):
        return _fail(str(outcome.get("text", "the window closed early")), home)
    _say(str(outcome["text"]))
    _say(f"passed in {time.monotonic() - started:.2f} s")
    shutil.rmtree(home, ignore_errors=True)  # kept only when something failed
    return 0


def _fail(reason: str, home: str) -> int:
    print(f"self-test FAILED: {reason} (profile and engine log in {home})", file=sys.stderr,
          flush=True)
    return 1
