"""The window's menus: File, Edit, View, Chat, Models, Help."""

from __future__ import annotations

from functools import partial
from typing import Protocol

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QAbstractButton, QApplication, QWidget

from inglenook.ui import theme
from inglenook.ui.app_settings import AppSettings
from inglenook.ui.chat.chat_controller import ChatController
from inglenook.ui.chat.composer import Composer
from inglenook.ui.chat.find_bar import FindInChat
from inglenook.ui.history.history_controller import HistoryController
from inglenook.ui.models.loaded_view import LoadedModels
from inglenook.ui.models.model_controller import ModelController
from inglenook.ui.server.server_controller import ServerController
from inglenook.ui.side.side_controller import SideController
from inglenook.ui.window import edit_actions as edits
from inglenook.ui.window.commands import Command, Menu
from inglenook.ui.window.text_zoom import zoom


class MenuHost(Protocol):
    """What the menus act on: the window's controllers, the widgets they show or hide, and the
    window's own commands (MainWindow is one)."""

    @property
    def app_settings(self) -> AppSettings: ...
    @property
    def chats(self) -> ChatController: ...
    @property
    def models(self) -> ModelController: ...
    @property
    def history(self) -> HistoryController: ...
    @property
    def side(self) -> SideController: ...
    @property
    def finder(self) -> FindInChat: ...
    @property
    def loaded(self) -> LoadedModels: ...
    @property
    def server(self) -> ServerController: ...
    @property
    def composer(self) -> Composer: ...
    @property
    def sidebar(self) -> QWidget: ...
    @property
    def panel_button(self) -> QAbstractButton: ...

    def close(self) -> bool: ...
    def show_preferences(self) -> None: ...
    def toggle_sidebar(self) -> None: ...
    def focus_composer(self) -> None: ...
    def show_knowledge(self) -> None: ...
    def show_shortcuts(self) -> None: ...
    def show_about(self) -> None: ...


Std = QKeySequence.StandardKey
# The Edit menu's text editing, acting on the focused widget (edit_actions.py).
EDITS = (("undo", "Undo", Std.Undo), ("redo", "Redo", Std.Redo), ("cut", "Cut", Std.Cut),
         ("copy", "Copy", Std.Copy), ("paste", "Paste", Std.Paste),
         ("selectAll", "Select all", Std.SelectAll))
THEME_CHOICES = (("system", "Follow the system", "Light or dark as the desktop is"),
                 ("light", "Light", "Always light"),
                 ("dark", "Dark", "Always dark"))


def theme_is(mode: str) -> bool:
    return theme.manager().mode == mode


def use_theme(w: MenuHost, mode: str) -> None:
    """Switch to theme `mode` now and keep it in the settings."""
    w.app_settings.set("theme", mode)  # the window switches on its changed("theme")


