"""Remote engines: add, edit and remove OpenAI-compatible endpoints, and test a connection.

The key goes to the system keyring. Where there is none, the dialog says so and asks: keep it in
plain text in providers.json, or for this session only. Network and keyring work runs off the
GUI thread (ui/tasks); a test answered after the form changed is dropped.

Below the form, the endpoint's models with a tick for those that read images: servers that say
(LM Studio, Ollama, OpenRouter's listing) are believed whatever is ticked; for the others (vLLM,
llama-server, Jan…) the tick decides (engine/remote_vision.py). The list holds the models
ticked before and those the last connection test listed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import remote_keys
from inglenook.engine.providers import Provider, ProviderError, ProviderStore
from inglenook.engine.remote_api import Endpoint, RemoteModel, list_models, normalize_base_url
from inglenook.engine.remote_catalog import describe
from inglenook.ui import tasks, theme
from inglenook.ui.plain import plain_box, plain_label, plain_tip

KeyChoice = Literal["file", "session", ""]  # "": the user cancelled
MAX_SHOWN = 500  # models of one server listed with their ticks
_KEY_NOTES = {"none": "No API key.",
              "keyring": "A key is stored in the system keyring.",
              "file": "A key is stored in plain text in providers.json (you agreed to it).",
              "session": "A key is kept for this session only."}


def ask_where_to_keep_key(parent: QWidget, message: str) -> KeyChoice:
    """No keyring: plain text in providers.json, this session only, or cancel."""
    box = plain_box(QMessageBox(QMessageBox.Icon.Warning, "No system keyring", message,
                                QMessageBox.StandardButton.Cancel, parent))
    plain = box.addButton("Store in plain text", QMessageBox.ButtonRole.AcceptRole)
    session = box.addButton("This session only", QMessageBox.ButtonRole.AcceptRole)
    box.exec()
    clicked = box.clickedButton()
    return "file" if clicked is plain else "session" if clicked is session else ""


class ProvidersDialog(QDialog):
    """Signals:
    providers_changed(): an endpoint was added, changed or removed (the model picker should
        list remote models again).
    vision_marked(str): the models of this endpoint (its id) that read images were saved (a
        model of it in use should be chosen again).
    tested(str): a connection test ended; its result line (for tests and the status bar).
    """

    providers_changed = Signal()
    vision_marked = Signal(str)
    tested = Signal(str)

    def __init__(self, store: ProviderStore | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("providersDialog")
        self.setWindowTitle("Remote engines")
        self.resize(720, 420)
        self.store = store or ProviderStore()
        # Replaceable so tests can answer the questions without a modal box.
        self.ask_key_place: Callable[[str], KeyChoice] = \
            lambda message: ask_where_to_keep_key(self, message)
        self.confirm_remove: Callable[[str], bool] = self._confirm_remove
        self._editing = ""  # the id of the provider in the form; "" for a new one
        self._testing: tasks.Task | None = None  # the latest test; older answers are dropped
        self._said: dict[str, bool] = {}  # what the last test's listing said of its models
        self._build()
        self.reload()

    # ---- layout --------------------------------------------------------------------------------
    def _build(self) -> None:
        intro = QLabel("Chat with a model that runs on another machine: any OpenAI-compatible "
                       "server (vLLM, llama.cpp's llama-server, Ollama, LM Studio, or "
                       "another Inglenook's <i>inglenook serve</i>). Its models then appear in "
                       "the model picker.", self)
        intro.setWordWrap(True)
        self.providers_list = QListWidget(self)
        self.providers_list.setObjectName("providersList")
        self.providers_list.currentItemChanged.connect(self._on_selected)
        self.add_button = QPushButton("Add", self)
        self.add_button.setObjectName("providersAdd")
        self.add_button.clicked.connect(self.new_provider)
        self.remove_button = QPushButton("Remove", self)
        self.remove_button.setObjectName("providersRemove")
        self.remove_button.clicked.connect(self.remove_current)
        left = QVBoxLayout()
        left.addWidget(self.providers_list, 1)
        row = QHBoxLayout()
        row.addWidget(self.add_button)
        row.addWidget(self.remove_button)
        left.addLayout(row)

        self.name = QLineEdit(self)
        self.name.setObjectName("providerName")
        self.name.setPlaceholderText("GPU server")
        self.url = QLineEdit(self)
        self.url.setObjectName("providerUrl")
        self.url.setPlaceholderText("http://gpu-box:8000/v1")
        self.key = QLineEdit(self)
        self.key.setObjectName("providerKey")
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_note = plain_label("", self, name="providerKeyNote")
        self.key_note.setWordWrap(True)
        self.clear_key_button = QPushButton("Remove key", self)
        self.clear_key_button.setObjectName("providerClearKey")
        self.clear_key_button.clicked.connect(self.clear_key)
        form = QFormLayout()
        form.addRow("Name", self.name)
        form.addRow("Base URL", self.url)
        form.addRow("API key", self.key)
        key_row = QHBoxLayout()
        key_row.addWidget(self.key_note, 1)
        key_row.addWidget(self.clear_key_button)
        form.addRow("", key_row)
        self.test_button = QPushButton("Test connection", self)
        self.test_button.setObjectName("providerTest")
        self.test_button.clicked.connect(self.test_connection)
        self.save_button = QPushButton("Save", self)
        self.save_button.setObjectName("providerSave")
        self.save_button.setDefault(True)
        self.save_button.clicked.connect(self.save)
        # Plain text: what a remote server answers (model names, errors) is outside text.
        self.status_line = plain_label("", self, name="providerResult")
        self.status_line.setWordWrap(True)
        self.status_line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        buttons = QHBoxLayout()
        buttons.addWidget(self.test_button)
        buttons.addStretch(1)
        buttons.addWidget(self.save_button)
        self.vision_models = QListWidget(self)
        self.vision_models.setObjectName("providerVisionModels")
        self.vision_models.setAccessibleName("Models that read images")
        self.vision_models.setToolTip(
            "Tick the models that read images, for servers that do not say (vLLM, "
            "llama-server, Jan…). LM Studio, Ollama and OpenRouter say it themselves, and are "
            "believed. Test connection lists the server's models here; Save keeps the ticks.")
        self.vision_models.setMaximumHeight(120)
        right = QVBoxLayout()
        right.addLayout(form)
        right.addLayout(buttons)
        right.addWidget(self.status_line)
        right.addWidget(plain_label("Models that read images", self, name="providerVisionTitle"))
        right.addWidget(self.vision_models, 1)

        body = QHBoxLayout()
        body.addLayout(left, 2)
        body.addLayout(right, 3)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        close.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(body, 1)
        layout.addWidget(close)

    # ---- the list -------------------------------------------------------------------------------
    def reload(self, select: str = "") -> None:
        providers = self.store.providers()
        self.providers_list.blockSignals(True)
        self.providers_list.clear()
        for provider in providers:
            item = QListWidgetItem(provider.name, self.providers_list)
            item.setData(Qt.ItemDataRole.UserRole, provider.id)
            item.setToolTip(plain_tip(provider.base_url))
        self.providers_list.blockSignals(False)
        if self.store.problem:
            self._show(self.store.problem, error=True)
        chosen = select or self._editing
        for row in range(self.providers_list.count()):
            if self.providers_list.item(row).data(Qt.ItemDataRole.UserRole) == chosen:
                self.providers_list.setCurrentRow(row)
                return
        if providers:
            self.providers_list.setCurrentRow(0)
        else:
            self.new_provider()

    def _on_selected(self, item: QListWidgetItem | None, _previous: object) -> None:
        provider = self.store.get(item.data(Qt.ItemDataRole.UserRole)) if item else None
        if provider is None:
            self.new_provider()
            return
        self._fill(provider)

    def _fill(self, provider: Provider) -> None:
        self._editing = provider.id
        self.name.setText(provider.name)
        self.url.setText(provider.base_url)
        self.key.clear()
        self.key.setPlaceholderText("leave empty to keep the stored key"
                                    if provider.key_place != "none" else "none")
        self.key_note.setText(_KEY_NOTES[provider.key_place])
        self.clear_key_button.setEnabled(provider.key_place != "none")
        self.remove_button.setEnabled(True)
        self._fill_models(provider.vision_models, provider.vision_models)
        self._show("")

    def new_provider(self) -> None:
        self._editing = ""
        self.providers_list.blockSignals(True)
        self.providers_list.clearSelection()
        self.providers_list.setCurrentRow(-1)
        self.providers_list.blockSignals(False)
        for field in (self.name, self.url, self.key):
            field.clear()
        self.key.setPlaceholderText("none")
        usable, backend = remote_keys.backend()
        self.key_note.setText("Stored in the system keyring." if usable else
                              f"No system keyring here ({backend}): you will be asked where "
                              "to keep a key.")
        self.clear_key_button.setEnabled(False)
        self.remove_button.setEnabled(False)
        self._fill_models((), ())
        self._show("")
        self.name.setFocus()

    # ---- commands -------------------------------------------------------------------------------
    def save(self) -> bool:
        key = self.key.text().strip() or None
        place: Literal["auto", "file", "session"] = "auto"
        while True:
            try:
                provider = self.store.save(self.name.text(), self.url.text(), key,
                                           provider_id=self._editing, key_place=place)
                break
            except ProviderError as exc:
                self._show(str(exc), error=True)
                return False
            except remote_keys.KeyStoreError as exc:
                if place != "auto":
                    self._show(str(exc), error=True)
                    return False
                message = str(exc) if isinstance(exc, remote_keys.NoKeyring) else (
                    f"{exc} It can be kept in plain text in providers.json instead, or for "
                    "this session only.")
                choice = self.ask_key_place(message)
                if not choice:
                    self._show("Not saved.")
                    return False
                place = choice
        marked = self.marked_models()
        self._editing = provider.id
        ticks_changed = marked != provider.vision_models
        if ticks_changed:
            try:
                provider = self.store.mark_vision(provider.id, marked)
            except ProviderError as exc:
                self._show(str(exc), error=True)
                return False
        listed, said = self._listed_models(), self._said
        self.reload(provider.id)
        self._fill_models(listed, provider.vision_models, said)
        self._show(f"Saved {provider.name}. {_KEY_NOTES[provider.key_place]}")
        self.providers_changed.emit()
        if ticks_changed:  # the model in use is chosen again only when its tick may differ
            self.vision_marked.emit(provider.id)
        return True

    # ---- the models that read images ------------------------------------------------------------
    def _fill_models(self, models: Sequence[str], marked: Sequence[str],
                     said: Mapping[str, bool] | None = None) -> None:
        """Show `models` (and the marked ones), ticked when marked; those whose server says
        are shown as it says, and cannot be ticked."""
        said = self._said = dict(said or {})
        self.vision_models.clear()
        for model in dict.fromkeys([*marked, *models]):
            item = QListWidgetItem(model, self.vision_models)
            item.setData(Qt.ItemDataRole.UserRole, model)
            if model in said:
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsUserCheckable
                              & ~Qt.ItemFlag.ItemIsEnabled)
                item.setText(f"{model} (the server says it "
                             f"{'reads' if said[model] else 'reads no'} images)")
                item.setCheckState(Qt.CheckState.Checked if said[model]
                                   else Qt.CheckState.Unchecked)
            else:
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                item.setCheckState(Qt.CheckState.Checked if model in marked
                                   else Qt.CheckState.Unchecked)

    def _items(self) -> list[QListWidgetItem]:
        return [self.vision_models.item(i) for i in range(self.vision_models.count())]

    def _listed_models(self) -> list[str]:
        return [item.data(Qt.ItemDataRole.UserRole) for item in self._items()]

    def marked_models(self) -> tuple[str, ...]:
        """The models ticked by the user (not those the server speaks for)."""
        return tuple(item.data(Qt.ItemDataRole.UserRole) for item in self._items()
                     if item.flags() & Qt.ItemFlag.ItemIsUserCheckable
                     and item.checkState() == Qt.CheckState.Checked)

    def clear_key(self) -> None:
        if not self._editing:
            return
        try:
            provider = self.store.save(self.name.text(), self.url.text(), "",
                                       provider_id=self._editing)
        except (ProviderError, remote_keys.KeyStoreError) as exc:
            self._show(str(exc), error=True)
            return
        self.reload(provider.id)
        self._show("The API key was removed.")
        self.providers_changed.emit()

    def remove_current(self) -> None:
        item = self.providers_list.currentItem()
        if item is None or not self.confirm_remove(item.text()):
            return
        self.store.remove(item.data(Qt.ItemDataRole.UserRole))
        self._editing = ""
        self.reload()
        self.providers_changed.emit()

    def _confirm_remove(self, name: str) -> bool:
        box = plain_box(QMessageBox(QMessageBox.Icon.Question, "Remove endpoint",
                                    f"Remove {name} and its stored API key?",
                                    QMessageBox.StandardButton.Yes
                                    | QMessageBox.StandardButton.No, self))
        return box.exec() == QMessageBox.StandardButton.Yes

    def test_connection(self) -> None:
        """List the endpoint's models with what the form says now (a key typed, or the
        stored one); the answer arrives on the GUI thread."""
        try:
            url = normalize_base_url(self.url.text())
        except ValueError as exc:
            self._show(str(exc), error=True)
            return
        self._show(f"Connecting to {url} …")
        self.test_button.setEnabled(False)
        self._testing = tasks.run(_test, self.store, self._editing, url, self.key.text().strip(),
                                  on_done=self._on_tested, on_failed=self._on_test_failed,
                                  owner=self, replaces=self._testing)

    def _on_tested(self, result: object) -> None:
        line, models = result if isinstance(result, tuple) else (str(result), ())
        self.test_button.setEnabled(True)
        self._fill_models([m.id for m in models], self.marked_models(),
                          {m.id: m.vision for m in models if m.vision is not None})
        self._show(str(line))
        self.tested.emit(str(line))

    def _on_test_failed(self, exc: object) -> None:
        self.test_button.setEnabled(True)
        self._show(str(exc), error=True)
        self.tested.emit(str(exc))

    def _show(self, text: str, error: bool = False) -> None:
        self.status_line.setText(text)
        self.status_line.setProperty("error", error)
        self.status_line.setStyleSheet(
            f"color: {theme.current().colors.danger_text};" if error else "")


def _test(store: ProviderStore, provider_id: str, url: str, typed_key: str
          ) -> tuple[str, tuple[RemoteModel, ...]]:
    """On a worker thread: the key typed, else the stored one (the keyring may be slow). The
    result line, and the models listed (at most MAX_SHOWN of them)."""
    key = typed_key
    if not key and provider_id:
        provider = store.get(provider_id)
        key = store.api_key(provider) if provider else ""
    endpoint = Endpoint(url, key)
    listing = list_models(endpoint)
    return describe(listing, endpoint), listing.models[:MAX_SHOWN]
