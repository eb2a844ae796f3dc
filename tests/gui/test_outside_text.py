"""Outside text is shown as text (issue 17, item 1). Qt reads a label's or a tooltip's text as
HTML when it looks like HTML, and rich text loads `<img src=…>` from the disk on the GUI thread.

Every label, button, tooltip, action tooltip and item tooltip of the window, the Models dialog
(the Library with a hostile file, Discover with a Hub file whose header names a hostile
architecture) and the Tools dialog (an MCP tool with a hostile description) is rendered and
shown, filled with markup that points at a FIFO (its slashes as entities, as a file name
allows); a watcher process sees any open of the FIFO (tests/helpers/fifo_watch.py).
"""

from __future__ import annotations

import html
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QAbstractItemModel, QAbstractListModel, QModelIndex, QPoint, Qt, QTimer
from PySide6.QtGui import Qt as GuiQt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QApplication,
    QComboBox,
    QLabel,
    QMessageBox,
    QTextEdit,
    QToolTip,
    QWidget,
)
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.core.attachments import Attachment
from inglenook.core.provenance import ModelRecord, Provenance
from inglenook.tools.cards import ToolCard
from inglenook.tools.formats import ToolCall
from inglenook.tools.results import ToolResult
from inglenook.ui.chat.details import DetailsDialog
from inglenook.ui.history.search_dialog import SearchDialog
from inglenook.ui.models import library as models_library
from inglenook.ui.models.bridge import DownloadBridge
from inglenook.ui.models.dialog import ModelsDialog
from inglenook.ui.plain import plain_tip
from inglenook.ui.tools.tools_dialog import ToolsDialog
from tests import fakehub
from tests.fakehub import FakeFile, FakeHub
from tests.gui.conftest import Script, fake_worker, greedy_settings, open_window
from tests.gui.test_models_dialog import open_repo, tiny_gguf, wait_headers
from tests.helpers.fifo_watch import FifoWatch

fake_hub = fakehub.fake_hub  # the fixture, under its own name
SERVER = Path(__file__).resolve().parents[1] / "helpers" / "mcp_server.py"
WAIT_MS = 60_000
# The offscreen platform notes that it cannot raise a tooltip's window; harmless.
pytestmark = pytest.mark.qt_log_ignore("This plugin does not support")


@pytest.fixture
def watch() -> Iterator[FifoWatch]:
    w = FifoWatch()
    yield w
    w.close()


def model_tips(model: QAbstractItemModel, parent: QModelIndex | None = None) -> Iterator[str]:
    parent = parent if parent is not None else QModelIndex()
    flat = isinstance(model, QAbstractListModel)  # its columnCount and hasChildren are private
    columns = 1 if flat else model.columnCount(parent)
    for row in range(model.rowCount(parent)):
        for column in range(columns):
            index = model.index(row, column, parent)
            tip = index.data(Qt.ItemDataRole.ToolTipRole)
            if isinstance(tip, str) and tip:
                yield tip
            if column == 0 and not flat and model.hasChildren(index):
                yield from model_tips(model, index)


