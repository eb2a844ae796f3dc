"""Where the user types: Enter sends, Shift+Enter is a newline, Esc stops. Files are attached
with the Attach button, by dropping them on the composer (or the window) or by pasting their
paths; an image also by pasting it. Each is read off the GUI thread and shown as a chip with its
token cost (an image with its thumbnail, and its cost at its size as the loaded projector counts
it: a projector that tiles takes more for a large screenshot), and one that would not leave
room in the context for a reply is refused with a message before anything is sent. Another
projector loaded counts the draft's images again. Images are kept with a model that
cannot see them, which the composer says at once; sending is refused with that reason and the
draft stays as it is.

The prompt box itself (pastes, long lines) is ui/chat/prompt_edit.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QIcon, QImage, QResizeEvent, QTextCursor
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.attachments import (
    FILE_TYPES,
    Attachment,
    AttachmentError,
    inline,
    message_tokens,
    will_not_fit,
)
from inglenook.ui import tasks
from inglenook.ui.chat.attachment_chips import (
    AttachmentStrip,
    chip_for_draft,
    chip_for_reading,
)
from inglenook.ui.chat.image_parts import (
    CANNOT_SEE,
    CANNOT_SEE_REMOTE,
    THUMBNAILS,
    DraftPart,
    ImageCounter,
    counted,
    pasted_file,
    pasted_part,
    read_counted,
    read_part,
)
from inglenook.ui.chat.mic_button import MicButton
from inglenook.ui.chat.prompt_edit import MAX_PROMPT_CHARS, PromptEdit, files_in
from inglenook.ui.plain import plain_label
from inglenook.ui.widgets.style import restyle

__all__ = ["MAX_PROMPT_CHARS", "Composer", "PromptEdit", "files_in"]

FILE_FILTER = ("Text, code, Markdown, CSV, PDF and images (*.txt *.md *.markdown *.csv *.tsv "
               "*.pdf *.py *.js *.ts *.json *.yaml *.yml *.toml *.html *.css *.sql *.sh *.c "
               "*.h *.cpp *.rs *.go *.java *.log *.png *.jpg *.jpeg *.gif *.webp *.bmp);;"
               "Images (*.png *.jpg *.jpeg *.gif *.webp *.bmp);;All files (*)")


COMPACT_BELOW = 600  # the composer's width under which Attach and Dictate show icons alone

PASTED_SUFFIXES = {"image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif",
                   "image/bmp": "bmp"}


class Composer(QWidget):
    """The prompt box with its Attach and Send/Stop buttons, the chips of the files attached,
    and a line that says why a paste or a file was refused.

    Signals:
        send_requested(str, list): the user sent this text (stripped) and these Attachments;
            never both empty.
        stop_requested(): the user asked to stop the reply being generated.
        attachments_changed(): a file was attached or removed, or the draft was sent.
        attach_failed(str): a file was not attached; why, for the user (also shown here).
        load_requested(): "Load <model>" (or Enter) with no model loaded: load it again.
    """

    send_requested = Signal(str, list)
    stop_requested = Signal()
    attachments_changed = Signal()
    attach_failed = Signal(str)
    load_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self.setAcceptDrops(True)
        self.edit = PromptEdit(self)
        self.attach_button = QPushButton("Attach", self)
        self.attach_button.setObjectName("attachButton")
        self.attach_button.setToolTip(f"Attach {FILE_TYPES}, or images (or drop them here, "
                                      "or paste an image)")
        self.attach_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.attach_button.setAccessibleName("Attach")  # also when it shows its icon alone
        self._compact = False
        self.button = QPushButton("Send", self)
        self.button.setObjectName("sendButton")
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.button.setMinimumWidth(84)
        self.notice = plain_label("", self, name="composerNotice")  # quotes file names
        self.notice.setWordWrap(True)
        self.notice.hide()
        self.strip = AttachmentStrip(self)
        # After Unload: the way back, where the user looks to send.
        self.no_model = QWidget(self)
        self.no_model.setObjectName("noModelBar")
        self.no_model_label = plain_label("No model loaded", self.no_model,
                                          name="noModelLabel")
        self.no_model_label.setWordWrap(True)  # a model's name can be long
        self.load_button = QPushButton("Load", self.no_model)
        self.load_button.setObjectName("loadModelButton")
        self.load_button.clicked.connect(self.load_requested)
        bar = QHBoxLayout(self.no_model)
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(self.no_model_label, 1)
        bar.addWidget(self.load_button)
        self.no_model.hide()
        self._unloaded = ""  # the model unloaded, to load again ("": none offered)
        column = QVBoxLayout(self)
        column.setContentsMargins(12, 10, 12, 10)
        column.setSpacing(6)
        column.addWidget(self.no_model)
        column.addWidget(self.notice)
        column.addWidget(self.strip)
        layout = QHBoxLayout()
        layout.setSpacing(10)
        layout.addWidget(self.attach_button, 0, Qt.AlignmentFlag.AlignBottom)
        self.mic = MicButton(self)  # dictation: the words arrive in the box, editable
        self.mic.started.connect(self._dictation_started)
        self.mic.partial.connect(self._dictated_so_far)
        self.mic.heard.connect(self._dictated)
        self._live: QTextCursor | None = None  # the dictated words shown so far, selected
        self._live_text = ""
        layout.addWidget(self.mic, 0, Qt.AlignmentFlag.AlignBottom)
        layout.addWidget(self.edit, 1)
        layout.addWidget(self.button, 0, Qt.AlignmentFlag.AlignBottom)
        column.addLayout(layout)
        self._generating = False
        self._can_send = True
        self._loading = False  # a model is loading: Enter keeps the message for when it is ready
        self.pending = False  # a message waits for the model
        self._attachments: list[Attachment] = []
        # Files are read at once, in parallel: each takes the place it was chosen in, not the
        # place its reading ended in. Its number, for each attachment and each file being read.
        self._order: list[int] = []
        self._numbers: dict[tasks.Task, int] = {}
        self._next_number = 0
        self._reading: dict[tasks.Task, str] = {}  # files being read: their task → name
        self._n_ctx: Callable[[], int] = lambda: 0
        self._vision: Callable[[], bool] = lambda: False
        self._remote: Callable[[], bool] = lambda: False
        self._image_tokens: Callable[[], int] = lambda: 0
        self._count: ImageCounter | None = None
        self._projector: Callable[[], str] = lambda: ""
        self._recounting: tasks.Task | None = None
        self._pasted = 0  # images pasted so far: their names
        self.edit.submit.connect(self._submit)
        self.edit.escape.connect(self._escape)
        self.edit.paste_refused.connect(self._paste_refused)
        self.edit.files_dropped.connect(self.attach_files)
        self.edit.image_pasted.connect(self.attach_image)
        self.edit.textChanged.connect(self._typed)
        self.button.clicked.connect(self._clicked)
        self.attach_button.clicked.connect(self.choose_files)

    @property
    def generating(self) -> bool:
        return self._generating

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_buttons()

    def _fit_buttons(self) -> None:
        """Narrow (a 700-pixel window with the chat list): Attach and Dictate show their icons
        alone, so that the message box keeps room to type in (its placeholder wrapped at
        ~130 px); their tooltips and accessible names still say what they do."""
        compact = self.width() < COMPACT_BELOW
        if compact == self._compact:
            return
        self._compact = compact
        if not compact:
            self.attach_button.setIcon(QIcon())
        restyle(self.attach_button, compact=compact)  # the style sheet gives the themed icon
        # Without a style sheet (no resources) there is no icon: the words stay.
        iconic = compact and not self.attach_button.icon().isNull()
        self.attach_button.setText("" if iconic else "Attach")
        self.mic.set_compact(compact)

    # ---- attachments ----------------------------------------------------------------------
    @property
    def attachments(self) -> tuple[Attachment, ...]:
        """The files attached to the draft, in order (not those still being read)."""
        return tuple(self._attachments)

    @property
    def reading(self) -> list[str]:
        """Names of the files still being read."""
        return list(self._reading.values())

    def set_model_limits(self, n_ctx: Callable[[], int],
                         vision: Callable[[], bool] = lambda: False,
                         image_tokens: Callable[[], int] = lambda: 0,
                         remote: Callable[[], bool] = lambda: False) -> None:
        """How to ask the loaded model's context length (0: none loaded or not known), whether
        it can see images, what one costs (0: not known) and whether it is a remote engine's
        (told to tick it rather than to load a projector): asked as each file is read."""
        self._n_ctx, self._vision, self._image_tokens = n_ctx, vision, image_tokens
        self._remote = remote

    def set_image_counter(self, count: ImageCounter, projector: Callable[[], str]) -> None:
        """How to count what images of given sizes cost with the loaded projector (called off
        the GUI thread), and which projector is loaded ("" none)."""
        self._count, self._projector = count, projector

    def model_changed(self) -> None:
        """Another model (or none): the chips' costs and the "cannot see" notice follow it,
        and images counted by another projector are counted again (off the GUI thread)."""
        self._show_chips()
        self.check_images()
        self._recount()

    def _recount(self) -> None:
        projector = self._projector()
        stale = [a for a in self._attachments if a.kind == "image" and a.pixels != (0, 0)
                 and a.counted_by != projector]
        if not stale or not projector or self._count is None or not self._vision():
            return
        self._recounting = tasks.run(counted, stale, self._count, owner=self, name="recount",
                                     replaces=self._recounting, on_done=self._recounted)

    def _recounted(self, found: object) -> None:
        """The images counted again: each takes its new cost where it still is."""
        assert isinstance(found, list)
        changed = False
        for new in found:
            for index, old in enumerate(self._attachments):
                if old.data is new.data and old.name == new.name \
                        and old.counted_by != new.counted_by:
                    self._attachments[index] = new
                    changed = True
        if changed:
            self._show_chips()
            self.attachments_changed.emit()

    def draft(self) -> str:
        """The message as the model would read it now: the files inlined, then the text."""
        return inline(self.edit.toPlainText(), self._attachments)

    def draft_tokens(self) -> int:
        """What the draft costs of the context, estimated; images as the model counts them."""
        return message_tokens(self.edit.toPlainText(), self._attachments, self._image_tokens())

    def images_refused(self) -> str:
        """Why the draft cannot be sent as it is to this model ("" when it can)."""
        if not any(a.kind == "image" for a in self._attachments) or self._vision():
            return ""
        return CANNOT_SEE_REMOTE if self._remote() else CANNOT_SEE

    def _typed(self) -> None:
        """Typing clears a notice about the last paste or file, not that the model cannot see
        the images still attached."""
        if not self.notice.isVisible():
            return
        if (refused := self.images_refused()) and refused in self.notice.text():
            self.notice.setText(refused)
        else:
            self.notice.hide()

    def check_images(self) -> None:
        """Say at once that the model cannot see the draft's images (not only when sending)."""
        problem = self.images_refused()
        if problem and not (self.notice.isVisible() and problem in self.notice.text()):
            self.notice.setText(problem)
            self.notice.show()
        elif not problem and any(t in self.notice.text() for t in (CANNOT_SEE, CANNOT_SEE_REMOTE)):
            self.notice.hide()

    def choose_files(self) -> None:
        """The Attach button: pick files in the platform's dialog."""
        paths, _ = QFileDialog.getOpenFileNames(self, "Attach files", "", FILE_FILTER)
        self.attach_files(paths)

    def attach_files(self, paths: Sequence[str | Path]) -> None:
        """Read these files off the GUI thread; each becomes a chip (attachments_changed) or is
        refused with a message (attach_failed)."""
        if self.pending:
            return
        for path in paths:
            self._start(Path(path).name, read_part, path)
        self._show_chips()

    def attach_image(self, image: QImage | tuple[bytes, str]) -> None:
        """A pasted image, as its file's (bytes, MIME type), or a QImage (encoded as PNG):
        decoded and checked off the GUI thread, then a chip."""
        if self.pending:
            return
        self._pasted += 1
        suffix = "png" if isinstance(image, QImage) else PASTED_SUFFIXES.get(image[1], "png")
        name = f"Pasted image{'' if self._pasted == 1 else f' {self._pasted}'}.{suffix}"
        if isinstance(image, QImage):
            self._start(name, pasted_part, image, name)
        else:
            self._start(name, pasted_file, image[0], name)
        self._show_chips()

    def _start(self, name: str, read: Callable[..., DraftPart], *args: object) -> None:
        # The callbacks name their own task (bound by the time they run, on this thread).
        count = self._count if self._vision() else None  # asked here, on the GUI thread
        task = tasks.run(read_counted, read, count, *args, owner=self, name="attach",
                         on_done=lambda found: self._read_done(task, found),
                         on_failed=lambda error: self._read_failed(task, error))
        self._reading[task] = name
        self._numbers[task] = self._next_number
        self._next_number += 1

    def remove_attachment(self, index: int) -> None:
        del self._attachments[index]
        del self._order[index]
        self._show_chips()
        self.attachments_changed.emit()
        self.check_images()

    def _stop_reading(self, task: tasks.Task) -> None:
        """✕ on a file being read: its result is dropped when it comes."""
        task.cancel()
        self._reading.pop(task, None)
        self._numbers.pop(task, None)
        self._show_chips()

    def _read_done(self, task: tasks.Task, part: object) -> None:
        number = self._numbers.pop(task, 0)
        if self._reading.pop(task, None) is None:
            return
        assert isinstance(part, DraftPart)
        attachment = part.attachment
        if attachment in self._attachments:  # the same file twice: once is what was meant
            self._refuse(f"{attachment.name} is already attached.")
            return
        problem = will_not_fit(attachment, self.draft_tokens(), self._n_ctx(),
                               self._image_tokens())
        if problem:
            self._refuse(problem)
            return
        if part.thumbnail:
            THUMBNAILS.put(attachment.data, part.thumbnail)
        place = sum(1 for n in self._order if n < number)
        self._attachments.insert(place, attachment)
        self._order.insert(place, number)
        self._show_chips()
        self.attachments_changed.emit()
        self.check_images()

    def _read_failed(self, task: tasks.Task, error: object) -> None:
        self._numbers.pop(task, None)
        name = self._reading.pop(task, None)
        if name is None:
            return
        self._refuse(str(error) if isinstance(error, AttachmentError)
                     else f"{name} could not be read: {error}")

    def _refuse(self, message: str) -> None:
        self._show_chips()
        seeing = self.images_refused()  # still said: the images attached before stay
        self.notice.setText(f"{message}\n{seeing}" if seeing else message)
        self.notice.show()
        self.attach_failed.emit(message)

    def _show_chips(self) -> None:
        chips = []
        for index, attachment in enumerate(self._attachments):
            chip = chip_for_draft(attachment, image_tokens=self._image_tokens())
            chip.remove_requested.connect(lambda i=index: self.remove_attachment(i))
            chips.append(chip)
        for task, name in self._reading.items():
            chip = chip_for_reading(name)
            chip.remove_requested.connect(lambda t=task: self._stop_reading(t))
            chips.append(chip)
        self.strip.set_chips(chips)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if files_in(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        files = files_in(event.mimeData())
        if files:
            event.acceptProposedAction()
            self.attach_files(files)

    # ---- sending --------------------------------------------------------------------------
    def restore(self, text: str, attachments: Sequence[Attachment]) -> None:
        """Put a message that was not sent back, as it was: never lose what was typed."""
        self.edit.setPlainText(text)
        self._attachments = list(attachments)
        self._order = list(range(self._next_number, self._next_number + len(attachments)))
        self._next_number += len(attachments)
        self._show_chips()
        self.attachments_changed.emit()

    def set_generating(self, generating: bool) -> None:
        self._generating = generating
        self.button.setText("Stop" if generating else "Send")
        self.button.setToolTip("Stop the reply (Esc)" if generating else "Send (Enter)")
        restyle(self.button, stop=generating)
        self._update_enabled()

    def set_can_send(self, can_send: bool) -> None:
        """False while no model is loaded: typing is fine, sending is not. A message kept
        while a model loaded is sent as soon as sending is possible."""
        self._can_send = can_send
        self._update_enabled()
        if can_send and self.pending:
            self._hold(False)
            self._submit()

    def set_loading(self, loading: bool) -> None:
        """While a model loads, Enter keeps the message and sends it once the model is ready;
        if the load fails, the message stays here, unsent."""
        self._loading = loading
        if loading:
            self.offer_load("")
        if not loading and self.pending and not self._can_send:
            self._hold(False)
            self.notice.setText("The model did not load, so your message was not sent.")
            self.notice.show()
        self._update_enabled()

    def offer_load(self, name: str) -> None:
        """No model is loaded: say so, with a button (and Enter) that loads `name` again; ""
        takes the offer away (a model is loaded or loading)."""
        self._unloaded = name
        self.no_model_label.setText(f"No model loaded — Load {name} to chat.")
        self.load_button.setToolTip(f"Load {name} again (or press Enter to load it and send "
                                    "your message)")
        self.no_model.setVisible(bool(name))
        self._update_enabled()

    def _hold(self, pending: bool) -> None:
        self.pending = pending
        self.edit.setReadOnly(pending)
        self.strip.setEnabled(not pending)
        self.attach_button.setEnabled(not pending)
        self.notice.setText("Your message will be sent as soon as the model is ready "
                            "(Esc to edit it)." if pending else "")
        self.notice.setVisible(pending)

    def _update_enabled(self) -> None:
        self.button.setEnabled(self._generating or self._can_send or self._loading
                               or bool(self._unloaded))

    def _clicked(self) -> None:
        if self._generating:
            self.stop_requested.emit()
        else:
            self._submit()

    def _paste_refused(self, size: int) -> None:
        self.notice.setText(
            f"That paste was not added: {size:,} characters, and a prompt can have at most "
            f"{MAX_PROMPT_CHARS:,}. Your draft is unchanged.")
        self.notice.show()

    def _escape(self) -> None:
        if not self.cancel_pending() and self._generating:
            self.stop_requested.emit()

    def _dictation_started(self) -> None:
        """The words will go where the cursor is; a cursor of its own keeps the place as the
        rest of the text is edited meanwhile (Qt moves it with the edits)."""
        self._live = QTextCursor(self.edit.textCursor())
        self._live.clearSelection()
        self._live_text = ""

    def _dictated_so_far(self, text: str) -> None:
        self._show_dictated(text)

    def _dictated(self, text: str) -> None:
        if not self._show_dictated(text) and text:  # the words so far were edited: add these
            self._live = QTextCursor(self.edit.textCursor())
            self._live.clearSelection()
            self._live_text = ""
            self._show_dictated(text)  # at the cursor, spaced from what is around it
        self._live = None
        self.edit.setFocus()

    def _show_dictated(self, text: str) -> bool:
        """The dictated words so far put in place of the last ones shown; False when those
        were edited meanwhile (the edit wins: nothing more is shown there)."""
        live = self._live
        if live is None or live.selectedText() != self._live_text:
            self._live = None
            return False
        start, end = live.selectionStart(), live.selectionEnd()
        document = self.edit.document()
        before = document.characterAt(start - 1) if start else ""
        after = document.characterAt(end) if end < document.characterCount() - 1 else ""
        words = ("" if not before or before.isspace() or not text else " ") + text
        words += " " if text and after and not after.isspace() else ""
        live.insertText(words)
        end = live.position()
        live.setPosition(start)
        live.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        self._live_text = live.selectedText()
        return True

    def cancel_pending(self) -> bool:
        """Esc on a message waiting for the model: it becomes editable again, unsent."""
        if not self.pending:
            return False
        self._hold(False)
        return True

    def _submit(self) -> None:
        text = self.edit.toPlainText().strip()
        if self._generating or not (text or self._attachments) or self.pending:
            return
        if self._reading:
            self.notice.setText(f"Wait until {', '.join(self._reading.values())} has been "
                                "read, or remove it.")
            self.notice.show()
            return
        if not self._can_send:
            if not self._loading and self._unloaded:
                self.load_requested.emit()  # the model unloaded: load it, then send
            if self._loading:
                self._hold(True)
            return
        refused = self.images_refused()
        if refused:  # before anything is cleared: the draft and its images stay
            self.notice.setText(refused)
            self.notice.show()
            self.attach_failed.emit(refused)
            return
        attachments, self._attachments, self._order = self._attachments, [], []
        self.edit.clear()
        self._show_chips()
        self.attachments_changed.emit()
        self.send_requested.emit(text, attachments)
