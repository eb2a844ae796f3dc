"""Images in the window, on the fake engine: attached by the Attach button's path, pasted from
the clipboard and dropped on the window; thumbnails with their cost in the composer; the images
reaching the engine and shown as thumbnails in the message, larger on a click; and a model
without a projector saying so as soon as an image is attached, refusing to send and keeping
the draft."""

from __future__ import annotations

import hashlib
import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import QByteArray, QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QColor, QDropEvent, QGuiApplication, QImage, QImageReader
from PySide6.QtWidgets import QFileDialog
from pytestqt.qtbot import QtBot

from inglenook.chat import images as chat_images
from inglenook.core.attachments import IMAGE_TOKENS, Attachment
from inglenook.ui.app import limit_image_decoding
from inglenook.ui.chat.attachment_chips import AttachmentStrip
from inglenook.ui.chat.image_dialog import ImageDialog
from inglenook.ui.chat.image_parts import CANNOT_SEE
from inglenook.ui.chat.inline_edit import InlineEdit
from inglenook.ui.chat.prompt_dialog import PromptDialog
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import Script, fake_worker, open_window, wait_reply
from tests.unit.core.test_images import png_header_only

TIMEOUT_MS = 10_000
SEES = 16  # positions each 512 × 512 tile of an image takes with the fake engine's "projector"


def picture(path: Path, size: tuple[int, int], color: tuple[int, int, int],
            fmt: str = "PNG") -> Path:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, fmt)
    path.write_bytes(out.getvalue())
    return path


@pytest.fixture
def seeing(qtbot: QtBot, script: Script, tmp_path: Path) -> Iterator[MainWindow]:
    """The window with a model that sees images (the fake engine says so at load)."""
    script.write(default={"text": "Saw {images} images.", "token_ms": 1}, vision=SEES)
    win = open_window(qtbot, fake_worker(script, tmp_path / "engine.log"))
    yield win


