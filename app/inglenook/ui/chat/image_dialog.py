"""A sent image, larger (a click on its thumbnail): made off the GUI thread at most VIEW_SIDE a
side, with Copy (the picture and its file's bytes on the clipboard) and Save… (its file, as the
message keeps it)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QMimeData, Qt, Signal
from PySide6.QtGui import QGuiApplication, QImage, QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.attachments import Attachment
from inglenook.core.files import write_atomic
from inglenook.core.images import ImageRefused, decode_image
from inglenook.ui import tasks
from inglenook.ui.chat.image_parts import VIEW_SIDE, thumbnail_of
from inglenook.ui.plain import plain_label


def image_of(data: bytes) -> QImage:
    """Off the GUI thread (a QImage, unlike a pixmap, may be made on any): a stored image,
    checked with core/images' bounds first, as Qt decodes it for the clipboard."""
    decode_image(data)  # ImageRefused: one that no longer decodes is not handed to Qt
    image = QImage.fromData(data)
    if image.isNull():
        raise ImageRefused("Qt cannot read this image.")
    return image


SAVE_FILTERS = {"image/png": "PNG image (*.png)", "image/jpeg": "JPEG image (*.jpg *.jpeg)",
                "image/gif": "GIF image (*.gif)", "image/webp": "WebP image (*.webp)",
                "image/bmp": "BMP image (*.bmp)"}


class ImageDialog(QDialog):
    """A sent image, larger: at most VIEW_SIDE a side, made off the GUI thread. Copy puts the
    image on the clipboard (its file's bytes and the picture); Save… writes its file as the
    message keeps it.

    Signals:
        finished_action(str): a copy or a save ended; what happened, for the user (also shown
            here).
    """

    finished_action = Signal(str)

    def __init__(self, attachment: Attachment, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.attachment = attachment
        self.setObjectName("imageDialog")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.setWindowTitle(attachment.name)
        column = QVBoxLayout(self)
        self.info = plain_label(attachment.describe(), self, name="imageInfo")
        column.addWidget(self.info)
        self.picture = QLabel("Reading the image…", self)
        self.picture.setObjectName("imageView")
        self.picture.setTextFormat(Qt.TextFormat.PlainText)
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.picture.setMinimumSize(240, 160)
        column.addWidget(self.picture, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        self.copy_button = buttons.addButton("Copy", QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.setObjectName("copyImageButton")
        self.copy_button.setToolTip("Copy the image to the clipboard")
        self.copy_button.clicked.connect(self.copy)
        self.save_button = buttons.addButton("Save…", QDialogButtonBox.ButtonRole.ActionRole)
        self.save_button.setObjectName("saveImageButton")
        self.save_button.setToolTip("Save the image as a file")
        self.save_button.clicked.connect(self.save)
        buttons.rejected.connect(self.reject)
        self.status = plain_label("", self, name="imageStatus")
        self.status.hide()
        column.addWidget(self.status)
        column.addWidget(buttons)
        self.task = tasks.run(thumbnail_of, attachment.data, VIEW_SIDE, owner=self,
                              on_done=self._made, name="image view")

    def copy(self) -> None:
        """The picture decoded off the GUI thread, then on the clipboard with its file's bytes
        (an app that takes PNG gets the very file)."""
        self.copy_button.setEnabled(False)
        tasks.run(image_of, self.attachment.data, owner=self, name="copy image",
                  on_done=self._copy_ready,
                  on_failed=lambda exc: self._say(f"The image was not copied: {exc}"))

    def _copy_ready(self, image: object) -> None:
        assert isinstance(image, QImage)
        mime = QMimeData()
        mime.setImageData(image)
        if self.attachment.mime:
            mime.setData(self.attachment.mime, QByteArray(self.attachment.data))
        QGuiApplication.clipboard().setMimeData(mime)
        self._say("Copied the image.")

    def save(self) -> None:
        """Its file as the message keeps it, where the user says."""
        a = self.attachment
        suggested = str(Path.home() / Path(a.name).name)
        path, _ = QFileDialog.getSaveFileName(
            self, "Save the image", suggested,
            ";;".join(f for f in (SAVE_FILTERS.get(a.mime), "All files (*)") if f))
        if not path:
            return
        self.save_button.setEnabled(False)
        tasks.run(write_atomic, Path(path), a.data, owner=self, name="save image", writer=True,
                  on_done=lambda _: self._say(f"Saved {Path(path).name}."),
                  on_failed=lambda exc: self._say(f"The image was not saved: {exc}"))

    def _say(self, text: str) -> None:
        self.copy_button.setEnabled(True)
        self.save_button.setEnabled(True)
        self.status.setText(text)
        self.status.show()
        self.finished_action.emit(text)

    def _made(self, png: object) -> None:
        if not isinstance(png, bytes) or not png:
            self.picture.setText("This image can no longer be read.")
            return
        pixmap = QPixmap()
        pixmap.loadFromData(png, "PNG")
        screen = self.screen().availableGeometry()
        # Room for the dialog's title bar, its line of text and its button.
        width, height = min(VIEW_SIDE, screen.width() - 120), min(VIEW_SIDE,
                                                                  screen.height() - 220)
        if pixmap.width() > width or pixmap.height() > height:
            pixmap = pixmap.scaled(width, height, Qt.AspectRatioMode.KeepAspectRatio,
                                   Qt.TransformationMode.SmoothTransformation)
        self.picture.setPixmap(pixmap)
        self.resize(self.sizeHint())  # not adjustSize: it caps a window at 2/3 of the screen
        frame = self.frameGeometry()  # grown: centred on the window, kept on the screen
        parent = self.parentWidget()
        frame.moveCenter(parent.frameGeometry().center() if parent else screen.center())
        frame.moveLeft(max(screen.left(), min(frame.left(), screen.right() - frame.width())))
        frame.moveTop(max(screen.top(), min(frame.top(), screen.bottom() - frame.height())))
        self.move(frame.topLeft())
