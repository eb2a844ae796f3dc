"""The bar along the top: the app's name, the model picker, Models, ⋯ and Settings."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QMenu, QPushButton, QToolButton, QWidget

from inglenook.ui.models.picker import ModelPicker


class TopBar(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("topBar")
        bar = QHBoxLayout(self)
        bar.setContentsMargins(16, 10, 16, 10)
        bar.setSpacing(10)
        title = QLabel("Inglenook", self)
        title.setObjectName("appTitle")
        self.picker = ModelPicker(self)
        self.models_button = QPushButton("Models", self)
        self.models_button.setObjectName("modelsButton")
        self.models_button.setToolTip("Installed models, the Hub, and downloads")
        self.menu_button = QToolButton(self)
        self.menu_button.setObjectName("menuButton")
        self.menu_button.setText("⋯")
        self.menu_button.setToolTip("Search, export and import conversations")
        self.menu_button.setAccessibleName("More: search, export and import")
        self.menu_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.menu_button.setMenu(QMenu(self.menu_button))
        self.panel_button = QToolButton(self)
        self.panel_button.setObjectName("panelButton")
        self.panel_button.setText("Settings")
        self.panel_button.setCheckable(True)
        self.panel_button.setToolTip("Show or hide the sampling and model settings")
        self.panel_button.setAccessibleName("Settings panel")
        bar.addWidget(title)
        bar.addWidget(self.picker, 3)  # as wide as its names, up to its maximum, when there is room
        bar.addStretch(1)
        for widget in (self.models_button, self.menu_button, self.panel_button):
            bar.addWidget(widget)
