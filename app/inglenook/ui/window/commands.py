"""Every command of the window in one table: the menu bar, the shortcuts and the Shortcuts
sheet are all built from it, so a key shown is a key that works.

A Menu may hold another Menu (a submenu). Commands that share a `group` are a set of choices,
one of them checked; `checked` says which, and is asked again each time the menu opens, so the
marks follow changes made elsewhere. A command with `checked` and no group is a toggle (a panel
shown or hidden): checked while it is on, its slot flips it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu

Keys = Sequence["QKeySequence.StandardKey | str"]


# Keys that belong to a part of the window rather than to a command (the Shortcuts sheet
# lists them after the menus' keys): (where, what, keys).
KEYS = (
    ("Message box", "Send", "Enter"),
    ("Message box", "New line", "Shift+Enter"),
    ("Message box", "Take back a message waiting for the model, else stop the reply", "Esc"),
    ("Message box", "Scroll the conversation a page (a short message)", "PgUp, PgDown"),
    ("Conversation", "Scroll a page up / down", "PgUp, PgDown"),
    ("Conversation", "Scroll a little", "Up, Down"),
    ("Conversation", "The first message", "Home, Ctrl+Home"),
    ("Conversation", "The latest message", "End, Ctrl+End"),
    ("Conversation", "Select all of a message, copy the selection", "Ctrl+A, Ctrl+C"),
    ("Find bar", "Next (newer) / previous (older) match", "Enter, Shift+Enter"),
    ("Find bar", "Close", "Esc"),
    ("Editing a message", "Send the new version", "Ctrl+Enter"),
    ("Editing a message", "Cancel", "Esc"),
)


@dataclass(frozen=True)
class Command:
    name: str  # the action's object name: how tests and the code find it
    text: str
    slot: Callable[[], object]
    keys: Keys = ()
    tip: str = ""
    checkable: bool = False
    role: QAction.MenuRole = QAction.MenuRole.NoRole
    group: str = ""  # commands of one group are exclusive choices
    checked: Callable[[], bool] | None = None  # whether a choice is the one in force
    # Whether it can act now: asked as its menu opens (greyed out when not). Closed, the menu's
    # actions are all enabled, so their shortcuts always reach the command.
    enabled: Callable[[], bool] | None = None


@dataclass(frozen=True)
class Menu:
    title: str
    commands: Sequence[Command | Menu | None] = field(default_factory=tuple)  # None: separator


def build(window: QMainWindow, menus: Sequence[Menu]) -> dict[str, QAction]:
    """The menu bar; actions also work while the bar is hidden (they belong to the window)."""
    actions: dict[str, QAction] = {}
    bar = window.menuBar()
    for menu in menus:
        _fill(window, bar.addMenu(menu.title), menu, actions)
    return actions


def _fill(window: QMainWindow, qmenu: QMenu, menu: Menu, actions: dict[str, QAction]) -> None:
    groups: dict[str, QActionGroup] = {}
    choices: list[tuple[QAction, Callable[[], bool]]] = []
    conditional: list[tuple[QAction, Callable[[], bool]]] = []
    for command in menu.commands:
        if command is None:
            qmenu.addSeparator()
            continue
        if isinstance(command, Menu):
            _fill(window, qmenu.addMenu(command.title), command, actions)
            continue
        action = QAction(command.text, window)
        action.setObjectName(command.name)
        action.setShortcuts([QKeySequence(k) for k in command.keys])
        action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        action.setToolTip(command.tip or command.text.rstrip("…"))
        action.setStatusTip(command.tip)
        action.setCheckable(command.checkable or bool(command.group)
                            or command.checked is not None)
        action.setMenuRole(command.role)
        if command.group:
            if command.group not in groups:
                groups[command.group] = QActionGroup(qmenu)
            groups[command.group].addAction(action)
        if command.checked is not None:
            action.setChecked(command.checked())
            choices.append((action, command.checked))
        if command.enabled is not None:
            conditional.append((action, command.enabled))
        if command.checkable and not command.group:
            action.toggled.connect(lambda _on, slot=command.slot: slot())
        else:  # a choice acts when picked, not when another choice unchecks it
            action.triggered.connect(lambda _checked=False, slot=command.slot: slot())
        qmenu.addAction(action)
        window.addAction(action)  # shortcuts work with the menu bar hidden too
        actions[command.name] = action
    if choices:
        def mark_choices() -> None:
            for action, is_on in choices:
                action.setChecked(is_on())

        qmenu.aboutToShow.connect(mark_choices)
    if conditional:
        def grey_out() -> None:
            for action, can in conditional:
                action.setEnabled(can())

        def enable_all() -> None:
            for action, _can in conditional:
                action.setEnabled(True)

        qmenu.aboutToShow.connect(grey_out)
        qmenu.aboutToHide.connect(enable_all)


def shortcut_rows(menus: Sequence[Menu]) -> list[tuple[str, str, str]]:
    """(menu, command, keys as the platform writes them) for the Shortcuts sheet."""
    rows = []
    for menu in menus:
        for command in menu.commands:
            if isinstance(command, Menu):
                rows += [(menu.title.replace("&", ""), *row[1:])
                         for row in shortcut_rows([command])]
            elif command is not None and command.keys:
                keys = ", ".join(QKeySequence(k).toString(QKeySequence.SequenceFormat.NativeText)
                                 for k in command.keys)
                rows.append((menu.title.replace("&", ""), command.text.rstrip("…"), keys))
    return rows
