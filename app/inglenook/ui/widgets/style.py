"""Restyling a widget whose style-sheet properties changed."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget


def restyle(widget: QWidget, **properties: object) -> None:
    """Set the dynamic properties the style sheet selects on (`kind`, `state`, …) and polish
    the widget again: Qt matches property selectors only when a widget is polished, so without
    this a changed property shows the old colours."""
    for name, value in properties.items():
        widget.setProperty(name, value)
    style = widget.style()
    style.unpolish(widget)
    style.polish(widget)
