"""The status bar: one field per concern, each the only writer of its own widgets, fed by the
signals the window wires to its slots (qutebrowser's status bar is built the same way).

Left to right: the model (its name; a notice while it loads, or the template a file without one
got; the load's progress), the reply on screen (searching, reading the prompt, with its
progress), the voice conversation, a passing notice ("Copied the last reply."); then, kept at
the right, the replies written at once, the API server, the engine's memory and the context
meter. A reply's progress never wipes the model's notice: they are different widgets.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QLabel, QProgressBar, QSizePolicy, QStatusBar, QWidget

from inglenook.core.builtin_templates import describe
from inglenook.core.load import ModelInfo
from inglenook.engine.providers import is_remote_ref, model_name_of
from inglenook.engine.worker import EngineWorker
from inglenook.server.status import ServerStatus
from inglenook.ui.chat.context_meter import ContextMeter
from inglenook.ui.models.loaded_view import LanesIndicator
from inglenook.ui.models.memory_view import MemoryIndicator
from inglenook.ui.models.picker import VISION_TAG
from inglenook.ui.plain import plain_label, plain_tip
from inglenook.ui.widgets.elided_label import ElidedLabel

NOTICE_MS = 8000  # a passing notice ("Copied the last reply.") is read and goes

NO_MODEL = "No model"


def _elided(parent: QWidget, name: str) -> ElidedLabel:
    """Plain text (model names, file names) cut with "…" before it widens the window; the whole
    text in its tooltip."""
    label = ElidedLabel(parent)
    label.setObjectName(name)
    label.hide()
    return label


def _progress(parent: QWidget, name: str) -> QProgressBar:
    bar = QProgressBar(parent)
    bar.setObjectName(name)
    bar.setMaximumWidth(180)
    bar.setTextVisible(False)
    bar.hide()
    return bar


def _say(label: QLabel, text: str, tip: str = "") -> None:
    label.setText(text)
    label.setToolTip(plain_tip(tip))
    label.setVisible(bool(text))


class ModelStatus(QObject):
    """The window's model: its name with its template and whether it sees images (or the chat
    on screen's own model, loaded beside it), a notice and the load's progress.

    Slots: loading(path, fraction) (the worker's model_loading), loaded(ModelInfo),
    gone() (failed, lost, unloaded), show_chat_model(ModelInfo | None) (ChatModels)."""

    def __init__(self, bar: QStatusBar) -> None:
        super().__init__(bar)
        # The name gives way (cut with "…") before the context meter in a narrow window.
        self.name = ElidedLabel(bar)
        self.name.setObjectName("statusModel")
        self.name.setText(NO_MODEL)
        self.name.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.notice = _elided(bar, "statusModelNotice")
        self.progress = _progress(bar, "statusLoadProgress")
        self.model: ModelInfo | None = None  # the window's

    def loading(self, path: str, fraction: float) -> None:
        name = model_name_of(path) if is_remote_ref(path) else Path(path).name
        _say(self.notice, f"Loading {name}…" if fraction < 1 or not is_remote_ref(path)
             else f"Connecting to {name}…")
        self.progress.setValue(int(fraction * 100))
        self.progress.show()

    def loaded(self, info: ModelInfo) -> None:
        self.model = info
        self.progress.hide()
        self.show_chat_model(None)
        # A file without a template: which one it got and why, said while it is loaded.
        notice = _template_notice(info) if info.template_source == "detected" else ""
        _say(self.notice, notice, notice)

    def gone(self, *_args: object) -> None:
        self.model = None
        self.progress.hide()
        _say(self.notice, "")
        self.name.setText(NO_MODEL)
        self.name.setToolTip("")

    def show_chat_model(self, beside: ModelInfo | None) -> None:
        """The window's model, or the chat on screen's own model loaded `beside` it."""
        info = beside or self.model
        if info is None:
            return
        built_in = info.template_source in ("detected", "chosen")
        tags = (f"  ·  {info.template_name} template" if built_in else "") + (
            f"  ·  {VISION_TAG}" if info.vision else "")
        if beside is not None and self.model is not None:
            tags += f"  ·  this chat's model, beside {self.model.name}"
        notice = _template_notice(info)
        self.name.setText(info.name + tags)
        self.name.setToolTip(plain_tip(
            f"{info.path}\n{info.architecture}, context {info.n_ctx} (trained {info.n_ctx_train}),"
            f" {info.n_threads} threads, GPU layers {info.n_gpu_layers}, KV {info.kv_cache_type},"
            f" {info.n_slots} {'reply' if info.n_slots == 1 else 'replies'} at once,"
            f" loaded in {info.load_seconds:.1f} s"
            + ("" if is_remote_ref(info.path) else f"\n{info.family.summary()}")
            + (f"\nSees images with {Path(info.projector).name}: a 512 × 512 image takes "
               f"{info.image_tokens:,} tokens" if info.vision and info.projector
               else "\nSees images (the server says so, or you marked it)" if info.vision
               else "")
            + (f"\n{notice}" if notice else "")))


def _template_notice(info: ModelInfo) -> str:
    if is_remote_ref(info.path):
        return ""  # a server's own business
    return describe(info.template_source, info.template_name, info.template_reason)


class ReplyStatus(QObject):
    """What the reply on screen does before its first word: searching the chat's documents,
    reading its prompt (with progress). Slot: show(text, done, total) (ReplyOnScreen's
    status_changed; total 0: no progress bar)."""

    def __init__(self, bar: QStatusBar) -> None:
        super().__init__(bar)
        self.text = plain_label("", bar, name="statusReply")
        self.text.hide()
        self.progress = _progress(bar, "statusPromptProgress")

    def show(self, text: str, done: int, total: int) -> None:
        _say(self.text, text)
        self.progress.setValue(int(100 * done / max(total, 1)))
        self.progress.setVisible(total > 0 and done < total)


class TextStatus(QObject):
    """One line of a concern's own: the voice conversation's state. Slot: show(text)."""

    def __init__(self, bar: QStatusBar, name: str) -> None:
        super().__init__(bar)
        self.label = _elided(bar, name)

    def show(self, text: str) -> None:
        _say(self.label, text, text)


class PassingNotice(TextStatus):
    """A notice that goes by itself after a while ("Copied the last reply.")."""

    def __init__(self, bar: QStatusBar, name: str) -> None:
        super().__init__(bar, name)
        self._timer = QTimer(self, singleShot=True, interval=NOTICE_MS)
        self._timer.timeout.connect(lambda: self.show(""))

    def show(self, text: str) -> None:
        super().show(text)
        self._timer.start() if text else self._timer.stop()


class ServerIndicator(QObject):
    """The API server while it serves: its address and the requests it answered.
    Slot: show(ServerStatus) (ServerController's shown)."""

    def __init__(self, bar: QStatusBar) -> None:
        super().__init__(bar)
        self.label = plain_label("", bar, name="statusServer")
        self.label.hide()

    def show(self, status: ServerStatus) -> None:
        _say(self.label, f"API on {status.url}  ·  {status.requests} requests"
             if status.running else "",
             f"Serving the loaded model at {status.url}/v1" if status.running else "")


class StatusBar(QStatusBar):
    """The window's status bar. Its fields (`model`, `reply`, `voice`, `notice`, `lanes`,
    `server`, `memory`, `context`) are the only writers of their widgets; the lanes and the
    memory follow the worker themselves, the others are fed through their slots."""

    def __init__(self, worker: EngineWorker, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("statusBar")
        self.model = ModelStatus(self)
        self.reply = ReplyStatus(self)
        self.voice = TextStatus(self, "statusVoice")
        self.notice = PassingNotice(self, "statusNotice")
        self.lanes = LanesIndicator(worker, plain_label("", self, name="statusLanes"))
        self.server = ServerIndicator(self)
        self.memory = MemoryIndicator(worker, plain_label("", self, name="statusMemory"))
        self.context = ContextMeter(plain_label("", self, name="statusContext"))
        self.addWidget(self.model.name)
        self.addWidget(self.model.notice, 1)
        self.addWidget(self.model.progress)
        for widget in (self.reply.text, self.reply.progress):
            self.addWidget(widget)
        self.addWidget(self.voice.label, 1)
        self.addWidget(self.notice.label, 1)
        for widget in (self.lanes.label, self.server.label, self.memory.label,
                       self.context.label):
            self.addPermanentWidget(widget)
