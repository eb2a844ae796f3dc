"""MarkdownView: loads nothing, opens only confirmed web links, copies code, sizes to fit."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import (
    QDesktopServices,
    QGuiApplication,
    QImage,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QWheelEvent,
)
from PySide6.QtWidgets import QApplication, QLayout, QScrollBar, QVBoxLayout, QWidget

from inglenook.ui.chat.markdown_view import MarkdownView


def png(width: int = 7, height: int = 5) -> bytes:
    """A real PNG with an odd size, so a loaded one is recognisable."""
    image = QImage(width, height, QImage.Format.Format_RGB32)
    image.fill(Qt.GlobalColor.red)
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return bytes(data.data())


class Canary:
    """An HTTP server on 127.0.0.1 that records every request it gets."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        canary = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                canary.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.end_headers()
                self.wfile.write(png())

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def canary() -> Iterator[Canary]:
    server = Canary()
    yield server
    server.close()


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[QUrl]:
    """Record QDesktopServices.openUrl instead of launching a browser."""
    urls: list[QUrl] = []

    def fake_open(url: QUrl) -> bool:
        urls.append(QUrl(url))
        return True

    monkeypatch.setattr(QDesktopServices, "openUrl", fake_open)
    return urls


@pytest.fixture
def bubble(qtbot) -> tuple[QWidget, MarkdownView]:
    """A view in a vertical layout, the way a chat bubble holds it."""
    container = QWidget()
    layout = QVBoxLayout(container)
    # A constrained top-level window makes the offscreen plugin warn (propagateSizeHints).
    layout.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
    view = MarkdownView()
    layout.addWidget(view)
    layout.addStretch()
    qtbot.addWidget(container)
    container.resize(500, 800)
    return container, view


def test_nothing_is_fetched(qtbot, canary: Canary, bubble: tuple[QWidget, MarkdownView]) -> None:
    container, view = bubble
    base = f"http://127.0.0.1:{canary.port}"
    view.set_markdown(
        f"![x]({base}/img.png)\n\n[f](file:///etc/passwd)\n\n"
        f'<img src="{base}/raw.png">\n\n'
        f'<link rel="stylesheet" type="text/css" href="{base}/s.css">\n\n'
        f"[page]({base}/page) <{base}/auto>\n\n| a |\n|---|\n| ![t]({base}/cell.png) |\n"
    )
    container.show()
    qtbot.waitExposed(container)
    qtbot.wait(200)  # grace period: we are asserting that nothing happens
    assert canary.paths == []
    assert "<img" not in view.toHtml()


def test_document_never_reads_local_files(qtbot, tmp_path: Path) -> None:
    # Even HTML that bypasses the renderer must not pull files in (QTextDocument would).
    image = tmp_path / "secret.png"
    image.write_bytes(png(7, 5))
    view = MarkdownView()
    qtbot.addWidget(view)
    url = QUrl.fromLocalFile(str(image))
    view.setHtml(f'<img src="{url.toString()}"><img src="{image}">')
    view.show()
    qtbot.waitExposed(view)
    kind = QTextDocument.ResourceType.ImageResource
    for name in (url, QUrl(str(image))):
        assert view.document().resource(kind, name).size().width() != 7
    assert view.loadResource(kind, url).size().width() != 7
    assert view.document().size().height() < 40  # two 1 px placeholders, not 5 px images


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "javascript:alert(1)", "data:text/html,x", "qrc:/x", "foo"]
)
def test_other_schemes_never_open(qtbot, opened: list[QUrl], url: str) -> None:
    view = MarkdownView()
    qtbot.addWidget(view)
    asked: list[QUrl] = []
    view.confirm_open = lambda u: asked.append(u) or True  # type: ignore[method-assign]
    view.anchorClicked.emit(QUrl(url))
    assert opened == []
    assert asked == []


def test_web_link_opens_only_after_confirmation(qtbot, opened: list[QUrl]) -> None:
    view = MarkdownView()
    qtbot.addWidget(view)
    url = QUrl("http://127.0.0.1:9/page")

    view.confirm_open = lambda u: False  # type: ignore[method-assign]
    view.anchorClicked.emit(url)
    assert opened == []

    view.confirm_open = lambda u: True  # type: ignore[method-assign]
    with qtbot.waitSignal(view.link_opened) as blocker:
        view.anchorClicked.emit(url)
    assert opened == [url]
    assert blocker.args == [url]


