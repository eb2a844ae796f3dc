"""Tools: the MCP servers in mcp.json (add, remove, turn on or off), the tools of the one
selected, and which servers the chat on screen uses. A model whose chat template cannot call
tools says so here, and its chats cannot turn servers on.
"""

from __future__ import annotations

import shlex

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.chat.session import ChatSession
from inglenook.core.load import ModelInfo
from inglenook.store import StoreError
from inglenook.tools.config import ConfigError, ServerConfig, check_name, check_url
from inglenook.ui.plain import plain_tip
from inglenook.ui.tools.chat_tools import NO_TOOL_SUPPORT
from inglenook.ui.tools.tool_controller import ToolController
from inglenook.ui.widgets.controls import helper_label

NAME = Qt.ItemDataRole.UserRole


def server_from_line(name: str, target: str) -> ServerConfig:
    """A server from the two fields: an http(s) address, or a command line (ConfigError)."""
    name, target = check_name(name.strip()), target.strip()
    if target.startswith(("http://", "https://")):
        return ServerConfig(name, url=check_url(target))
    try:
        words = shlex.split(target)
    except ValueError as exc:
        raise ConfigError(f"the command cannot be read: {exc}") from None
    if not words:
        raise ConfigError("give the command that starts the server, or its address")
    return ServerConfig(name, command=words[0], args=tuple(words[1:]))


