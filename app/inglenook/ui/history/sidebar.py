"""The list of conversations: pinned first, then newest first, grouped by day."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from PySide6.QtCore import QPoint, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QColor,
    QIcon,
    QKeySequence,
    QPainter,
    QPen,
    QPixmap,
    QShortcut,
)
from PySide6.QtWidgets import (
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.store import ConversationSummary
from inglenook.ui import theme
from inglenook.ui.plain import plain_tip

ID_ROLE = Qt.ItemDataRole.UserRole
ACTIVITY_TIPS = {"generating": "Writing a reply…",
                 "waiting": "Waiting for another chat's reply to finish"}
UNREAD_TIP = "New reply, not seen yet"


def activity_icon(kind: str) -> QIcon:
    """A dot for a chat that is writing a reply, a ring for one whose reply waits its turn, a
    small dot in the link colour for one with a reply not seen yet."""
    size = 12
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    ember = QColor(theme.current().colors.accent)
    if kind == "generating":
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(ember)
        painter.drawEllipse(QRectF(2, 2, size - 4, size - 4))
    elif kind == "unread":
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(theme.current().colors.link))
        painter.drawEllipse(QRectF(3, 3, size - 6, size - 6))
    else:
        painter.setPen(QPen(ember, 1.5))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawEllipse(QRectF(2.5, 2.5, size - 5, size - 5))
    painter.end()
    return QIcon(pixmap)


def day_group(timestamp: float, today: dt.date | None = None) -> str:
    today = today or dt.date.today()
    day = dt.date.fromtimestamp(timestamp)
    age = (today - day).days
    if age <= 0:
        return "Today"
    if age == 1:
        return "Yesterday"
    if age < 7:
        return "Previous 7 days"
    if age < 30:
        return "Previous 30 days"
    return day.strftime("%B %Y")


class ConversationSidebar(QWidget):
    """Signals:
    conversation_selected(int): the user opened a conversation.
    new_requested(): the user asked for a new chat.
    rename_requested(int, str): conversation id and its new title.
    pin_requested(int, bool): conversation id and whether it should be pinned.
    delete_requested(int): conversation id (the window offers undo).
    export_requested(int): conversation id.
    """

    conversation_selected = Signal(int)
    new_requested = Signal()
    rename_requested = Signal(int, str)
    pin_requested = Signal(int, bool)
    delete_requested = Signal(int)
    export_requested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sidebar")
        self.new_button = QPushButton("+  New chat", self)
        self.new_button.setObjectName("sidebarNewButton")
        self.new_button.setToolTip("Start a new conversation (Ctrl+N)")
        self.new_button.clicked.connect(self.new_requested)
        self.list = QListWidget(self)
        self.list.setObjectName("conversationList")
        self.list.setAccessibleName("Conversations")
        self.list.setToolTip("Your conversations: Enter opens one, F2 renames it, right-click "
                             "for more")
        self.list.setUniformItemSizes(False)
        # Long titles are cut with "…" (the full title is the tooltip), never scrolled sideways.
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.itemActivated.connect(self._activated)
        self.list.itemClicked.connect(self._activated)
        self.list.itemChanged.connect(self._edited)
        # Editing starts only from Rename (or F2), never by clicking a title.
        self.list.setEditTriggers(QListWidget.EditTrigger.NoEditTriggers)
        self.list.itemDelegate().closeEditor.connect(
            lambda *_: QTimer.singleShot(0, self._editor_closed))  # after a commit, if any
        rename = QShortcut(QKeySequence("F2"), self.list)
        rename.setContext(Qt.ShortcutContext.WidgetShortcut)
        rename.activated.connect(self.ask_rename)
        self._renaming: int | None = None
        self._pending: tuple[Sequence[ConversationSummary], int | None] | None = None
        self.hint = QLabel("Your conversations appear here.", self)
        self.hint.setObjectName("sidebarHint")
        self.hint.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 12, 10, 10)
        layout.setSpacing(8)
        layout.addWidget(self.new_button)
        layout.addWidget(self.hint)
        layout.addWidget(self.list, 1)
        self._pinned: dict[int, bool] = {}
        self._titles: dict[int, str] = {}
        self._activity: dict[int, str] = {}
        self._unread: frozenset[int] = frozenset()
        self._icons = {kind: activity_icon(kind) for kind in (*ACTIVITY_TIPS, "unread")}
        self.setMinimumWidth(220)
        self.setMaximumWidth(320)

    def set_conversations(self, conversations: Sequence[ConversationSummary],
                          current: int | None) -> None:
        if self._renaming is not None:  # a rebuild would close the editor: after the rename
            self._pending = (conversations, current)
            return
        self._pending = None
        self.list.setUpdatesEnabled(False)
        self.list.clear()
        self._pinned = {c.id: c.pinned for c in conversations}
        self._titles = {c.id: c.title for c in conversations}
        group = None
        today = dt.date.today()
        for conv in conversations:
            heading = "Pinned" if conv.pinned else day_group(conv.updated_at, today)
            if heading != group:
                group = heading
                header = QListWidgetItem(heading)
                header.setFlags(Qt.ItemFlag.NoItemFlags)
                header.setData(Qt.ItemDataRole.AccessibleDescriptionRole, "heading")
                font = header.font()
                font.setBold(True)
                font.setPointSizeF(font.pointSizeF() * 0.85)
                header.setFont(font)
                self.list.addItem(header)
            item = QListWidgetItem(conv.title)  # pinned ones sit under their own heading
            item.setData(ID_ROLE, conv.id)
            item.setToolTip(plain_tip(conv.title))
            self.list.addItem(item)
            self._decorate(item)
            if conv.id == current:
                item.setSelected(True)
                self.list.setCurrentItem(item)
        self.list.setUpdatesEnabled(True)
        self.hint.setVisible(not conversations)

    def set_activity(self, activity: dict[int, str]) -> None:
        """Mark chats whose reply is being written ("generating") or waits ("waiting")."""
        self._activity = dict(activity)
        for row in range(self.list.count()):
            self._decorate(self.list.item(row))

    def set_unread(self, unread: frozenset[int]) -> None:
        """Mark chats with a reply the user has not seen (bold, "New reply")."""
        self._unread = frozenset(unread)
        for row in range(self.list.count()):
            self._decorate(self.list.item(row))

    def is_unread(self, conv_id: int) -> bool:
        return conv_id in self._unread

    def _decorate(self, item: QListWidgetItem) -> None:
        conv_id = item.data(ID_ROLE)
        if conv_id is None:
            return
        kind = self._activity.get(int(conv_id))
        unread = int(conv_id) in self._unread
        title = self._titles.get(int(conv_id), "")
        tip = ACTIVITY_TIPS[kind] if kind else UNREAD_TIP if unread else ""
        self.list.blockSignals(True)  # an icon is not an edit (itemChanged would end a rename)
        item.setIcon(self._icons[kind] if kind else self._icons["unread"] if unread else QIcon())
        font = item.font()
        font.setBold(unread)
        item.setFont(font)
        item.setData(Qt.ItemDataRole.AccessibleDescriptionRole, tip)
        item.setToolTip(plain_tip(f"{title}\n{tip}" if tip else title))
        self.list.blockSignals(False)

    def activity(self, conv_id: int) -> str:
        return self._activity.get(conv_id, "")

    def order(self) -> list[int]:
        """Conversation ids in the order shown (pinned first, then by day)."""
        ids = (self.list.item(row).data(ID_ROLE) for row in range(self.list.count()))
        return [int(i) for i in ids if i is not None]

    def select(self, conv_id: int | None) -> None:
        for row in range(self.list.count()):
            item = self.list.item(row)
            if item.data(ID_ROLE) == conv_id:
                self.list.setCurrentItem(item)
                return
        self.list.clearSelection()

    def _activated(self, item: QListWidgetItem) -> None:
        conv_id = item.data(ID_ROLE)
        if conv_id is not None:
            self.conversation_selected.emit(int(conv_id))

    def _menu(self, point: QPoint) -> None:
        item = self.list.itemAt(point)
        if item is None or item.data(ID_ROLE) is None:
            return
        conv_id = int(item.data(ID_ROLE))
        menu = QMenu(self)
        rename = QAction("Rename", menu)
        rename.triggered.connect(lambda: self.ask_rename(conv_id))
        pinned = self._pinned.get(conv_id, False)
        pin = QAction("Unpin" if pinned else "Pin", menu)
        pin.triggered.connect(lambda: self.pin_requested.emit(conv_id, not pinned))
        export = QAction("Export…", menu)
        export.triggered.connect(lambda: self.export_requested.emit(conv_id))
        delete = QAction("Delete", menu)
        delete.triggered.connect(lambda: self.delete_requested.emit(conv_id))
        for action in (rename, pin, export, delete):
            menu.addAction(action)
        menu.exec(self.list.viewport().mapToGlobal(point))

    def ask_rename(self, conv_id: int | None = None) -> None:
        """Rename in place: the title becomes editable in the list (Enter keeps, Esc undoes).
        Without an id: the conversation selected (F2)."""
        if conv_id is None:
            current = self.list.currentItem()
            conv_id = current.data(ID_ROLE) if current is not None else None
        item = self._item(conv_id) if conv_id is not None else None
        if item is None:
            return
        self.list.blockSignals(True)  # preparing the editor is not an edit
        item.setText(self._titles.get(conv_id, ""))
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
        self.list.blockSignals(False)
        self._renaming = conv_id
        self.list.setCurrentItem(item)
        self.list.editItem(item)

    def _edited(self, item: QListWidgetItem) -> None:
        conv_id = item.data(ID_ROLE)
        if conv_id is None or conv_id != self._renaming:
            return
        title = item.text().strip()
        self._end_rename(item)
        if title and title != self._titles.get(conv_id, ""):
            self.rename_requested.emit(conv_id, title)

    def _editor_closed(self) -> None:
        """Esc: nothing was committed; show the title as it was."""
        item = self._item(self._renaming) if self._renaming is not None else None
        if item is not None:
            self._end_rename(item)

    def _end_rename(self, item: QListWidgetItem) -> None:
        conv_id = int(item.data(ID_ROLE))
        self._renaming = None
        self.list.blockSignals(True)
        item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
        item.setText(self._titles.get(conv_id, ""))
        self.list.blockSignals(False)
        if self._pending is not None:
            QTimer.singleShot(0, self._apply_pending)

    def _apply_pending(self) -> None:
        if self._pending is not None and self._renaming is None:
            self.set_conversations(*self._pending)

    def _item(self, conv_id: int) -> QListWidgetItem | None:
        for row in range(self.list.count()):
            item = self.list.item(row)
            if item.data(ID_ROLE) == conv_id:
                return item
        return None