def test_copy_link_copies_exact_code(qtbot) -> None:
    view = MarkdownView()
    qtbot.addWidget(view)
    code = "def f(x):\n    return '<b>' & x  # \u00e9"
    view.set_markdown(f"Intro\n\n```py\nfirst\n```\n\n```python\n{code}\n```\n")
    with qtbot.waitSignal(view.code_copied) as blocker:
        view.anchorClicked.emit(QUrl("copy:1"))
    assert blocker.args == [1]
    assert QGuiApplication.clipboard().text() == code

    view.anchorClicked.emit(QUrl("copy:0"))
    assert QGuiApplication.clipboard().text() == "first"

    with qtbot.assertNotEmitted(view.code_copied):
        view.anchorClicked.emit(QUrl("copy:7"))
        view.anchorClicked.emit(QUrl("copy:-1"))


def test_clicking_copy_anchor(qtbot, bubble: tuple[QWidget, MarkdownView]) -> None:
    # A real click proves the anchor is live with the interaction flags we set.
    container, view = bubble
    view.set_markdown("```\nclicked code\n```")
    container.show()
    qtbot.waitExposed(container)
    rect = view.anchor_rect("copy:0")
    assert not rect.isEmpty()
    assert view.anchor_at(rect.center().toPoint()) == "copy:0"
    with qtbot.waitSignal(view.code_copied, timeout=2000):
        qtbot.mouseClick(view, Qt.MouseButton.LeftButton, pos=rect.center().toPoint())
    assert QGuiApplication.clipboard().text() == "clicked code"


def test_height_grows_with_content(qtbot, bubble: tuple[QWidget, MarkdownView]) -> None:
    container, view = bubble
    view.set_markdown("One line.")
    container.show()
    qtbot.waitExposed(container)
    # Until it has a width the view estimates; once resized, a second layout pass is exact.
    qtbot.waitUntil(lambda: view.height() == view.heightForWidth(view.width()))
    short = view.height()
    view.set_markdown("One line.\n\n" + "More text. " * 200)
    qtbot.waitUntil(lambda: view.height() > short * 3)
    qtbot.waitUntil(lambda: view.height() == view.heightForWidth(view.width()))
    # A narrower bubble wraps more, so it needs more height.
    assert view.heightForWidth(200) > view.heightForWidth(480)


def test_streaming_never_scrolls_or_shrinks(qtbot, bubble: tuple[QWidget, MarkdownView]) -> None:
    container, view = bubble
    assert not view.findChildren(QScrollBar)  # nothing in a message can scroll by itself
    container.show()
    qtbot.waitExposed(container)
    text = ""
    heights: list[int] = []
    for i in range(60):
        text += f"word{i} " if i % 10 else "\n\n```py\nx = 1\n"
        view.set_markdown(text)
        QGuiApplication.processEvents()
        heights.append(view.heightForWidth(view.width()))
    assert heights == sorted(heights)


def test_selection_survives_streaming(qtbot) -> None:
    view = MarkdownView()
    qtbot.addWidget(view)
    view.set_markdown("Hello world")
    view.select(0, 5)
    view.set_markdown("Hello world, and more")
    assert view.selected_text() == "Hello"


def test_document_never_reads_local_stylesheets(qtbot, tmp_path: Path) -> None:
    sheet = tmp_path / "evil.css"
    sheet.write_text("p { color: #ff0000; }")
    view = MarkdownView()
    qtbot.addWidget(view)
    href = QUrl.fromLocalFile(str(sheet)).toString()
    link = f'<link rel="stylesheet" type="text/css" href="{href}">'
    view.setHtml(f"<html><head>{link}</head><p>text</p></html>")
    assert view.toPlainText() == "text"
    cursor = QTextCursor(view.document())
    cursor.setPosition(2)
    assert cursor.charFormat().foreground().color().name() != "#ff0000"


# ---- code blocks: highlighting, sideways scrolling, Copy -------------------------------------


def coloured(view: MarkdownView, text: str) -> bool:
    """Whether `text` in the view's document is drawn in a colour of its own (highlighted)."""
    found = view.document().find(text)
    assert not found.isNull(), text
    cursor = QTextCursor(view.document())
    cursor.setPosition(found.selectionStart() + 1)
    return cursor.charFormat().hasProperty(QTextFormat.Property.ForegroundBrush)