class ToolsDialog(QDialog):
    """Signals:
        chat_tools_changed(): the chat on screen uses other servers now (saved with it).
    """

    chat_tools_changed = Signal()

    def __init__(self, tools: ToolController, session: ChatSession, model: ModelInfo | None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolsDialog")
        self.setWindowTitle("Tools")
        self.resize(720, 460)
        self.tools, self.session = tools, session
        self.supported = model is None or bool(model.tool_format)
        self.notice = helper_label("", self, name="toolsNotice")
        self.servers = QListWidget(self)
        self.servers.setObjectName("toolServerList")
        self.servers.setAccessibleName("Tool servers")
        self.servers.setToolTip("Tick a server to let the model in this chat use its tools")
        self.tool_list = QListWidget(self)
        self.tool_list.setObjectName("toolList")
        self.tool_list.setAccessibleName("Tools of the selected server")
        self.tool_list.setToolTip("What the selected server offers")
        self.state = helper_label("Select a server to see its tools.", self,
                                  name="toolServerState")
        self.power_button = self._button("Turn off", "toolPowerButton",
                                         "Turn the selected server off or on in mcp.json",
                                         self._toggle_power)
        self.remove_button = self._button("Remove", "toolRemoveButton",
                                          "Remove the selected server from mcp.json",
                                          self._remove)
        self.name_edit = self._edit("toolNameEdit", "Name", "A short name for the server")
        self.target_edit = self._edit(
            "toolTargetEdit", "Command or address",
            "The command that starts it (npx -y @modelcontextprotocol/server-filesystem ~) "
            "or its streamable HTTP address")
        self.add_button = self._button("Add", "toolAddButton", "Add this server to mcp.json",
                                       self._add)
        for edit in (self.name_edit, self.target_edit):
            edit.returnPressed.connect(self._add)  # Enter in either box adds it
        self._build()
        self.servers.currentRowChanged.connect(self._show_tools)
        self.servers.itemChanged.connect(self._use_in_chat)
        tools.servers_changed.connect(self._fill)
        self._fill()

    def _button(self, text: str, name: str, tip: str, slot: object) -> QPushButton:
        button = QPushButton(text, self)
        button.setObjectName(name)
        button.setToolTip(tip)
        button.setAccessibleName(text)
        # Not the dialog's default: Enter in the boxes adds a server, it never turned the
        # selected one off (QDialog presses its first auto-default button on Enter).
        button.setAutoDefault(False)
        button.clicked.connect(slot)
        return button

    def _edit(self, name: str, label: str, tip: str) -> QLineEdit:
        edit = QLineEdit(self)
        edit.setObjectName(name)
        edit.setPlaceholderText(label)
        edit.setAccessibleName(label)
        edit.setToolTip(tip)
        return edit

    def _build(self) -> None:
        grid = QGridLayout()
        grid.addWidget(QLabel("Servers (ticked: used in this chat)", self), 0, 0)
        grid.addWidget(QLabel("Tools", self), 0, 1)
        grid.addWidget(self.servers, 1, 0)
        grid.addWidget(self.tool_list, 1, 1)
        row = QHBoxLayout()
        row.addWidget(self.power_button)
        row.addWidget(self.remove_button)
        row.addStretch(1)
        grid.addLayout(row, 2, 0)
        grid.addWidget(self.state, 2, 1)
        add = QHBoxLayout()
        add.addWidget(self.name_edit, 1)
        add.addWidget(self.target_edit, 3)
        add.addWidget(self.add_button)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        close.button(QDialogButtonBox.StandardButton.Close).setToolTip("Close this window")
        close.button(QDialogButtonBox.StandardButton.Close).setAutoDefault(False)
        close.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.notice)
        layout.addLayout(grid, 1)
        layout.addWidget(QLabel("Add a server", self))
        layout.addLayout(add)
        layout.addWidget(close)

    # ---- the list -----------------------------------------------------------------------
    def _fill(self) -> None:
        current = self._selected()
        self.servers.blockSignals(True)
        self.servers.clear()
        policy = self.session.settings.tools
        for server in self.tools.servers():
            item = QListWidgetItem(server.name + ("" if server.enabled else "  (off)"))
            item.setData(NAME, server.name)
            item.setToolTip(plain_tip(server.describe()))
            flags = item.flags() | Qt.ItemFlag.ItemIsUserCheckable
            if not (self.supported and server.enabled):
                flags &= ~Qt.ItemFlag.ItemIsEnabled
            item.setFlags(flags)
            used = policy.uses(server.name) and server.enabled
            item.setCheckState(Qt.CheckState.Checked if used else Qt.CheckState.Unchecked)
            self.servers.addItem(item)
        self.servers.blockSignals(False)
        notes = [] if self.supported else [NO_TOOL_SUPPORT]
        notes += self.tools.config.problems
        if not self.tools.servers():
            notes.append("No tool servers yet: add one below (it is saved in mcp.json, the "
                         "format Claude Desktop, Cursor and LM Studio use).")
        self.notice.setText("\n".join(notes))
        self.notice.setVisible(bool(notes))
        names = [s.name for s in self.tools.servers()]
        self.servers.setCurrentRow(names.index(current) if current in names else -1)
        if current not in names:  # removed: its tools go with it (no row change says so)
            self._show_tools()
        self._update_buttons()

    def _selected(self) -> str:
        item = self.servers.currentItem()
        return str(item.data(NAME)) if item is not None else ""

    def _server(self) -> ServerConfig | None:
        return self.tools.config.get(self._selected())

    def _update_buttons(self) -> None:
        server = self._server()
        self.power_button.setEnabled(server is not None)
        self.remove_button.setEnabled(server is not None)
        self.power_button.setText("Turn on" if server is not None and not server.enabled
                                  else "Turn off")

    def _use_in_chat(self, item: QListWidgetItem) -> None:
        name, on = str(item.data(NAME)), item.checkState() == Qt.CheckState.Checked
        settings = self.session.settings
        self.session.set_settings(settings.replace(tools=settings.tools.with_server(name, on)))
        try:
            self.session.save_settings()
        except StoreError as exc:
            self.state.setText(f"Could not save this chat's tools: {exc}")
        self.chat_tools_changed.emit()

    def _show_tools(self) -> None:
        self._update_buttons()
        self.tool_list.clear()
        server = self._server()
        if server is None:
            self.state.setText("Select a server to see its tools.")
            return
        if not server.enabled:
            self.state.setText(f"{server.name} is turned off.")
            return
        self.state.setText(f"Starting {server.name}…")
        name = server.name
        self.tools.list_tools(name, lambda found: self._listed(name, found))

    def _listed(self, name: str, found: object) -> None:
        if name != self._selected():
            return  # another server was chosen meanwhile
        if isinstance(found, BaseException):
            self.state.setText(f"{name} could not be started: {found}")
            return
        tools = found if isinstance(found, tuple) else ()
        for tool in tools:
            item = QListWidgetItem(tool.label)
            item.setToolTip(plain_tip(tool.description or tool.name))  # the server's words
            self.tool_list.addItem(item)
        self.state.setText(f"{len(tools)} tool{'' if len(tools) == 1 else 's'}.")

    # ---- editing mcp.json ---------------------------------------------------------------
    def _save(self, servers: list[ServerConfig]) -> bool:
        try:
            self.tools.save(servers)
        except (ConfigError, OSError) as exc:
            self.state.setText(f"Could not save mcp.json: {exc}")
            return False
        return True

    def _add(self) -> None:
        try:
            server = server_from_line(self.name_edit.text(), self.target_edit.text())
        except ConfigError as exc:
            self.state.setText(f"Could not add it: {exc}")
            return
        if self._save([*self.tools.servers(), server]):
            self.name_edit.clear()
            self.target_edit.clear()
            names = [s.name for s in self.tools.servers()]
            self.servers.setCurrentRow(names.index(server.name))

    def _remove(self) -> None:
        name = self._selected()
        self._save([s for s in self.tools.servers() if s.name != name])

    def _toggle_power(self) -> None:
        server = self._server()
        if server is None:
            return
        try:
            self.tools.set_enabled(server.name, not server.enabled)
        except (ConfigError, OSError) as exc:
            self.state.setText(f"Could not save mcp.json: {exc}")
