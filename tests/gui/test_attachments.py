"""Attachments in the window: files attached as the Attach button does it, dropped or pasted as
paths; chips with their token cost and ✕; a file that cannot fit the context refused before
anything is sent; sent files inlined for the model and shown as chips in the user's message,
which open the text; and still there after a restart."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QGuiApplication
from PySide6.QtWidgets import QFileDialog
from pytestqt.qtbot import QtBot

from inglenook.core.attachments import estimate_tokens, inline
from inglenook.store import Store
from inglenook.ui.chat.attachment_chips import AttachmentChip, AttachmentStrip
from inglenook.ui.chat.attachment_dialog import AttachmentDialog
from inglenook.ui.chat.composer import Composer
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import Script, fake_worker, open_window, wait_reply
from tests.helpers.pdfs import text_pdf

READ_TIMEOUT_MS = 30_000  # a PDF is read by a child process


def files(tmp_path: Path) -> tuple[Path, Path]:
    notes = tmp_path / "notes.md"
    notes.write_text("# Plan\n\n- buy milk\n- call Ada\n", encoding="utf-8")
    report = tmp_path / "report.pdf"
    report.write_bytes(text_pdf(["Quarterly report", "Units rose in May."]))
    return notes, report


def attach(qtbot: QtBot, composer: Composer, *paths: Path) -> None:
    """As the Attach button does once its dialog closes; returns when every file is read."""
    composer.attach_files([str(p) for p in paths])
    qtbot.waitUntil(lambda: not composer.reading, timeout=READ_TIMEOUT_MS)


def chip_texts(strip: AttachmentStrip) -> list[str]:
    return [chip.label.text() for chip in strip.chips]


def message_strip(window: MainWindow, index: int) -> AttachmentStrip:
    strips = window.chat.bubbles[index].findChildren(AttachmentStrip)
    assert len(strips) == 1
    return strips[0]


def test_the_attach_button_chips_with_token_cost_and_remove(
        qtbot: QtBot, window: MainWindow, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    notes, report = files(tmp_path)
    composer = window.composer
    monkeypatch.setattr(QFileDialog, "getOpenFileNames",
                        lambda *_: ([str(notes), str(report)], ""))
    qtbot.mouseClick(composer.attach_button, Qt.MouseButton.LeftButton)
    assert sorted(composer.reading) == ["notes.md", "report.pdf"]
    assert all(chip.property("pending") for chip in composer.strip.chips)
    qtbot.waitUntil(lambda: not composer.reading, timeout=READ_TIMEOUT_MS)
    by_name = {a.name: a for a in composer.attachments}
    assert set(by_name) == {"notes.md", "report.pdf"}
    assert sorted(chip_texts(composer.strip)) == [
        f"notes.md · ≈{by_name['notes.md'].tokens:,} tokens",
        f"report.pdf · ≈{by_name['report.pdf'].tokens:,} tokens"]
    assert composer.strip.isVisible()
    # The meter counts the files as part of the message being written.
    typed = estimate_tokens(composer.draft())
    assert typed >= sum(a.tokens for a in composer.attachments)
    qtbot.waitUntil(lambda: f"≈{typed:,} typed" in window.context_label.text(), timeout=5_000)
    first = composer.strip.chips[0]
    removed = composer.attachments[0].name
    with qtbot.waitSignal(composer.attachments_changed):
        qtbot.mouseClick(first.remove_button, Qt.MouseButton.LeftButton)
    assert [a.name for a in composer.attachments] == sorted({"notes.md", "report.pdf"}
                                                             - {removed})
    assert len(composer.strip.chips) == 1


def test_a_file_that_cannot_fit_the_context_is_refused(
        qtbot: QtBot, window: MainWindow, tmp_path: Path) -> None:
    big = tmp_path / "novel.txt"
    big.write_text("All work and no play. " * 400, encoding="utf-8")  # ≈2,200 tokens of 2,048
    with qtbot.waitSignal(window.composer.attach_failed, timeout=READ_TIMEOUT_MS) as failed:
        window.composer.attach_files([str(big)])
    assert failed.args[0].startswith("novel.txt was not attached: it is about 2,207 tokens, "
                                     "and the model's context holds 2,048")
    assert window.composer.attachments == ()
    assert not window.composer.strip.isVisible()
    assert window.composer.notice.isVisible()
    assert window.composer.notice.text() == failed.args[0]


def test_a_binary_file_and_a_damaged_image_are_refused_with_their_reasons(
        qtbot: QtBot, window: MainWindow, tmp_path: Path) -> None:
    (tmp_path / "song.mp3").write_bytes(b"ID3\x04\x00\x00\x00\x00\x00\x00")
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(32))
    reasons = []
    window.composer.attach_failed.connect(reasons.append)
    attach(qtbot, window.composer, tmp_path / "song.mp3", tmp_path / "photo.png")
    assert sorted(reasons) == [
        "photo.png is not an image in a format read here (PNG, JPEG, GIF, WEBP, BMP). It was "
        "not attached.",
        "song.mp3 was not attached: it looks like binary data, not text. Attach text, code, "
        "Markdown, CSV or PDF files."]
    assert window.composer.attachments == ()


def test_sent_files_reach_the_model_and_show_in_the_message(
        qtbot: QtBot, window: MainWindow, tmp_path: Path) -> None:
    notes, report = files(tmp_path)
    attach(qtbot, window.composer, notes)
    attach(qtbot, window.composer, report)
    sent = window.composer.attachments
    window.composer.edit.setPlainText("What do these say?")
    with qtbot.waitSignal(window.reply_started):
        qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
    assert window.composer.attachments == () and not window.composer.strip.isVisible()
    wait_reply(qtbot, window)
    request = window.chats.last_request
    assert request is not None
    assert request.messages[-1].content == inline("What do these say?", sent)
    assert "File: report.pdf\n```text\nQuarterly report\n\nUnits rose in May.\n```" in (
        request.messages[-1].content)
    question = window.chat.bubbles[0]
    assert question.text == "What do these say?"  # the transcript keeps the typed text
    strip = message_strip(window, 0)
    assert chip_texts(strip) == [f"notes.md · {notes.stat().st_size} B",
                                 f"report.pdf · {report.stat().st_size} B"]
    assert strip.isVisible()
    qtbot.mouseClick(strip.chips[1], Qt.MouseButton.LeftButton)
    dialog = window.findChild(AttachmentDialog)
    assert dialog is not None and dialog.isVisible()
    assert dialog.text.toPlainText() == "Quarterly report\n\nUnits rose in May."
    assert dialog.windowTitle() == "report.pdf"
    dialog.close()


def test_a_message_of_files_alone_is_sent(qtbot: QtBot, window: MainWindow,
                                          tmp_path: Path) -> None:
    notes, _ = files(tmp_path)
    attach(qtbot, window.composer, notes)
    with qtbot.waitSignal(window.reply_started):
        qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
    wait_reply(qtbot, window)
    assert window.chats.session.title == "notes.md"
    assert not window.chat.bubbles[0].body.isVisible()
    assert chip_texts(message_strip(window, 0)) == [f"notes.md · {notes.stat().st_size} B"]


def test_refused_when_sending_the_draft_and_its_files_are_kept(
        qtbot: QtBot, window: MainWindow, tmp_path: Path) -> None:
    """Files attached before the model's context was known, too much together for it."""
    composer = window.composer
    composer.set_model_limits(lambda: 0)
    parts = []
    for n in range(3):
        part = tmp_path / f"part{n}.txt"
        part.write_text(f"Chapter {n}. " + "Words upon words. " * 120, encoding="utf-8")
        parts.append(part)
    attach(qtbot, composer, *parts)
    attached = composer.attachments
    assert len(attached) == 3
    composer.edit.setPlainText("Summarise")
    with qtbot.assertNotEmitted(window.reply_started):
        qtbot.keyClick(composer.edit, Qt.Key.Key_Return)
    assert "context holds 2,048" in window.banner.text()
    assert composer.edit.toPlainText() == "Summarise" and composer.attachments == attached
    assert len(composer.strip.chips) == 3
    assert not window.chat.bubbles


