"""Above the composer while this chat's reply waits for another chat's: who, and Stop."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QToolButton, QWidget

from inglenook.ui.plain import plain_tip
from inglenook.ui.widgets.elided_label import ElidedLabel


class QueueNotice(QWidget):
    """Signals:
    stop_other(): stop the reply this chat is waiting for.
    stop_own(): stop waiting (cancel this chat's reply).
    """

    stop_other = Signal()
    stop_own = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("queueNotice")
        # One line that ends in "…" when narrow: a long title must not widen the chat column
        # (it would squeeze the side panel). Plain text: it quotes a chat's title.
        self.label = ElidedLabel(self)
        self.label.setObjectName("queueLabel")
        self.stop_other_button = QToolButton(self)
        self.stop_other_button.setObjectName("queueStopOtherButton")
        self.stop_other_button.setText("Stop that reply")
        self.stop_other_button.clicked.connect(self.stop_other)
        self.stop_own_button = QToolButton(self)
        self.stop_own_button.setObjectName("queueStopOwnButton")
        self.stop_own_button.setText("Cancel mine")
        self.stop_own_button.setToolTip("Do not write this reply")
        self.stop_own_button.clicked.connect(self.stop_own)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(18, 6, 18, 0)
        layout.setSpacing(8)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.stop_other_button)
        layout.addWidget(self.stop_own_button)
        self.hide()

    def show_waiting(self, title: str, ahead: int) -> None:
        more = f" and {ahead - 1} more" if ahead > 1 else ""
        what = title if title.startswith("an API request") else f"the reply in «{title}»"
        full = f"Waiting for {what}{more} to finish…"
        self.label.set_forms(full, f"Waiting for «{title}»{more}…" if what != title else full,
                             "Waiting for another reply…")
        self.label.setToolTip(plain_tip(f"{full}\nThe model writes one reply at a time; this "
                                        "one is next in line."))
        self.show()