class Walk:
    """Shows every text of a window as Qt would: renders it, lays out each label (rich text
    loads its images then) and shows each tooltip. `seen` keeps the texts that held `needle`."""

    def __init__(self, needle: str) -> None:
        self.needle = needle
        self.seen: dict[str, str] = {}  # where (kind:objectName or class) -> text

    def _note(self, where: str, text: str, rich: bool | None = None) -> None:
        shown = text  # what the user reads of it: an escaped tooltip reads as the original
        if GuiQt.mightBeRichText(text) if rich is None else rich:
            shown = html.unescape(re.sub(r"<[^>]*>", "", text))
        if self.needle in shown:
            self.seen.setdefault(where, text)

    def __call__(self, top: QWidget) -> None:
        top.grab()  # paints what is visible: labels, buttons, item views and their widgets
        for widget in [top, *top.findChildren(QWidget)]:
            name = widget.objectName() or type(widget).__name__
            if isinstance(widget, QLabel):
                widget.sizeHint()
                widget.heightForWidth(240)  # a hidden label is laid out too
                form = widget.textFormat()
                self._note(f"label:{name}", widget.text(), form == Qt.TextFormat.RichText or (
                    form == Qt.TextFormat.AutoText and GuiQt.mightBeRichText(widget.text())))
            if isinstance(widget, QTextEdit):  # read-only plain text (Details' values)
                self._note(f"text:{name}", widget.toPlainText(), rich=False)
            if isinstance(widget, QAbstractButton):
                self._note(f"button:{name}", widget.text(), rich=False)
            tips = [(f"tip:{name}", widget.toolTip())]
            tips += [(f"action:{a.text()}", a.toolTip()) for a in widget.actions()]
            model = (widget.model() if isinstance(widget, QAbstractItemView | QComboBox)
                     else None)
            if model is not None:
                tips += [(f"item:{name}", tip) for tip in model_tips(model)]
            for where, tip in tips:
                if tip:
                    self._note(where, tip)
                    QToolTip.showText(QPoint(20, 20), tip, widget)
                    QToolTip.hideText()


def hostile_conversation(win, hostile: str) -> int:
    """A chat whose title, attachment, tool card, model name and error are hostile."""
    store = win.store
    conv = store.create_conversation(f"{hostile} hostile title")
    user = store.add_message(conv, "user", "Read this.", None, attachments=[
        Attachment(f"{hostile}.txt", "text", 5, "hello")])
    card = ToolCard(ToolCall(hostile, {hostile: hostile}), server="calc", tool=hostile,
                    state="done", decision="once", result=ToolResult("ok", hostile))
    reply = store.add_message(conv, "assistant", "Done.", user, tool_cards=[card],
                              provenance=Provenance(model=ModelRecord(name=hostile),
                                                    system_prompt=hostile))
    again = store.add_message(conv, "user", "Again.", reply)
    store.add_message(conv, "assistant", "", again, status="error",
                      provenance=Provenance(error=hostile))
    return conv


def walk_modal(qtbot: QtBot, walk: Walk, ask: object) -> None:
    """Run `ask` (which shows a modal box), walking the box before answering Cancel."""
    walked: list[QWidget] = []

    def answer() -> None:
        box = QApplication.activeModalWidget()
        if box is None:
            QTimer.singleShot(10, answer)
            return
        walk(box)
        walked.append(box)
        box.reject()

    QTimer.singleShot(0, answer)
    ask()  # type: ignore[operator]
    assert walked and isinstance(walked[0], QMessageBox)


def test_the_watch_sees_rich_text_open_the_fifo(qtbot: QtBot, watch: FifoWatch) -> None:
    """The probe itself: markup shown as rich text does open the FIFO, and the watcher says so
    (so the tests below can fail)."""
    label = QLabel(f"{watch.image()} x")
    qtbot.addWidget(label)
    label.sizeHint()
    assert watch.opens() > 0


def test_no_text_from_outside_opens_a_file_in_the_window(
        qtbot: QtBot, script: Script, tmp_path: Path, watch: FifoWatch) -> None:
    hostile = watch.image()
    # The model's name is its file's stem (the fake engine reads its header).
    model = tiny_gguf(paths.models_dir() / f"{hostile}.gguf", 0.1)
    settings = greedy_settings()
    settings.last_model = str(model)
    win = open_window(qtbot, fake_worker(script, tmp_path / "engine.log"), settings)
    assert win.models.model is not None and win.models.model.name == hostile
    conv = hostile_conversation(win, hostile)
    win.history.refresh()
    win.chats.open(conv)
    win.queue_notice.show_waiting(hostile, 2)
    win.banner.show_message(hostile)
    win.panel_button.setChecked(True)
    walk = Walk(hostile)
    walk(win)
    search = SearchDialog(win.store, win)
    qtbot.addWidget(search)
    search.query.setText("hostile")
    search.run_query()
    walk(search)
    reply = next(m for m in win.chats.session.path if m.role == "assistant")
    details = DetailsDialog(reply, win)
    qtbot.addWidget(details)
    walk(details)
    walk_modal(qtbot, walk, lambda: models_library.ask_import_mode(win, f"{hostile}.gguf"))
    win.close()
    assert watch.opens() == 0
    for where in ("label:statusModel", "label:queueLabel", "label:banner", "label:bubbleAuthor",
                  "label:bubbleNotice", "tip:statusModel", "tip:attachmentChip",
                  "tip:toolCardResult", "label:toolCardTitle", "item:conversationList",
                  "item:modelPicker", "label:searchHit", "text:detailsValue",
                  "label:qt_msgbox_label"):
        assert where in walk.seen, (where, sorted(walk.seen))