def wheel(view: QWidget, at: QPoint, dx: int = 0, dy: int = 0,
          modifiers: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> bool:
    """Send a mouse wheel turn to `view`; returns whether the view took it."""
    event = QWheelEvent(QPointF(at), QPointF(view.mapToGlobal(at)), QPoint(), QPoint(dx, dy),
                        Qt.MouseButton.NoButton, modifiers, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(view, event)
    return event.isAccepted()


def test_code_is_highlighted_once_its_fence_closes_and_only_in_a_known_language(
        qtbot) -> None:
    view = MarkdownView()
    qtbot.addWidget(view)
    view.set_markdown("```python\ndef f(): pass")  # still streaming: plain
    assert not coloured(view, "def f")
    view.set_markdown("```python\ndef f(): pass\n```\n\n```\ndef g(): pass\n```\n\n"
                      "```nosuchlanguage\ndef h(): pass\n```\n")
    assert coloured(view, "def f")
    assert not coloured(view, "def g") and not coloured(view, "def h")


def test_a_long_code_line_scrolls_sideways_and_copy_stays_in_view(
        qtbot, bubble: tuple[QWidget, MarkdownView]) -> None:
    container, view = bubble
    line = "start = 1  # " + "word " * 150 + "tail_end"
    view.set_markdown(f"Some code:\n\n```python\n{line}\n```\n")
    container.show()
    qtbot.waitExposed(container)
    qtbot.waitUntil(lambda: view.height() == view.heightForWidth(view.width()))
    copy = view.anchor_rect("copy:0")
    assert not copy.isEmpty() and copy.right() <= view.width()  # not pushed out of view
    on_line = QPoint(view.width() // 2, int(copy.bottom()) + 16)
    assert view.code_offset((0, 0)) == 0
    assert not wheel(view, on_line, dy=-120)  # a plain wheel turn scrolls the chat, not the code

    assert wheel(view, on_line, dx=-120 * 500)  # a sideways swipe, to the end
    assert view.code_offset((0, 0)) > 1000
    # The end of the line is in view now: a double-click there selects its last word.
    qtbot.mouseDClick(view, Qt.MouseButton.LeftButton, pos=QPoint(view.width() - 30,
                                                                    on_line.y()))
    assert view.selected_text() == "tail_end"
    assert view.anchor_rect("copy:0") == copy  # Copy has not moved, and copies all of it
    with qtbot.waitSignal(view.code_copied, timeout=2000):
        qtbot.mouseClick(view, Qt.MouseButton.LeftButton, pos=copy.center().toPoint())
    assert QGuiApplication.clipboard().text() == line

    assert wheel(view, on_line, dy=120 * 500, modifiers=Qt.KeyboardModifier.ShiftModifier)
    assert view.code_offset((0, 0)) == 0  # Shift+wheel scrolls sideways too


def test_the_code_scroll_bar_can_be_dragged(qtbot, bubble: tuple[QWidget, MarkdownView]) -> None:
    container, view = bubble
    view.set_markdown("```\n" + "long " * 150 + "\n```")  # 750 characters: it scrolls
    container.show()
    qtbot.waitExposed(container)
    qtbot.waitUntil(lambda: view.height() == view.heightForWidth(view.width()))
    bar_y = view.height() - 9  # in the code table's bottom padding (the view holds only it)
    qtbot.mousePress(view, Qt.MouseButton.LeftButton, pos=QPoint(view.width() - 12, bar_y))
    far = view.code_offset((0, 0))
    assert far > 500  # a press on the track jumps there
    qtbot.mouseMove(view, QPoint(12, bar_y))
    qtbot.mouseRelease(view, Qt.MouseButton.LeftButton, pos=QPoint(12, bar_y))
    assert view.code_offset((0, 0)) == 0
    assert not view.has_selection()  # dragging the bar selects nothing


def test_copy_says_copied_for_a_moment(qtbot, bubble: tuple[QWidget, MarkdownView]) -> None:
    _container, view = bubble
    view.set_markdown("```\nfirst\n```\n\n```\nsecond\n```")
    view.anchorClicked.emit(QUrl("copy:1"))
    assert view.copied == 1 and view.toPlainText().count("Copied") == 1
    view.set_markdown("```\nfirst\n```\n\n```\nsecond\n```\n\nMore text streams in.")
    assert view.toPlainText().count("Copied") == 1  # a new render keeps saying so
    view.anchorClicked.emit(QUrl("copy:0"))
    assert view.copied == 0 and view.toPlainText().count("Copied") == 1  # only the last one
    assert QGuiApplication.clipboard().text() == "first"
    qtbot.waitUntil(lambda: view.copied is None, timeout=5000)
    assert "Copied" not in view.toPlainText() and view.toPlainText().count("Copy") == 2
