"""The status bar: the model, what is happening, replies at once, the API server, progress,
the context meter."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QProgressBar, QSizePolicy, QStatusBar

from inglenook.ui.plain import plain_label
from inglenook.ui.widgets.elided_label import ElidedLabel


def fill_status_bar(bar: QStatusBar
                    ) -> tuple[QLabel, QLabel, QLabel, QProgressBar, QLabel, QLabel, QLabel]:
    """(model, status text, server, progress, context meter, lanes, engine memory), added to
    `bar`."""
    # Plain text: they quote model names, file names and server addresses.
    # The model's name gives way (cut with "…") before the context meter in a narrow window.
    model = ElidedLabel(bar)
    model.setObjectName("statusModel")
    model.setText("No model")
    model.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
    text = plain_label("", bar, name="statusText")
    server = plain_label("", bar, name="statusServer")
    progress = QProgressBar(bar)
    progress.setObjectName("statusProgress")
    progress.setMaximumWidth(180)
    progress.setTextVisible(False)
    progress.hide()
    context = plain_label("", bar, name="statusContext")
    lanes = plain_label("", bar, name="statusLanes")
    memory = plain_label("", bar, name="statusMemory")
    memory.hide()
    bar.addWidget(model)
    bar.addWidget(text, 1)
    for widget in (lanes, server, progress, memory, context):
        bar.addPermanentWidget(widget)
    return model, text, server, progress, context, lanes, memory
