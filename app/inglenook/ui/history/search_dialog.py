"""Search across all conversations (Ctrl+K / Ctrl+F): type, see highlighted matches, open one."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inglenook.store import SearchHit, Store, StoreError
from inglenook.ui import theme
from inglenook.ui.plain import plain_label

DEBOUNCE_MS = 150


class SearchDialog(QDialog):
    """Signals:
    hit_chosen(int, int): conversation id and message id of the chosen match.
    """

    hit_chosen = Signal(int, int)

    def __init__(self, store: Store, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("searchDialog")
        self.setWindowTitle("Search conversations")
        self.resize(640, 460)
        self._store = store
        self.query = QLineEdit(self)
        self.query.setObjectName("searchQuery")
        self.query.setPlaceholderText("Search all conversations…")
        self.query.setClearButtonEnabled(True)
        self.results = QListWidget(self)
        self.results.setObjectName("searchResults")
        self.results.setWordWrap(True)
        self.status = plain_label("", self, name="searchStatus")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 14, 14, 14)
        layout.addWidget(self.query)
        layout.addWidget(self.status)
        layout.addWidget(self.results, 1)
        self._timer = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._timer.timeout.connect(self.run_query)
        self.query.textChanged.connect(self._timer.start)
        self.query.returnPressed.connect(self._choose_first)
        self.results.itemActivated.connect(self._choose)
        self.results.itemClicked.connect(self._choose)

    def run_query(self) -> None:
        text = self.query.text().strip()
        self.results.clear()
        if not text:
            self.status.setText("")
            return
        try:
            hits = self._store.search(text)
        except StoreError as exc:
            self.status.setText(f"Search failed: {exc}")
            return
        seen: set[tuple[int, int]] = set()
        unique = []
        for hit in hits:  # a title match and a message match can name the same message
            key = (hit.conversation_id, hit.message_id)
            if key not in seen:
                seen.add(key)
                unique.append(hit)
        self.status.setText(f"{len(unique)} match{'es' if len(unique) != 1 else ''}")
        for hit in unique:
            self._add(hit)

    def _add(self, hit: SearchHit) -> None:
        item = QListWidgetItem(self.results)
        item.setData(Qt.ItemDataRole.UserRole, (hit.conversation_id, hit.message_id))
        colors = theme.current().colors
        snippet = hit.snippet.replace("<b>", f"<b style='color:{colors.accent_text}'>")
        label = QLabel(f"<div style='font-weight:600'>{_escape(hit.title)}</div>"
                       f"<div style='color:{colors.text_muted}'>{snippet}</div>")
        label.setObjectName("searchHit")
        label.setTextFormat(Qt.TextFormat.RichText)
        label.setWordWrap(True)
        label.setContentsMargins(8, 6, 8, 6)
        label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        width = self.results.viewport().width() - 4
        item.setSizeHint(QSize(width, label.heightForWidth(width)))
        self.results.setItemWidget(item, label)

    def _choose_first(self) -> None:
        if self._timer.isActive():
            self._timer.stop()
            self.run_query()
        if self.results.count():
            self._choose(self.results.item(0))

    def _choose(self, item: QListWidgetItem) -> None:
        conv_id, message_id = item.data(Qt.ItemDataRole.UserRole)
        self.hit_chosen.emit(conv_id, message_id)
        self.accept()


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
