"""Text from outside, shown as text.

A QLabel, a QMessageBox and every tooltip read their text as HTML when it merely looks like HTML
(Qt::mightBeRichText), and rich text loads `<img src=…>` from the local disk on the GUI thread: a
FIFO hangs the window for good, /dev/zero grows it until it aborts, entities (`&#47;`) hide the
slashes. Model headers and file names, Hub answers, conversation titles, attachment names, tool
and server data, and messages that quote any of those are shown through these helpers:

- `plain_label`: a label that is plain text whatever its text looks like (a label made
  elsewhere: `setTextFormat(Qt.TextFormat.PlainText)`);
- `plain_tip`: a tooltip string that shows exactly the given text;
- `plain_box`: a message box whose texts are plain.

A label that builds HTML on purpose escapes every outside value with `html.escape` instead.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import Qt as GuiQt
from PySide6.QtWidgets import QLabel, QMessageBox, QWidget

PLAIN = Qt.TextFormat.PlainText


def plain_label(text: str = "", parent: QWidget | None = None, name: str = "") -> QLabel:
    label = QLabel(parent)
    label.setTextFormat(PLAIN)
    label.setText(text)
    if name:
        label.setObjectName(name)
    return label


def plain_tip(text: str) -> str:
    """A tooltip that shows `text` verbatim. Text Qt would not read as HTML is kept as it is (a
    plain tooltip, unwrapped); other text is escaped into rich text with its line breaks and
    spaces kept."""
    if not GuiQt.mightBeRichText(text):
        return text
    return f"<p style='white-space:pre-wrap'>{html.escape(text, quote=False)}</p>"


def plain_box(box: QMessageBox) -> QMessageBox:
    """A message box whose text (and informative text) quote outside values: plain."""
    box.setTextFormat(PLAIN)
    return box
