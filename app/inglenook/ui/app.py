"""Start the Qt application and open the main window."""

from __future__ import annotations

import os
import sys
import time

from PySide6.QtGui import QFont, QGuiApplication, QIcon
from PySide6.QtWidgets import QApplication

from inglenook import __version__, paths

# Set by bench/ to time start-up: the window prints when it is first shown.
REPORT_SHOWN_ENV = "INGLENOOK_REPORT_SHOWN"


def stylesheet() -> str:
    path = paths.resources_dir() / "style.qss"
    if not path.is_file():
        return ""
    icons = (paths.resources_dir() / "icons").as_posix()
    return path.read_text(encoding="utf-8").replace("@ICONS@", icons)


def configure(app: QApplication) -> None:
    app.setApplicationName("Inglenook")
    app.setApplicationDisplayName("Inglenook")
    app.setApplicationVersion(__version__)
    app.setDesktopFileName("inglenook")
    icon = paths.resources_dir() / "icons" / "inglenook.svg"
    if icon.is_file():
        app.setWindowIcon(QIcon(str(icon)))
    font = QGuiApplication.font()
    font.setPointSizeF(max(font.pointSizeF(), 10.5))
    font.setStyleStrategy(QFont.StyleStrategy.PreferAntialias)
    app.setFont(font)
    app.setStyle("Fusion")
    app.setStyleSheet(stylesheet())


def run_app() -> int:
    app = QApplication.instance() or QApplication(sys.argv)
    configure(app)  # type: ignore[arg-type]
    from inglenook.ui.main_window import MainWindow

    window = MainWindow()
    app.aboutToQuit.connect(window.shutdown)  # also when quit without closing the window
    if os.environ.get(REPORT_SHOWN_ENV):
        window.shown.connect(lambda: print(f"window-shown {time.time():.3f}", flush=True))
        window.model_ready.connect(lambda _: print(f"model-ready {time.time():.3f}", flush=True))
    window.show()
    return app.exec()