def test_no_text_from_outside_opens_a_file_in_the_models_dialog(
        qtbot: QtBot, fake_hub: FakeHub, tmp_path: Path, watch: FifoWatch) -> None:
    hostile = watch.image()
    tiny_gguf(paths.models_dir() / f"{hostile}.gguf", 0.1, **{
        "general.architecture": hostile, "general.name": hostile})
    served = tiny_gguf(tmp_path / "served" / "Evil-Q4_K_M.gguf", 0.1,
                       **{"general.architecture": hostile})
    fake_hub.add_repo("org/Evil-GGUF", downloads=5)
    fake_hub.add_file("org/Evil-GGUF", FakeFile(served.name, content=served.read_bytes()))
    bridge = DownloadBridge()
    dialog = ModelsDialog(bridge)
    qtbot.addWidget(dialog)
    dialog.show()
    wait_headers(qtbot, dialog)
    walk = Walk(hostile)
    library = dialog.library
    for row in range(library.table.topLevelItemCount()):
        library.table.setCurrentItem(library.table.topLevelItem(row))
        walk(dialog)
    open_repo(qtbot, dialog, "evil", "org/Evil-GGUF")
    panel = dialog.discover.repo_panel
    qtbot.waitUntil(lambda: panel.report is not None or bool(panel.fit_error), timeout=WAIT_MS)
    walk(dialog)
    bridge.close()
    assert watch.opens() == 0
    for where in ("label:modelDetailsName", "label:modelDetailsFacts", "item:libraryTable",
                  "label:repoStatus", "tip:QWidget"):  # the Won't load chip's holder
        assert where in walk.seen, (where, sorted(walk.seen))


def test_no_text_from_outside_opens_a_file_in_the_tools_dialog(
        qtbot: QtBot, script: Script, tmp_path: Path, watch: FifoWatch) -> None:
    hostile = watch.image()
    config = paths.mcp_config_file()
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"mcpServers": {"calc": {
        "command": sys.executable, "args": [str(SERVER), "--name", "calc",
                                            "--describe", f"{hostile} describes itself"]}}}))
    win = open_window(qtbot, fake_worker(script, tmp_path / "engine.log"))
    dialog = ToolsDialog(win.chats.tools, win.chats.session, win.models.model, win)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.servers.setCurrentRow(0)
    qtbot.waitUntil(lambda: dialog.tool_list.count() >= 8, timeout=WAIT_MS)
    walk = Walk(hostile)
    walk(dialog)
    dialog.close()
    win.close()
    assert watch.opens() == 0
    assert {"item:toolList", "item:toolServerList"} <= set(walk.seen), sorted(walk.seen)


@pytest.mark.parametrize("text", [
    "plain words", "a < b > c", "<b>bold</b> and &lt;", "Tom & Jerry's \"show\"",
    "line one <i>x</i>\n  indented  line two", '<img src="&#47;dev&#47;zero">'])
def test_a_tooltip_shows_exactly_its_text(qtbot: QtBot, text: str) -> None:
    tip = plain_tip(text)
    if not GuiQt.mightBeRichText(text):
        assert tip == text  # shown as plain text as it is
        return
    document = QTextDocument()
    document.setHtml(tip)
    assert document.toPlainText() == text