def window_menus(w: MenuHost) -> list[Menu]:
    chats, models, history, side = w.chats, w.models, w.history, w.side
    return [
        Menu("&File", (
            Command("newChat", "New chat", chats.new_chat, [Std.New]),
            Command("openModel", "Open model file…", models.open_file, [Std.Open]),
            None,
            Command("importChats", "Import conversations…", history.import_conversations),
            Command("exportChat", "Export this conversation…", history.export_conversation),
            Command("exportAll", "Export all conversations…", history.export_all),
            None,
            Command("closeWindow", "Close window", w.close, ["Ctrl+W"]),
            Command("quit", "Quit", QApplication.closeAllWindows, ["Ctrl+Q"],
                    role=QAction.MenuRole.QuitRole),
        )),
        Menu("&Edit", (
            *(Command(op, text, partial(edits.run, op), [key], enabled=partial(edits.can, op))
              for op, text, key in EDITS),
            None,
            Command("copyReply", "Copy last reply", chats.copy_last_reply, ["Ctrl+Shift+C"],
                    "Copy the last reply as Markdown"),
            Command("findInChat", "Find in this chat…", w.finder.open, [Std.Find],
                    "Find words in the chat on screen"),
            Command("findNext", "Find next", lambda: w.finder.step(1), [Std.FindNext]),
            Command("findPrevious", "Find previous", lambda: w.finder.step(-1),
                    [Std.FindPrevious]),
            Command("search", "Search conversations…", history.search, ["Ctrl+K"],
                    "Search every conversation"),
            None,
            Command("preferences", "Preferences…", w.show_preferences, ["Ctrl+,"],
                    "Sampling, system prompt and model loading options",
                    role=QAction.MenuRole.PreferencesRole),
        )),
        Menu("&View", (
            Command("toggleSidebar", "Conversations sidebar", w.toggle_sidebar,
                    ["Ctrl+Shift+B"], "Show or hide the list of conversations",
                    checked=lambda: not w.sidebar.isHidden()),
            Command("toggleSidePanel", "Settings panel", w.panel_button.toggle,
                    ["Ctrl+Shift+P"], "Show or hide the sampling and model settings",
                    checked=w.panel_button.isChecked),
            Command("focusComposer", "Go to the message box", w.focus_composer, ["Ctrl+L"]),
            None,
            Command("zoomIn", "Larger text", partial(zoom, w.app_settings, 1),
                    ["Ctrl+=", Std.ZoomIn], "Make the chat's text larger"),
            Command("zoomOut", "Smaller text", partial(zoom, w.app_settings, -1), [Std.ZoomOut]),
            Command("zoomReset", "Actual size", partial(zoom, w.app_settings, 0), ["Ctrl+0"],
                    "The chat's text at its normal size"),
            None,
            Menu("Theme", tuple(
                Command(f"theme{mode.capitalize()}", text, partial(use_theme, w, mode), tip=tip,
                        group="theme", checked=partial(theme_is, mode))
                for mode, text, tip in THEME_CHOICES)),
        )),
        Menu("&Chat", (
            Command("regenerate", "Regenerate the last reply", chats.regenerate, ["Ctrl+R"]),
            Command("continueReply", "Continue the last reply", chats.continue_reply,
                    tip="Go on from where a stopped or cut reply ended"),
            Command("tools", "Tools…", chats.show_tools,
                    tip="MCP tool servers, their tools, and which this chat uses"),
            Command("knowledge", "Knowledge…", w.show_knowledge,
                    tip="Collections of your own folders and files, searched before replies"),
            Command("stop", "Stop the reply", chats.escape,
                    ["Esc"],
                    "Stop the reply of this chat, wherever the focus is"),
            Command("dictate", "Dictate", w.composer.mic.toggle, ["Ctrl+Shift+D"],
                    "Speak your message into the message box; again to stop"),
            Command("voiceConversation", "Voice conversation", chats.voice.toggle,
                    tip="Speak, hear the reply, speak again: hands-free (Esc ends it)",
                    checkable=True, checked=lambda: chats.voice.active),
            Command("readRepliesAloud", "Read replies aloud",
                    lambda: w.app_settings.set("read_replies_aloud",
                                               not w.app_settings.value.read_replies_aloud),
                    tip="Speak each reply sentence by sentence as it is written (Esc stops)",
                    checkable=True, checked=lambda: w.app_settings.value.read_replies_aloud),
            None,
            Command("nextChat", "Next conversation", lambda: history.step(1),
                    ["Ctrl+PgDown", "Alt+Down"]),
            Command("previousChat", "Previous conversation", lambda: history.step(-1),
                    ["Ctrl+PgUp", "Alt+Up"]),
        )),
        Menu("&Models", (
            Command("models", "Models: library, discover, downloads…", models.show_dialog,
                    ["Ctrl+Shift+M"]),
            Command("modelDefaults", "Defaults for this model…",
                    lambda: side.edit_model_defaults(models.path)),
            Command("reloadModel", "Reload model", models.reload, ["Ctrl+Shift+R"],
                    "Load the model again with the options in Model loading"),
            Command("remoteEngines", "Remote engines…", models.show_providers,
                    tip="Use a model served by llama-server, vLLM, Ollama, LM Studio…"),
            Command("loadedModels", "Loaded models…", w.loaded.show_dialog,
                    tip="What is in memory (the window's model, models the API loaded); "
                        "unload"),
            None,
            Command("apiServer", "Local API server…", w.server.show_dialog,
                    tip="Serve the loaded model to other programs (OpenAI-compatible)"),
            Command("connectApp", "Connect an app…", w.server.show_connect,
                    tip="What to paste into Claude Code, Codex, Continue, Aider, Open WebUI, "
                        "Zed or your own script to use the local API"),
        )),
        Menu("&Help", (
            Command("shortcuts", "Keyboard shortcuts", w.show_shortcuts, ["Ctrl+/", "F1"]),
            Command("about", "About Inglenook", w.show_about,
                    role=QAction.MenuRole.AboutRole),
        )),
    ]
