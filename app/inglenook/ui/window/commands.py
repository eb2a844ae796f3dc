"""Every command of the window in one table: the menu bar, the shortcuts and the Shortcuts
sheet are all built from it, so a key shown is a key that works."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu

Keys = Sequence["QKeySequence.StandardKey | str"]


@dataclass(frozen=True)
class Command:
    name: str  # the action's object name: how tests and the code find it
    text: str
    slot: Callable[[], object]
    keys: Keys = ()
    tip: str = ""
    checkable: bool = False
    role: QAction.MenuRole = QAction.MenuRole.NoRole


@dataclass(frozen=True)
class Menu:
    title: str
    commands: Sequence[Command | None] = field(default_factory=tuple)  # None: a separator


def build(window: QMainWindow, menus: Sequence[Menu]) -> dict[str, QAction]:
    """The menu bar; actions also work while the bar is hidden (they belong to the window)."""
    actions: dict[str, QAction] = {}
    bar = window.menuBar()
    for menu in menus:
        qmenu: QMenu = bar.addMenu(menu.title)
        for command in menu.commands:
            if command is None:
                qmenu.addSeparator()
                continue
            action = QAction(command.text, window)
            action.setObjectName(command.name)
            action.setShortcuts([QKeySequence(k) for k in command.keys])
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            action.setToolTip(command.tip or command.text.rstrip("…"))
            action.setStatusTip(command.tip)
            action.setCheckable(command.checkable)
            action.setMenuRole(command.role)
            if command.checkable:
                action.toggled.connect(lambda _on, slot=command.slot: slot())
            else:
                action.triggered.connect(lambda _checked=False, slot=command.slot: slot())
            qmenu.addAction(action)
            window.addAction(action)  # shortcuts work with the menu bar hidden too
            actions[command.name] = action
    return actions


def shortcut_rows(menus: Sequence[Menu]) -> list[tuple[str, str, str]]:
    """(menu, command, keys as the platform writes them) for the Shortcuts sheet."""
    rows = []
    for menu in menus:
        for command in menu.commands:
            if command is not None and command.keys:
                keys = ", ".join(QKeySequence(k).toString(QKeySequence.SequenceFormat.NativeText)
                                 for k in command.keys)
                rows.append((menu.title.replace("&", ""), command.text.rstrip("…"), keys))
    return rows
