"""A window that stays usable when narrow: the side panel and then the sidebar fold away by
themselves when the chat column would get too narrow, and come back (if the user had them
open) when there is room again. The user's own choice (View menu, Settings button) is what is
saved; folding for room is not.

Each column gets at least what its content needs (its minimum size hint, never less than the
floors below): a panel squeezed narrower than its content cuts its number boxes off, and a chat
column squeezed under the side panel cuts its bubbles."""

from __future__ import annotations

from PySide6.QtWidgets import QAbstractButton, QWidget

MIN_WIDTH = 640  # the narrowest window: the chat column alone, with the top bar
CHAT_MIN = 360  # narrower than this, a chat column wraps every line
SIDEBAR_MIN = 180
SIDE_PANEL_MIN = 280


class PanelFolder:
    """Decides which of the two panels fit next to the chat at a given window width."""

    def __init__(self, sidebar: QWidget, side_panel: QWidget, panel_button: QAbstractButton,
                 chat: QWidget | None = None) -> None:
        self.sidebar, self.side_panel, self.panel_button = sidebar, side_panel, panel_button
        self.chat = chat
        sidebar.setMinimumWidth(SIDEBAR_MIN)
        side_panel.setMinimumWidth(SIDE_PANEL_MIN)
        self.wanted = {"sidebar": True, "side_panel": True}  # what the user asked for
        self.folded: set[str] = set()
        self.first = "sidebar"  # which panel keeps its place when only one fits

    def want(self, name: str, visible: bool, width: int) -> None:
        """The user showed or hid a panel; one just asked for wins the room."""
        self.wanted[name] = visible
        if visible:
            self.first = name
        self.fit(width)

    @staticmethod
    def needs(widget: QWidget, floor: int) -> int:
        """The width `widget`'s content needs (within its maximum), at least `floor`."""
        layout = widget.layout()
        content = layout.totalMinimumSize().width() if layout is not None else 0
        wanted = max(floor, widget.minimumSizeHint().width(), content)
        return min(wanted, widget.maximumWidth())

    def fit(self, width: int) -> None:
        chat = self.needs(self.chat, CHAT_MIN) if self.chat is not None else CHAT_MIN
        if self.chat is not None and self.chat.minimumWidth() != chat:
            self.chat.setMinimumWidth(chat)  # the splitter takes room from the panels first
        room = width - chat
        sidebar = max(self.sidebar.width(), SIDEBAR_MIN) if self.sidebar.isVisible() \
            else SIDEBAR_MIN
        panel = self.needs(self.side_panel, SIDE_PANEL_MIN)
        if self.side_panel.minimumWidth() != panel:
            self.side_panel.setMinimumWidth(panel)  # the splitter never squeezes it below
        need = {"sidebar": sidebar, "side_panel": panel}
        show = {"sidebar": False, "side_panel": False}
        second = "side_panel" if self.first == "sidebar" else "sidebar"
        for name in (self.first, second):
            if self.wanted[name] and room >= need[name]:
                show[name] = True
                room -= need[name]
        show_sidebar, show_panel = show["sidebar"], show["side_panel"]
        side_panel = self.side_panel
        for name, widget, visible in (("sidebar", self.sidebar, show_sidebar),
                                      ("side_panel", side_panel, show_panel)):
            if widget.isHidden() == visible:
                widget.setVisible(visible)
                if widget is side_panel:  # the Settings button says what is on screen
                    self.panel_button.blockSignals(True)
                    self.panel_button.setChecked(visible)
                    self.panel_button.blockSignals(False)
            if self.wanted[name] and not visible:
                self.folded.add(name)
            else:
                self.folded.discard(name)
