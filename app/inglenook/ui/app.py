"""Start the Qt application and open the main window."""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Sequence

from PySide6.QtGui import QFont, QGuiApplication, QIcon, QImageReader
from PySide6.QtWidgets import QApplication

from inglenook import __version__, paths
from inglenook.core.images import MAX_PIXELS
from inglenook.core.jsonload import JsonLoadError, load_json
from inglenook.core.settings import THEMES
from inglenook.ui import theme

# Set by bench/ to time start-up: the window prints when it is first shown.
REPORT_SHOWN_ENV = "INGLENOOK_REPORT_SHOWN"


def stylesheet() -> str:
    """The style sheet of the theme in use ("" when the resources are missing)."""
    return theme.stylesheet(theme.current())


def stored_theme() -> str:
    """The theme the settings ask for, read without repairing anything: the window loads the
    settings properly (and reports their problems) after the theme is in place."""
    try:
        data = load_json(paths.settings_file())
    except (OSError, JsonLoadError):
        return "system"
    value = data.get("theme") if isinstance(data, dict) else None
    return value if value in THEMES else "system"


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
    theme.manager().set_mode(stored_theme())  # palette and style sheet, before any window
    limit_image_decoding()


def limit_image_decoding() -> None:
    """Qt decodes no image larger than the largest Inglenook reads (core/images.MAX_PIXELS, at
    four bytes a pixel): a second guard behind decoding images with Pillow off the GUI thread,
    for what Qt still decodes (a clipboard that offers only its own image type)."""
    QImageReader.setAllocationLimit(-(-MAX_PIXELS * 4 // 2**20))


def started() -> None:
    """The window is built: what exists now lives as long as the app. Frozen out of the cyclic
    garbage collector, it is not walked again by every full collection (with a long chat open,
    one took 130 ms of the GUI thread: a visible stall while scrolling)."""
    gc.collect()
    gc.freeze()


def run_app(qt_args: Sequence[str] = ()) -> int:
    """The window. `qt_args` are Qt's own command-line options (-platform, -style …)."""
    app = QApplication.instance() or QApplication([sys.argv[0], *qt_args])
    configure(app)  # type: ignore[arg-type]
    from inglenook.ui.main_window import MainWindow

    window = MainWindow()
    app.aboutToQuit.connect(window.shutdown)  # also when quit without closing the window
    if os.environ.get(REPORT_SHOWN_ENV):
        window.shown.connect(lambda: print(f"window-shown {time.time():.3f}", flush=True))
        window.model_ready.connect(lambda _: print(f"model-ready {time.time():.3f}", flush=True))
    window.show()
    started()
    return app.exec()