def test_dropped_files_and_pasted_paths_are_attached(
        qtbot: QtBot, window: MainWindow, tmp_path: Path) -> None:
    notes, report = files(tmp_path)
    composer = window.composer
    drop = QMimeData()
    drop.setUrls([QUrl.fromLocalFile(str(notes))])
    assert composer.edit.canInsertFromMimeData(drop)
    composer.edit.insertFromMimeData(drop)  # what a drop on the text box ends in
    qtbot.waitUntil(lambda: len(composer.attachments) == 1, timeout=READ_TIMEOUT_MS)
    QGuiApplication.clipboard().setText(f"  '{report}'\n")
    qtbot.keyClick(composer.edit, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: len(composer.attachments) == 2, timeout=READ_TIMEOUT_MS)
    assert composer.edit.toPlainText() == ""  # a path pasted is a file, not text
    QGuiApplication.clipboard().setText(f"see {report}")
    qtbot.keyClick(composer.edit, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    assert composer.edit.toPlainText() == f"see {report}"  # text that mentions a file is text
    model = QMimeData()
    model.setUrls([QUrl.fromLocalFile(str(tmp_path / "model.gguf"))])
    assert not composer.edit.canInsertFromMimeData(model)  # models go to the library
    composer.remove_attachment(0)
    on_chips = QDropEvent(QPointF(4, 4), Qt.DropAction.CopyAction, drop,
                          Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    composer.dropEvent(on_chips)  # a drop beside the text box (on the chips, the margins)
    assert on_chips.isAccepted()
    qtbot.waitUntil(lambda: len(composer.attachments) == 2, timeout=READ_TIMEOUT_MS)
    assert sorted(a.name for a in composer.attachments) == ["notes.md", "report.pdf"]


def test_attachments_survive_a_restart(qtbot: QtBot, window: MainWindow, script: Script,
                                       tmp_path: Path) -> None:
    notes, report = files(tmp_path)
    attach(qtbot, window.composer, notes, report)
    sent = {a.name: a for a in window.composer.attachments}
    window.composer.edit.setPlainText("Keep these")
    with qtbot.waitSignal(window.reply_started):
        qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
    wait_reply(qtbot, window)
    conv_id = window.chats.conv_id
    window.close()
    notes.unlink()  # what was read is kept, not the file
    with Store() as store:
        kept = store.active_path(conv_id)[0].attachments  # type: ignore[arg-type]
    assert {a.name: a for a in kept} == sent
    again = open_window(qtbot, fake_worker(script, tmp_path / "engine2.log"))
    try:
        again.chats.open(conv_id)  # type: ignore[arg-type]
        assert sorted(chip_texts(message_strip(again, 0))) == sorted(
            [f"notes.md · {sent['notes.md'].size} B", f"report.pdf · {sent['report.pdf'].size} B"])
        assert all(isinstance(c, AttachmentChip) for c in message_strip(again, 0).chips)
    finally:
        again.close()
