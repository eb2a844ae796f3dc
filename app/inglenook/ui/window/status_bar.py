"""The status bar: the model, what is happening, replies at once, the API server, progress,
the context meter."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QProgressBar, QStatusBar


def fill_status_bar(bar: QStatusBar
                    ) -> tuple[QLabel, QLabel, QLabel, QProgressBar, QLabel, QLabel]:
    """(model, status text, server, progress, context meter, lanes), added to `bar`."""
    model = QLabel("No model", bar)
    model.setObjectName("statusModel")
    text = QLabel("", bar)
    server = QLabel("", bar)
    server.setObjectName("statusServer")
    progress = QProgressBar(bar)
    progress.setObjectName("statusProgress")
    progress.setMaximumWidth(180)
    progress.setTextVisible(False)
    progress.hide()
    context = QLabel("", bar)
    context.setObjectName("statusContext")
    lanes = QLabel("", bar)
    bar.addWidget(model)
    bar.addWidget(text, 1)
    for widget in (lanes, server, progress, context):
        bar.addPermanentWidget(widget)
    return model, text, server, progress, context, lanes
