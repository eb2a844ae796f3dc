"""A model per chat, in the window (the rules are chat/chat_model.py's): a chat on screen brings
its model back, choosing a model in the picker (or the Models dialog's Use) gives it to the chat
on screen, and a reply runs on its chat's model: the window's ("" group), or the chat's own
file loaded beside it through the engine router, where it streams beside the other chats'."""

from __future__ import annotations

import contextlib
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from inglenook.chat import chat_model
from inglenook.chat.session import ChatSession
from inglenook.core.load import ModelInfo
from inglenook.engine.providers import is_remote_ref
from inglenook.engine.worker import EngineWorker
from inglenook.store import StoreError
from inglenook.ui.chat.chat_controller import ChatController
from inglenook.ui.models.model_controller import ModelController
from inglenook.ui.widgets.banner import Banner


class ChatModels(QObject):
    """Binds the chats' own models to the picker, the router and the window's model. A QObject
    on the GUI thread: what the worker says about loaded models arrives queued.

    Signals:
        model_shown(object): the chat on screen is answered by this ModelInfo, loaded beside
            the window's model; None: by the window's.
    """

    model_shown = Signal(object)

    def __init__(self, models: ModelController, worker: EngineWorker, banner: Banner,
                 parent: QObject) -> None:
        super().__init__(parent)
        self.models, self.worker, self.banner = models, worker, banner
        self._chats: ChatController | None = None
        self._switched_to = ""  # the window's model, loaded because a chat on screen used it
        self._chosen = ""  # the window's model, loaded because it was chosen for the chat
        models.choose = self.choose
        worker.models_changed.connect(self._loaded_changed)

    def bind(self, chats: ChatController) -> None:
        self._chats = chats
        chats.engine_group = self.group

    @property
    def chats(self) -> ChatController:
        assert self._chats is not None, "bind() first"
        return self._chats

    def model_for(self, session: ChatSession | None = None) -> tuple[ModelInfo | None, str]:
        """The model a session's replies are written by, and its file's sha256 when known
        (ChatController's `model`): the window's, or the chat's own loaded beside it (the
        window's until that one is loaded: the same load options)."""
        window = (self.models.model, self.models.sha256)
        if self._chats is None:
            return window
        group = self.group(session or self.chats.session)
        beside = self.worker.model_of(group) if group else None
        return (beside, "") if beside is not None else window

    def group(self, session: ChatSession) -> str:
        """The engine a reply in `session` runs on (EngineWorker.generate's group)."""
        wanted = session.settings.model
        return chat_model.engine_group(session.settings, self._loaded(),
                                       bool(wanted) and Path(wanted).is_file())

    def shown(self, session: ChatSession) -> None:
        """A chat came on screen: the model it was answered with comes back with it."""
        wanted = session.settings.model
        switch = chat_model.to_load(
            session.settings, self._loaded(), self.models.is_loading,
            self._others_replying(session),
            bool(wanted) and (is_remote_ref(wanted) or Path(wanted).is_file()), self._beside(),
            bool(wanted) and Path(wanted).is_file())
        self._apply(session, switch)

    def choose(self, path: str) -> None:
        """`path` chosen for the chat on screen."""
        session = self.chats.session
        switch = chat_model.chosen(path, self._loaded(), self._others_replying(session),
                                   self._beside(), Path(path).is_file())
        if not switch.load and not switch.beside:  # back to the window's model
            self._record(session, path)
            self.models.picker.select(path)
            self._show_model(session)
            return
        self._chosen = switch.load  # the chat is answered by it once it is loaded
        self._apply(session, switch)

    def ready(self, path: str) -> None:
        """The window's model `path` is loaded: the chat on screen is answered by it when it
        was chosen for it, or unless it was loaded for a chat that came on screen and then
        another one did, or the chat is answered by its own model beside it (a Reload)."""
        session = self.chats.session
        wanted = session.settings.model
        beside = bool(wanted) and wanted != path and wanted in self._beside()
        if self._chosen == path or ((self._switched_to != path or not wanted) and not beside):
            self._record(session, path)
        self._switched_to = self._chosen = ""
        group = self.group(session)
        if group:  # the picker and the status bar stay on the chat's own model
            self.models.picker.select(group)
            self._show_model(session)

    def _apply(self, session: ChatSession, switch: chat_model.Switch) -> None:
        loaded = self._loaded()
        if switch.load:
            self._switched_to = switch.load
            self.models.load(switch.load)
        elif switch.beside:
            self._record(session, switch.beside)
            self.models.picker.select(switch.beside)
            if switch.beside not in self._beside():
                self.worker.preload(switch.beside)
                self.banner.show_message(
                    f"{Path(switch.beside).stem} is loading beside {Path(loaded).stem}: this "
                    "chat's replies go to it, the other chats' stay where they are.", "info")
        else:
            if switch.notice:
                self.banner.show_message(switch.notice, "info")
            if loaded and not self.models.is_loading:
                self.models.picker.select(loaded)  # from a chat answered beside
        self._show_model(session)

    def _loaded_changed(self) -> None:
        """A model was loaded or unloaded beside the window's: the picker marks it, and the
        status bar names the chat's own model once it is there."""
        self.models.picker.set_beside(self._beside())
        if self._chats is not None:
            self._show_model(self.chats.session)

    def _show_model(self, session: ChatSession) -> None:
        group = self.group(session)
        beside = self.worker.model_of(group) if group else None
        self.model_shown.emit(beside)
        self.chats.show_context()  # the meter counts against that model's context

    def _record(self, session: ChatSession, path: str) -> None:
        session.set_settings(chat_model.answered_with(session.settings, path))
        with contextlib.suppress(StoreError):  # saved with its next message then
            session.save_settings()

    def _loaded(self) -> str:
        return self.models.model.path if self.models.model is not None else ""

    def _beside(self) -> frozenset[str]:
        return frozenset(m.path for m in self.worker.loaded_models() if not m.by_window)

    def _others_replying(self, session: ChatSession) -> bool:
        return any(s is not session for s in self.chats.sessions.replying())
