"""The status bar: the model, what is happening, replies at once, the API server, progress,
the context meter."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QProgressBar, QStatusBar

from inglenook.ui.plain import plain_label


def fill_status_bar(bar: QStatusBar
                    ) -> tuple[QLabel, QLabel, QLabel, QProgressBar, QLabel, QLabel]:
    """(model, status text, server, progress, context meter, lanes), added to `bar`."""
    # Plain text: they quote model names, file names and server addresses.
    model = plain_label("No model", bar, name="statusModel")
    text = plain_label("", bar, name="statusText")
    server = plain_label("", bar, name="statusServer")
    progress = QProgressBar(bar)
    progress.setObjectName("statusProgress")
    progress.setMaximumWidth(180)
    progress.setTextVisible(False)
    progress.hide()
    context = plain_label("", bar, name="statusContext")
    lanes = plain_label("", bar, name="statusLanes")
    bar.addWidget(model)
    bar.addWidget(text, 1)
    for widget in (lanes, server, progress, context):
        bar.addPermanentWidget(widget)
    return model, text, server, progress, context, lanes
