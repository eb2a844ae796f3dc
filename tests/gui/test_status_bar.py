"""The status bar is fields, each the only writer of its widgets (issue 37, point 4): a reply's
progress does not wipe the model's notice, and no controller holds a status bar widget."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.ui.chat.bubble import READING
from inglenook.ui.main_window import MainWindow
from inglenook.ui.window import status_bar
from tests.gguf_tools import rewrite_metadata
from tests.gui.conftest import LOAD_TIMEOUT_MS, REPLY_TIMEOUT_MS, Script, start_reply, wait_reply

CHATML_NOTICE = ("No chat template in the file: using ChatML, chosen from its <|im_start|> and "
                 "<|im_end|> tokens.")


def test_a_reply_in_progress_leaves_the_model_notice_shown(
        qtbot: QtBot, window: MainWindow, script: Script, bundled_model: Path) -> None:
    copy = rewrite_metadata(bundled_model, paths.models_dir() / "SmolLM2-no-template.gguf",
                            {"tokenizer.chat_template": None})
    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS):
        window.models.load(str(copy))
    bar = window.status_bar
    assert bar.model.notice.text() == CHATML_NOTICE and bar.model.notice.isVisible()
    assert CHATML_NOTICE in bar.model.notice.toolTip()  # the whole of it when cut short

    script.write(default={"text": "Slow first word", "token_ms": 400})
    start_reply(qtbot, window, "Hello")
    qtbot.waitUntil(lambda: window.chats.session.reply is not None
                    and window.chats.session.reply.phase == "streaming",
                    timeout=REPLY_TIMEOUT_MS)
    assert bar.reply.text.text() == READING and bar.reply.text.isVisible()
    assert bar.model.notice.text() == CHATML_NOTICE and bar.model.notice.isVisible()
    window.chats.copy_last_reply()  # a passing notice beside them (the question has no reply)
    wait_reply(qtbot, window)
    assert bar.reply.text.text() == "" and not bar.reply.text.isVisible()
    assert bar.model.notice.text() == CHATML_NOTICE  # said while that model is loaded
    window.chats.copy_last_reply()
    assert bar.notice.label.text() == "Copied the last reply."
    assert bar.model.notice.text() == CHATML_NOTICE and bar.reply.text.text() == ""


def test_a_load_says_so_in_the_model_field_and_a_reply_field_stays_its_own(
        qtbot: QtBot, window: MainWindow, bundled_model: Path) -> None:
    bar = window.status_bar
    seen = Seen(bar)
    window.worker.model_loading.connect(seen.note)  # queued after the status bar's own slot
    with qtbot.waitSignal(window.model_ready, timeout=LOAD_TIMEOUT_MS):
        window.models.load(str(bundled_model))
    assert seen.texts and all(text == f"Loading {bundled_model.name}…" for text in seen.texts)
    assert bar.model.notice.text() == "" and not bar.model.progress.isVisible()
    assert bar.reply.text.text() == ""


class Seen(QObject):
    """What the model's notice said each time the worker reported the load's progress (a
    QObject on the GUI thread: the worker's signals reach it queued, as they reach the bar)."""

    def __init__(self, bar: status_bar.StatusBar) -> None:
        super().__init__(bar)
        self.bar = bar
        self.texts: list[str] = []

    @Slot(str, float)
    def note(self, _path: str, _fraction: float) -> None:
        self.texts.append(self.bar.model.notice.text())


def _status_widgets_held(root: QObject, bar: QWidget) -> list[str]:
    """Paths from `root` through its attributes (and theirs) to a widget of the status bar; a
    field of the status bar may be held (it is fed), not looked into."""
    fields = (*(cls for cls in vars(status_bar).values() if isinstance(cls, type)
                and cls.__module__ == status_bar.__name__),
              type(bar.context), type(bar.lanes), type(bar.memory))
    found: list[str] = []
    seen: set[int] = set()
    work: list[tuple[str, object]] = [(type(root).__name__, root)]
    while work:
        where, obj = work.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        attributes = dict(getattr(obj, "__dict__", {}))
        attributes.update((slot, getattr(obj, slot)) for cls in type(obj).__mro__
                          for slot in getattr(cls, "__slots__", ()) if hasattr(obj, slot))
        for name, value in attributes.items():
            if isinstance(value, QWidget) and (value is bar or bar.isAncestorOf(value)):
                found.append(f"{where}.{name}")
            elif isinstance(value, fields):
                continue
            elif not isinstance(value, QWidget) and (  # views are not looked into
                    isinstance(value, QObject)
                    or type(value).__module__.startswith("inglenook.ui.")):
                work.append((f"{where}.{name}", value))
    return found


def test_no_controller_holds_a_widget_of_the_status_bar(window: MainWindow) -> None:
    bar = window.status_bar
    controllers = [value for value in vars(window).values()
                   if isinstance(value, QObject) and not isinstance(value, QWidget)]
    assert len(controllers) >= 8  # models, chats, side, history, server, loaded, tools, …
    held = [path for controller in controllers for path in _status_widgets_held(controller, bar)]
    assert not held, held
