"""Math and quotes in the real Markdown view: shown as text, loading nothing."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtGui import QTextTable
from pytestqt.qtbot import QtBot

from inglenook.ui.chat import text_part
from inglenook.ui.chat.markdown_view import MarkdownView


def test_math_is_shown_as_text_and_asks_for_no_resource(
        qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    real = text_part.InertDocument.loadResource

    def recording(doc: Any, kind: int, name: QUrl | str) -> Any:
        asked.append(str(name))
        return real(doc, kind, name)

    monkeypatch.setattr(text_part.InertDocument, "loadResource", recording)
    view = MarkdownView()
    qtbot.addWidget(view)
    view.resize(500, 400)
    view.set_markdown("Euler: $e^{i\\pi} + 1 = 0$, and\n\n$$\\sum_{k=1}^{n} k = "
                      "\\frac{n(n+1)}{2}$$\n\nIt costs $5 and $10.")
    view.show()
    qtbot.waitExposed(view)
    shown = " ".join(view.toPlainText().replace("\u2009", " ").split())
    assert "Euler: eiπ + 1 = 0" in shown and "∑k = 1nk = n(n + 1)⁄2" in shown
    assert "\\" not in shown and "$5 and $10" in shown
    assert asked == []


def test_a_quote_has_a_rule_beside_it(qtbot: QtBot) -> None:
    view = MarkdownView()
    qtbot.addWidget(view)
    view.set_markdown("> Quoted words")
    (table,) = [f for f in view.document().rootFrame().childFrames()
                if isinstance(f, QTextTable)]
    assert (table.rows(), table.columns()) == (1, 2)
    rule = table.cellAt(0, 0).format().background().color().name()
    assert rule == "#d9d2c8" and "Quoted words" in view.toPlainText()
