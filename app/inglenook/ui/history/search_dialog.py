"""Search across all conversations (Ctrl+K / Ctrl+F): type, see highlighted matches grouped by
chat, open one. At most LIMIT matches are shown; when there are more, the dialog says so rather
than pass the cap off as the count."""

from __future__ import annotations

import html

from PySide6.QtCore import QSize, Qt, Signal
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
from inglenook.ui import tasks, theme
from inglenook.ui.plain import plain_label

DEBOUNCE_MS = 150
LIMIT = 50  # matches shown; one more is asked for, to know whether there are more


def grouped(hits: list[SearchHit]) -> list[list[SearchHit]]:
    """The hits by conversation, in the order each conversation first appears; a title match
    and a message match naming the same message count once."""
    groups: dict[int, list[SearchHit]] = {}
    seen: set[tuple[int, int]] = set()
    for hit in hits:
        key = (hit.conversation_id, hit.message_id)
        if key not in seen:
            seen.add(key)
            groups.setdefault(hit.conversation_id, []).append(hit)
    return list(groups.values())


def summary(groups: list[list[SearchHit]], more: bool) -> str:
    count = sum(len(g) for g in groups)
    chats = f"{len(groups)} chat{'s' if len(groups) != 1 else ''}"
    if more:
        return (f"The first {count} matches, in {chats}; there are more: add a word to narrow "
                "the search.")
    return f"{count} match{'es' if count != 1 else ''} in {chats}"


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
        self.results.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.status = plain_label("", self, name="searchStatus")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 14, 14, 14)
        layout.addWidget(self.query)
        layout.addWidget(self.status)
        layout.addWidget(self.results, 1)
        self._typing = tasks.debounce(DEBOUNCE_MS, self.run_query, self)
        self.query.textChanged.connect(lambda _text: self._typing.call())
        self.query.returnPressed.connect(self._choose_first)
        self.results.itemActivated.connect(self._choose)
        self.results.itemClicked.connect(self._choose)

    def run_query(self) -> None:
        if self._typing.pending:  # run now: the query typed is this one
            self._typing.cancel()
        text = self.query.text().strip()
        self.results.clear()
        if not text:
            self.status.setText("")
            return
        try:
            hits = self._store.search(text, limit=LIMIT + 1)
        except StoreError as exc:
            self.status.setText(f"Search failed: {exc}")
            return
        groups = grouped(hits)
        more = len(hits) > LIMIT  # the store found more than are shown
        shown: list[list[SearchHit]] = []
        room = LIMIT
        for group in groups:  # the first LIMIT matches, still by chat
            if room <= 0:
                break
            shown.append(group[:room])
            room -= len(shown[-1])
        self.status.setText(summary(shown, more))
        for group in shown:
            for n, hit in enumerate(group):
                self._add(hit, first=n == 0)

    def _add(self, hit: SearchHit, first: bool) -> None:
        """A match; the first of its chat under the chat's title, the others indented below."""
        item = QListWidgetItem(self.results)
        item.setData(Qt.ItemDataRole.UserRole, (hit.conversation_id, hit.message_id))
        colors = theme.current().colors
        snippet = hit.snippet.replace("<b>", f"<b style='color:{colors.accent_text}'>")
        if hit.in_title:  # the title itself matched: it is the heading, highlighted
            text = f"<div style='font-weight:600'>{snippet}</div>"
        else:
            title = (f"<div style='font-weight:600'>{html.escape(hit.title)}</div>" if first
                     else "")
            text = f"{title}<div style='color:{colors.text_muted}'>{snippet}</div>"
        label = QLabel(text)
        label.setObjectName("searchHit")
        label.setTextFormat(Qt.TextFormat.RichText)  # the title escaped, the snippet too
        label.setWordWrap(True)
        label.setContentsMargins(8 if first else 24, 6 if first else 0, 8, 6)
        label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        width = self.results.viewport().width() - 4
        item.setSizeHint(QSize(width, label.heightForWidth(width)))
        self.results.setItemWidget(item, label)

    def _choose_first(self) -> None:
        if self._typing.pending:
            self._typing.cancel()
            self.run_query()
        if self.results.count():
            self._choose(self.results.item(0))

    def _choose(self, item: QListWidgetItem) -> None:
        conv_id, message_id = item.data(Qt.ItemDataRole.UserRole)
        self.hit_chosen.emit(conv_id, message_id)
        self.accept()

