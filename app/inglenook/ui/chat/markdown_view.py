"""A read-only view of one chat message's Markdown.

Model output is hostile, so the view never loads a resource (local file, qrc or network), never
follows a link by itself, and opens web links only after the user confirms.

It is a RichTextView (rich_text.py: one light widget painting its documents, instead of a
QTextBrowser per message). Long output must never freeze the window, and Qt lays a document out
in one piece on the GUI thread, so at first only a head of bounded size is shown
(`markdown.display_cut`: 40,000 characters, 1,000 lines or 250 table rows), with "Show all".
Show all parses the whole text on a worker thread and shows it as a stack of bounded parts
(`markdown_segments`), taking in and laying out parts for at most SLICE_S per turn of the event
loop; the worker stays only a few parts ahead, so it seldom competes with the GUI thread for
Python's GIL. Copy on a code block that the truncation cuts off copies the whole block: a worker
finds its source first. Rendering a long reply as it streams is throttled to a fraction of the
GUI thread's time.

Colours are baked into the HTML, so a theme change renders the message again
(`set_markdown_palette`). Copy on a code block says "Copied" for a moment: the link's text is
changed in place, and renders meanwhile draw it so too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QGuiApplication, QTextCursor
from PySide6.QtWidgets import QMenu, QMessageBox, QWidget

from inglenook.ui import tasks, theme
from inglenook.ui.chat.markdown import MarkdownPalette, render_head
from inglenook.ui.chat.markdown_segments import WholeRender, all_code_blocks
from inglenook.ui.chat.rich_text import RichTextView

log = logging.getLogger(__name__)

OPENABLE_SCHEMES = frozenset({"http", "https", "mailto"})
SHOW_ALL_URL = "action:show-all"  # the renderer gives model text only http(s)/mailto links
SLICE_S = 0.015  # GUI-thread work per turn of the event loop while parts arrive (and one more)
THROTTLE = 3.0  # a costly render waits this many times its cost before the next one
AHEAD = 4  # parts the worker may have rendered that the view has not taken in yet
COPIED_MS = 1500  # how long Copy says "Copied"


class _Job:
    """What a worker needs from the view that started it, without a reference to the view:
    a cancel flag (set when the view goes) and the parts it may still render ahead."""

    def __init__(self) -> None:
        self.cancel = threading.Event()
        self.ahead = threading.Semaphore(AHEAD)

    def stop(self) -> None:
        self.cancel.set()
        self.ahead.release(AHEAD)  # wake a worker waiting to report


def _render_all(report: Any, text: str, palette: MarkdownPalette, job: _Job,
                ) -> tuple[int, tuple[str, ...]] | None:
    """Worker thread: every part of `text`, reported one by one as (index, html, fraction
    done); returns how many parts there are and the source of every code block."""
    whole = WholeRender(text, palette)
    count = 0
    for html, done in whole.parts():
        while not job.ahead.acquire(timeout=1.0):  # waits without holding the GIL
            pass
        if job.cancel.is_set():
            return None
        report((count, html, done))
        count += 1
    return count, tuple(whole.code_blocks)


def _find_code_blocks(text: str, job: _Job) -> tuple[str, ...] | None:
    """Worker thread: the exact source of every code block of a truncated message."""
    return None if job.cancel.is_set() else all_code_blocks(text)


class MarkdownView(RichTextView):
    """Shows one message's Markdown; its height follows its width.

    Signals:
        anchorClicked(QUrl): a link was clicked (the view decides what that does).
        code_copied(int): the source of code block N was put on the clipboard.
        link_opened(QUrl): a link was handed to the desktop after the user confirmed it.
        fully_shown(): "Show all" finished: the whole message is shown.
    """

    code_copied = Signal(int)
    link_opened = Signal(QUrl)
    fully_shown = Signal()

    def __init__(
        self, parent: QWidget | None = None, palette: MarkdownPalette | None = None
    ) -> None:
        super().__init__(parent)
        self._md_palette = palette or theme.current().markdown
        self._copied: int | None = None  # the code block whose Copy says "Copied"
        self._copied_timer: QTimer | None = None
        self._markdown = ""
        self._code_blocks: tuple[str, ...] = ()
        self._truncated = False
        self._expanded = False  # Show all was asked for
        self._head_stale = False  # a throttled render is due
        self._render_cost = 0.0
        self._last_render = 0.0
        # Background work, one job at a time: Show all, or the code blocks of a truncated text.
        self._task: tasks.Task | None = None  # the latest job; what older ones deliver is dropped
        self._job_kind = ""
        self._job_text: str | None = None  # the text the running job works on
        self._worker = _Job()
        self._copy_when_found: int | None = None  # a Copy click waiting for the code blocks
        self._blocks_exact = True  # code_blocks() has every block of the text in full
        self._incoming: deque[tuple[Any, ...]] = deque()  # parts from the worker, not yet shown
        self._expected_parts = 0
        self._expand_done = False
        self._timer: QTimer | None = None
        self.live = False  # the text is still growing (a reply streaming): renders not kept
        self.anchorClicked.connect(self._on_anchor_clicked)

    # --- content -------------------------------------------------------------------------

    def markdown(self) -> str:
        return self._markdown

    def code_blocks(self) -> tuple[str, ...]:
        return self._code_blocks

    @property
    def expanded(self) -> bool:
        """Show all was asked for (the whole message is shown, or being laid out)."""
        return self._expanded

    @property
    def truncated(self) -> bool:
        """Only the start of the message is shown (until Show all has finished)."""
        return self._truncated

    def set_markdown(self, text: str) -> None:
        """Show `text`; call again with the longer text as a reply streams in."""
        if text == self._markdown:
            return
        if self._expanded and not text.startswith(self._markdown):
            # Another text (a sibling, an edit), not more of this one: start from its head.
            self._expanded = False
            self._worker.stop()
            self._drop_job()
            self._incoming.clear()
        self._markdown = text
        if self._expanded:
            self._ensure_job()
            return
        wait = self._last_render + THROTTLE * self._render_cost - time.perf_counter()
        if self._render_cost > 0.008 and wait > 0:
            self._head_stale = True
            self._schedule(int(wait * 1000) + 1)
        else:
            self._show_head()

    def markdown_palette(self) -> MarkdownPalette:
        return self._md_palette

    def set_markdown_palette(self, palette: MarkdownPalette) -> None:
        """Show the message in other colours (the theme changed)."""
        if palette == self._md_palette:
            return
        self._md_palette = palette
        if self._expanded:  # every part again, each replacing its old self as it comes
            self._worker.stop()
            self._drop_job()
            self._incoming.clear()
            self._ensure_job()
        elif self._markdown:
            self._show_head()

    def flush(self) -> None:
        """Show the latest text now rather than after the streaming throttle."""
        if self._head_stale:
            self._show_head()

    def show_all(self) -> None:
        """Replace the truncated head with the whole message, a few parts per event-loop turn."""
        if self._truncated and not self._expanded:
            self._expanded = True
            self._head_stale = False
            self._set_note(self._note_html("Loading the rest…"))
            self._ensure_job()

    def _note_html(self, html: str) -> str:
        return f'<p style="color:{self._md_palette.muted}"><i>{html}</i></p>'

    def _show_head(self) -> None:
        started = time.perf_counter()
        self._head_stale = False
        text = self._markdown
        cut, rendered = render_head(text, self._md_palette, self._copied, keep=not self.live)
        self._truncated = cut < len(text)
        self._code_blocks = rendered.code_blocks
        self._blocks_exact = not self._truncated
        self._set_parts([rendered.html])
        if self._truncated:
            link = f'<a href="{SHOW_ALL_URL}" style="color:{self._md_palette.link}">Show all</a>'
            self._set_note(self._note_html(
                f"Showing the first {cut:,} of {len(text):,} characters. {link}"))
        else:
            self._set_note(None)
        self._last_render = time.perf_counter()
        self._render_cost = self._last_render - started

    # --- background work -----------------------------------------------------------------

    def _ensure_job(self) -> None:
        """Start the worker the text needs unless it is already running: Show all, or the code
        blocks for a Copy click. A job that finishes for text changed since starts again."""
        kind = ("expand" if self._expanded else
                "blocks" if self._truncated and self._copy_when_found is not None else "")
        if not kind or (self._job_text is not None and self._job_kind == kind):
            return
        self._worker.stop()  # a job of the other kind: Show all while code blocks are found
        self._worker = job = _Job()
        self.destroyed.connect(job.stop)  # a job's thread outlives a deleted view
        self._job_kind, self._job_text = kind, self._markdown
        self._expand_done = False
        self._incoming.clear()
        if kind == "expand":
            self._task = tasks.run(_render_all, self._markdown, self._md_palette, job,
                                   reports=True, on_progress=self._on_progress,
                                   on_done=self._on_done, on_failed=self._on_failed, owner=self,
                                   replaces=self._task)
        else:
            self._task = tasks.run(_find_code_blocks, self._markdown, job, on_done=self._on_done,
                                   on_failed=self._on_failed, owner=self, replaces=self._task)

    def _drop_job(self) -> None:
        if self._task is not None:
            self._task.cancel()  # what the old job still delivers is dropped
        self._job_text = None

    def _on_progress(self, item: object) -> None:
        self._incoming.append(item)  # type: ignore[arg-type]
        self._schedule(0)

    def _on_done(self, result: object) -> None:
        text, self._job_text = self._job_text, None
        if self._job_kind == "expand":
            self._expand_done = text == self._markdown and isinstance(result, tuple)
            if self._expand_done:
                self._expected_parts, self._code_blocks = result  # type: ignore[misc]
                self._blocks_exact = True
            self._schedule(0)  # finish once the parts are in, or start again for newer text
        elif text == self._markdown and not self._expanded and isinstance(result, tuple):
            self._code_blocks, self._blocks_exact = result, True
            index, self._copy_when_found = self._copy_when_found, None
            if index is not None:
                self._copy_block(str(index))
        else:
            self._ensure_job()

    def _on_failed(self, error: object) -> None:
        log.warning("Could not render a long message: %r", error)
        self._job_text = None
        if self._expanded:
            self._incoming.clear()
            self._set_note(self._note_html("The rest of this message could not be shown."))

    def _schedule(self, delay_ms: int) -> None:
        if self._timer is None:
            self._timer = QTimer(self)
            self._timer.setSingleShot(True)
            self._timer.timeout.connect(self._tick)
        if not self._timer.isActive():
            self._timer.start(delay_ms)

    def _tick(self) -> None:
        """One slice of deferred work: a throttled render, or parts that arrived."""
        deadline = time.perf_counter() + SLICE_S
        if self._head_stale:
            self._show_head()
        while self._incoming and time.perf_counter() < deadline:
            self._take(self._incoming.popleft())
            self._worker.ahead.release()
        if self._incoming:
            self._schedule(0)
        elif self._expanded and self._job_text is None:
            if self._expand_done:
                self._finish_expand()
            else:
                self._ensure_job()  # the text changed while it was being rendered

    def _take(self, item: tuple[Any, ...]) -> None:
        index, html, done = item
        self._set_part(index, html)
        if self._sized:  # now, inside this slice, rather than all at once in the next layout
            self._parts[index].lay_out(float(max(1, self.width())))
            self._release_far()  # keeps the peak down: most of a long message is out of view
        if self._truncated:
            self._set_note(self._note_html(f"Loading the rest… {done:.0%}"))

    def _finish_expand(self) -> None:
        self._expand_done = False
        self._drop_parts(max(1, self._expected_parts))
        self._set_note(None)
        if self._truncated:
            self._truncated = False
            self.fully_shown.emit()

    # --- links -----------------------------------------------------------------------------

    def confirm_open(self, url: QUrl) -> bool:
        """Ask before leaving the app. Tests replace this (on the instance or a subclass)."""
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle("Open link")
        box.setTextFormat(Qt.TextFormat.PlainText)  # the URL comes from the model
        box.setText(f"Open this link in your browser?\n\n{_shown(url)}")
        box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
        box.setDefaultButton(QMessageBox.StandardButton.No)
        return box.exec() == QMessageBox.StandardButton.Yes

    def _on_anchor_clicked(self, url: QUrl) -> None:
        scheme = url.scheme().lower()
        if scheme == "copy":
            self._copy_block(url.path())
        elif url.toString() == SHOW_ALL_URL:
            self.show_all()
        elif scheme in OPENABLE_SCHEMES and url.isValid():
            if self.confirm_open(url):
                QDesktopServices.openUrl(url)
                self.link_opened.emit(url)
        else:
            log.debug("Not opening link with scheme %r", scheme)

    def _copy_block(self, index_text: str) -> None:
        if not index_text.isdigit() or int(index_text) >= len(self._code_blocks):
            return
        index = int(index_text)
        if not self._blocks_exact and index == len(self._code_blocks) - 1:
            # The last block shown may be cut off: copy it once its whole source is known.
            self._copy_when_found = index
            self._ensure_job()
            return
        QGuiApplication.clipboard().setText(self._code_blocks[index])
        self._show_copied(index)
        self.code_copied.emit(index)

    @property
    def copied(self) -> int | None:
        """The code block whose Copy says "Copied" now, if any."""
        return self._copied

    def _show_copied(self, index: int | None) -> None:
        if self._copied is not None and self._copied != index:
            self._relabel(f"copy:{self._copied}", "Copy")
        self._copied = index
        if index is None:
            return
        self._relabel(f"copy:{index}", "Copied")
        if self._copied_timer is None:
            self._copied_timer = QTimer(self)
            self._copied_timer.setSingleShot(True)
            self._copied_timer.setInterval(COPIED_MS)
            self._copied_timer.timeout.connect(lambda: self._show_copied(None))
        self._copied_timer.start()

    def _relabel(self, href: str, text: str) -> None:
        """Change the text of the links to `href` in the documents shown (no new render)."""
        for part in self._parts:
            if not part.loaded:
                continue
            doc = part.doc
            spans = []
            block = doc.begin()
            while block.isValid():
                it = block.begin()
                while not it.atEnd():
                    fragment = it.fragment()
                    if fragment.charFormat().anchorHref() == href:
                        spans.append((fragment.position(), fragment.length(),
                                      fragment.charFormat()))
                    it += 1
                block = block.next()
            for position, length, char_format in reversed(spans):
                cursor = QTextCursor(doc)
                cursor.setPosition(position)
                cursor.setPosition(position + length, QTextCursor.MoveMode.KeepAnchor)
                cursor.insertText(text, char_format)
            if spans:
                part.chars = doc.characterCount()
                self._selection.clamp(self._parts)
        self.update()

    def _extend_menu(self, menu: QMenu, href: str) -> None:
        if href and QUrl(href).scheme().lower() in OPENABLE_SCHEMES:
            menu.addAction("Copy link address",
                           lambda: QGuiApplication.clipboard().setText(_shown(QUrl(href))))


def _shown(url: QUrl) -> str:
    # Fully encoded, so look-alike Unicode hosts and hidden characters show as what they are.
    return bytes(url.toEncoded().data()).decode("ascii", "replace")