def test_images_attached_pasted_and_dropped_reach_the_model_and_the_message(
        qtbot: QtBot, seeing: MainWindow, tmp_path: Path) -> None:
    window, composer = seeing, seeing.composer
    composer.attach_files([str(picture(tmp_path / "red.png", (640, 480), (200, 0, 0)))])
    qtbot.waitUntil(lambda: len(composer.attachments) == 1, timeout=TIMEOUT_MS)
    pasted = QImage(300, 200, QImage.Format.Format_RGB32)
    pasted.fill(QColor(0, 120, 0))
    clip = QMimeData()
    clip.setImageData(pasted)
    assert composer.edit.canInsertFromMimeData(clip)
    composer.edit.insertFromMimeData(clip)  # what Ctrl+V ends in
    qtbot.waitUntil(lambda: len(composer.attachments) == 2, timeout=TIMEOUT_MS)
    dropped = QMimeData()
    dropped.setUrls([QUrl.fromLocalFile(str(picture(tmp_path / "sky.jpg", (200, 900),
                                                    (0, 0, 200), "JPEG")))])
    drop = QDropEvent(QPointF(20, 20), Qt.DropAction.CopyAction, dropped,
                      Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    # Qt delivers drops only from a real drag, which an offscreen test cannot make: hand the
    # event to the window's drop filter as Qt would (on the window, not on the composer).
    assert window._drops.eventFilter(window, drop) and drop.isAccepted()
    qtbot.waitUntil(lambda: len(composer.attachments) == 3, timeout=TIMEOUT_MS)
    assert [a.name for a in composer.attachments] == ["red.png", "Pasted image.png", "sky.jpg"]
    assert composer.attachments[1].mime == "image/png"
    chips = composer.strip.chips
    assert all(c.thumbnail is not None and not c.thumbnail.pixmap().isNull() for c in chips)
    assert all(max(c.thumbnail.pixmap().width(), c.thumbnail.pixmap().height()) <= 64
               for c in chips if c.thumbnail is not None)
    # Each image costs what the projector counts at its size: 640 × 480 and 200 × 900 are two
    # tiles, 300 × 200 one (a 512 × 512 image's cost, the model's fixed figure, would be SEES).
    assert [c.label.text().split("\n")[-1] for c in chips] == [
        f"{2 * SEES} tokens", f"{SEES} tokens", f"{2 * SEES} tokens"]
    assert "reads an image of 640 × 480 pixels" in chips[0].toolTip()
    assert not composer.notice.isVisible()
    # The meter counts each image as the model does.
    composer.edit.setPlainText("What are these?")
    assert composer.draft_tokens() == 5 * SEES + len("What are these?") // 4 + 1
    qtbot.waitUntil(lambda: f"≈{composer.draft_tokens():,} typed" in window.context_label.text(),
                    timeout=TIMEOUT_MS)
    with qtbot.waitSignal(window.reply_started):
        qtbot.keyClick(composer.edit, Qt.Key.Key_Return)
    wait_reply(qtbot, window)
    request = window.chats.last_request
    assert request is not None
    sent = request.messages[-1]
    assert sent.content == "What are these?" and len(sent.images) == 3
    assert all(Path(ref.path).is_file() for ref in sent.images)
    assert window.chat.bubbles[1].text == "Saw 3 images."
    (strip,) = window.chat.bubbles[0].findChildren(AttachmentStrip)
    qtbot.waitUntil(lambda: all(c.thumbnail is not None and not c.thumbnail.pixmap().isNull()
                                for c in strip.chips), timeout=TIMEOUT_MS)
    qtbot.mouseClick(strip.chips[2], Qt.MouseButton.LeftButton)
    dialog = window.findChild(ImageDialog)
    assert dialog is not None and dialog.windowTitle() == "sky.jpg"
    qtbot.waitUntil(lambda: not dialog.picture.pixmap().isNull(), timeout=TIMEOUT_MS)
    assert dialog.picture.pixmap().height() <= 1024
    dialog.close()


def test_a_model_without_a_projector_says_so_before_sending_and_keeps_the_draft(
        qtbot: QtBot, window: MainWindow, tmp_path: Path) -> None:
    composer = window.composer
    bomb = tmp_path / "huge.png"
    bomb.write_bytes(png_header_only(30_000, 30_000))
    files = [bomb, picture(tmp_path / "cat.png", (64, 64), (9, 9, 9))]
    expected = ["huge.png announces far more pixels than the 40,000,000 images are read up to. "
                "It was not attached."]
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.png")  # opening it would wait for a writer forever
        files.append(tmp_path / "pipe.png")
        expected.append("pipe.png was not attached: it is not a file.")
    reasons: list[str] = []
    composer.attach_failed.connect(reasons.append)
    composer.attach_files([str(f) for f in files])
    qtbot.waitUntil(lambda: not composer.reading, timeout=TIMEOUT_MS)
    assert [a.name for a in composer.attachments] == ["cat.png"]
    assert sorted(reasons) == expected
    assert composer.notice.isVisible() and CANNOT_SEE in composer.notice.text()  # at once
    assert composer.strip.chips[0].label.text().endswith(f"≈{IMAGE_TOKENS:,} tokens (estimate)")
    composer.edit.setPlainText("What is this?")
    assert composer.notice.isVisible()  # typing does not clear it: the image is still there
    with qtbot.assertNotEmitted(window.reply_started):
        qtbot.keyClick(composer.edit, Qt.Key.Key_Return)
    assert composer.notice.isVisible() and composer.notice.text() == CANNOT_SEE
    assert composer.edit.toPlainText() == "What is this?"
    assert [a.name for a in composer.attachments] == ["cat.png"]
    assert not window.chat.bubbles
    composer.remove_attachment(0)  # without the image, the message goes
    assert not composer.notice.isVisible()
    with qtbot.waitSignal(window.reply_started):
        qtbot.keyClick(composer.edit, Qt.Key.Key_Return)
    wait_reply(qtbot, window)


def test_a_large_image_costs_what_its_size_takes_and_is_counted_again_by_another_projector(
        qtbot: QtBot, script: Script, tmp_path: Path, bundled_model: Path) -> None:
    """A projector that tiles: a 512 × 512 image fits easily, a 2048 × 2048 screenshot is 16
    tiles and would leave no room for the reply, which is said when it is attached (not after
    sending it). Another projector loaded counts the draft's images again."""
    script.write(vision=100, n_ctx=2048)
    window = open_window(qtbot, fake_worker(script, tmp_path / "engine.log"))
    composer = window.composer
    reasons: list[str] = []
    composer.attach_failed.connect(reasons.append)
    composer.attach_files([str(picture(tmp_path / "screen.png", (2048, 2048), (9, 9, 9))),
                           str(picture(tmp_path / "small.png", (600, 400), (90, 9, 9)))])
    qtbot.waitUntil(lambda: not composer.reading, timeout=TIMEOUT_MS)
    assert reasons == ["screen.png was not attached: it is about 1,600 tokens, and the model's "
                       "context holds 2,048 for the message and the reply together. Load the "
                       "model with a longer context, or attach a part of it."]
    (small,) = composer.attachments
    assert small.image_tokens == 200 and small.counted_by == "fake-mmproj-100.gguf"
    assert composer.draft_tokens() == 200
    script.write(vision=7, n_ctx=2048)  # another projector: 7 a tile
    with qtbot.waitSignal(window.model_ready, timeout=TIMEOUT_MS):
        window.models.load(str(bundled_model))
    qtbot.waitUntil(lambda: composer.attachments[0].image_tokens == 14, timeout=TIMEOUT_MS)
    assert composer.attachments[0].counted_by == "fake-mmproj-7.gguf"
    assert composer.strip.chips[0].label.text().endswith("\n14 tokens")
    assert composer.draft_tokens() == 14
    window.close()


def test_a_pasted_image_is_decoded_off_the_gui_thread_and_a_bomb_is_refused(
        qtbot: QtBot, seeing: MainWindow, tmp_path: Path) -> None:
    """A paste hands on the bytes of the clipboard's image file; the GUI thread decodes
    nothing (the chip says it is being read when the paste returns) and a bomb is refused
    from its header. Qt itself decodes nothing larger than Inglenook reads."""
    limit_image_decoding()
    assert QImageReader.allocationLimit() == 153  # MB: 40,000,000 pixels of four bytes
    composer = seeing.composer
    reasons: list[str] = []
    composer.attach_failed.connect(reasons.append)
    bomb = QMimeData()
    bomb.setData("image/png", QByteArray(png_header_only(30_000, 30_000)))
    assert composer.edit.canInsertFromMimeData(bomb)
    composer.edit.insertFromMimeData(bomb)
    assert composer.reading == ["Pasted image.png"]  # in the background: this thread goes on
    qtbot.waitUntil(lambda: not composer.reading, timeout=TIMEOUT_MS)
    assert reasons == ["Pasted image.png announces far more pixels than the 40,000,000 images "
                       "are read up to. It was not attached."]
    assert composer.notice.isVisible() and reasons[0] in composer.notice.text()
    assert not composer.attachments
    copied = QMimeData()  # a screenshot tool's: a JPEG, as a browser's "Copy image" may be
    jpeg = io.BytesIO()
    Image.new("RGB", (800, 600), (0, 90, 200)).save(jpeg, "JPEG")
    copied.setData("image/jpeg", QByteArray(jpeg.getvalue()))
    composer.edit.insertFromMimeData(copied)
    qtbot.waitUntil(lambda: len(composer.attachments) == 1, timeout=TIMEOUT_MS)
    (pasted,) = composer.attachments
    assert (pasted.name, pasted.mime, pasted.pixels) == ("Pasted image 2.jpg", "image/jpeg",
                                                        (800, 600))
    assert pasted.data == jpeg.getvalue() and pasted.image_tokens == 4 * SEES  # 2 × 2 tiles


def test_a_reply_in_a_chat_with_images_hashes_them_off_the_gui_thread(
        qtbot: QtBot, seeing: MainWindow, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """After a restart, nothing of the history's images is hashed or checked yet: that is done
    off the GUI thread before the reply is begun (20 photos took ~190 ms of the GUI thread)."""
    window, composer = seeing, seeing.composer
    composer.attach_files([str(picture(tmp_path / "red.png", (640, 480), (200, 0, 0)))])
    qtbot.waitUntil(lambda: len(composer.attachments) == 1, timeout=TIMEOUT_MS)
    composer.edit.setPlainText("What is this?")
    with qtbot.waitSignal(window.reply_started):
        qtbot.keyClick(composer.edit, Qt.Key.Key_Return)
    wait_reply(qtbot, window)
    chat_images._hashes.clear()  # as after a restart
    chat_images._checked.clear()
    hashed_on: list[str] = []
    real = hashlib.sha256

    def sha256(*args: bytes) -> object:
        hashed_on.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(chat_images.hashlib, "sha256", sha256)
    with qtbot.waitSignal(window.reply_started):
        window.chats.regenerate()
    wait_reply(qtbot, window)
    request = window.chats.last_request
    assert request is not None and len(request.messages[-1].images) == 1
    assert hashed_on and threading.main_thread().name not in hashed_on
    # The prompt inspector makes the same request: hashed off the GUI thread too.
    chat_images._hashes.clear()
    chat_images._checked.clear()
    hashed_on.clear()
    reply = window.chats.session.path[-1]
    window.chats.actions.show_prompt(reply.id)
    qtbot.waitUntil(lambda: window.findChild(PromptDialog) is not None, timeout=TIMEOUT_MS)
    assert hashed_on and threading.main_thread().name not in hashed_on


def test_the_large_view_copies_and_saves_the_image(
        qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = picture(tmp_path / "sky.png", (300, 200), (10, 120, 250)).read_bytes()
    attachment = Attachment("sky.png", "image", len(data), mime="image/png", data=data)
    dialog = ImageDialog(attachment)
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.finished_action, timeout=TIMEOUT_MS) as copied:
        qtbot.mouseClick(dialog.copy_button, Qt.MouseButton.LeftButton)
    assert copied.args == ["Copied the image."]
    clip = QGuiApplication.clipboard().mimeData()
    assert bytes(clip.data("image/png").data()) == data  # the very file
    image = QGuiApplication.clipboard().image()
    assert (image.width(), image.height()) == (300, 200)
    target = tmp_path / "saved" / "my sky.png"
    target.parent.mkdir()
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *_a, **_k: (str(target), ""))
    with qtbot.waitSignal(dialog.finished_action, timeout=TIMEOUT_MS) as saved:
        qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert saved.args == ["Saved my sky.png."] and target.read_bytes() == data
    assert dialog.status.text() == "Saved my sky.png." and dialog.save_button.isEnabled()
    broken = ImageDialog(Attachment("gone.png", "image", 9, mime="image/png", data=b"\x89PNG\r\n"))
    qtbot.addWidget(broken)
    with qtbot.waitSignal(broken.finished_action, timeout=TIMEOUT_MS) as refused:
        broken.copy()
    assert refused.args[0].startswith("The image was not copied: The image is not an image")


def test_editing_a_question_can_leave_its_images_out(
        qtbot: QtBot, seeing: MainWindow, tmp_path: Path) -> None:
    window, composer = seeing, seeing.composer
    composer.attach_files([str(picture(tmp_path / "red.png", (64, 64), (200, 0, 0))),
                           str(picture(tmp_path / "blue.png", (64, 64), (0, 0, 200)))])
    qtbot.waitUntil(lambda: len(composer.attachments) == 2, timeout=TIMEOUT_MS)
    composer.edit.setPlainText("What colours?")
    with qtbot.waitSignal(window.reply_started):
        qtbot.keyClick(composer.edit, Qt.Key.Key_Return)
    wait_reply(qtbot, window)
    question = window.chat.bubbles[0]
    qtbot.mouseClick(question.edit_button, Qt.MouseButton.LeftButton)
    editor = question.findChild(InlineEdit)
    assert editor is not None and [a.name for a in editor.attachments] == ["red.png", "blue.png"]
    qtbot.waitUntil(editor.isVisible, timeout=TIMEOUT_MS)
    shown = [s for s in question.findChildren(AttachmentStrip) if s.isVisibleTo(question)]
    assert shown == [editor.strip]  # the sent strip gives way to the editor's, removable
    remove = editor.strip.chips[0].remove_button
    assert remove is not None
    qtbot.mouseClick(remove, Qt.MouseButton.LeftButton)
    assert [a.name for a in editor.attachments] == ["blue.png"]
    with qtbot.waitSignal(window.reply_started):
        qtbot.keyClick(editor.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    wait_reply(qtbot, window)
    request = window.chats.last_request
    assert request is not None and len(request.messages[-1].images) == 1
    assert window.chat.bubbles[1].text == "Saw 1 images."
    edited = window.chats.session.path[0]
    assert [a.name for a in edited.attachments] == ["blue.png"]
    assert edited.attachments[0].image_tokens == SEES  # its count, kept
    original = window.chats.store.siblings(edited.id)[0]
    assert [a.name for a in original.attachments] == ["red.png", "blue.png"]  # unchanged
