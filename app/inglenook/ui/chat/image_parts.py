"""Images of a message in the window: read, checked and made small off the GUI thread, shown as
thumbnails (the composer's chips, a sent message's strip) and, on a click, larger
(image_dialog.py).

Every image is decoded with core/images.py's bounds in a worker thread (tasks.run): a hostile
file (a bomb, 30,000 × 30,000 pixels, truncated, a FIFO named .png) is refused there with its
reason and nothing is kept. The GUI thread only turns a small PNG (THUMB_SIDE, VIEW_SIDE) into
a pixmap. Thumbnails are cached by the image bytes' hash (the same image in ten messages is made
once), at most CACHE_SIZE of them: a long chat costs what its visible images cost.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QBuffer, QIODevice, Qt
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QLabel, QWidget

from inglenook.chat.images import image_ref
from inglenook.core.attachments import MAX_IMAGE_BYTES, Attachment, AttachmentError, read_attachment
from inglenook.core.images import (
    MAX_PIXELS,
    ImageRefused,
    as_read,
    decode_image,
    thumbnail_png,
)
from inglenook.core.units import describe_size
from inglenook.ui import tasks

THUMB_SIDE = 64  # a chip's and a bubble's thumbnail, in pixels (device-independent)
VIEW_SIDE = 1024  # the larger view: bounded, whatever the image's size
CACHE_SIZE = 128
CANNOT_SEE = "This model cannot see images: load a vision model with its projector."
# A remote model's server said it reads none, or said nothing and the user has not ticked it.
CANNOT_SEE_REMOTE = ("This remote model cannot see images, as far as its server says. If it "
                     "can, tick it in Models → Remote engines… (Models that read images).")


# Positions images of these sizes take with the loaded projector, and its file; None when they
# cannot be counted (no projector, a remote engine, the engine gone). Blocking: any thread but
# the GUI's.
ImageCounter = Callable[[Sequence[tuple[int, int]]], tuple[str, tuple[int, ...]] | None]


@dataclass(frozen=True)
class DraftPart:
    """A file read for the draft; an image with its thumbnail (PNG bytes)."""

    attachment: Attachment
    thumbnail: bytes = b""


def counted(attachments: Sequence[Attachment], count: ImageCounter) -> list[Attachment]:
    """Off the GUI thread: the images whose size is known with their cost at that size, as
    the loaded projector counts it (the engine preprocesses a blank image of each size: a few
    milliseconds each); all as they were when it cannot count them."""
    images = [a for a in attachments if a.kind == "image" and a.pixels != (0, 0)]
    answer = count([a.pixels for a in images]) if images else None
    if answer is None or len(answer[1]) != len(images):
        return list(attachments)
    projector, tokens = answer
    found = {id(a): n for a, n in zip(images, tokens, strict=True)}
    return [dataclasses.replace(a, image_tokens=found[id(a)], counted_by=projector)
            if id(a) in found else a for a in attachments]


def read_counted(read: Callable[..., DraftPart], count: ImageCounter | None,
                 *args: object) -> DraftPart:
    """Off the GUI thread: `read(*args)`, an image with its cost counted when `count` is
    given (the loaded model sees images)."""
    part = read(*args)
    if count is None or part.attachment.kind != "image":
        return part
    return dataclasses.replace(part, attachment=counted([part.attachment], count)[0])


def read_part(path: str | Path) -> DraftPart:
    """Off the GUI thread: a file to attach; an image is decoded with bounds (AttachmentError
    with the reason when it is refused) and thumbnailed. Images are read whatever the model:
    one that cannot see them is told before sending (CANNOT_SEE), and the draft keeps them."""
    attachment = read_attachment(path, vision=True)
    if attachment.kind != "image":
        return DraftPart(attachment)
    return _drafted(attachment)


def pasted_file(data: bytes, name: str) -> DraftPart:
    """Off the GUI thread: an image's file from the clipboard (its bytes as the clipboard held
    them), decoded with the bounds of an attached file: a bomb or a 30,000 × 30,000 image is
    refused from its header, before a pixel is decoded."""
    if len(data) > MAX_IMAGE_BYTES:
        raise AttachmentError(f"The pasted image was not attached: it is "
                              f"{describe_size(len(data))}, and an image can be at most "
                              f"{describe_size(MAX_IMAGE_BYTES)}.")
    return _drafted(Attachment(name, "image", len(data), data=data))


def pasted_part(image: QImage, name: str) -> DraftPart:
    """Off the GUI thread: an image from the clipboard, as a PNG file named `name`. Its size is
    checked before a byte is encoded; QImage may be read on any thread."""
    pixels = image.width() * image.height()
    if image.isNull() or pixels > MAX_PIXELS:
        raise AttachmentError(f"The pasted image was not attached: it is {image.width():,} × "
                              f"{image.height():,} pixels, and images up to {MAX_PIXELS:,} "
                              "pixels are read." if pixels else
                              "The pasted image was not attached: the clipboard's image is empty.")
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")  # type: ignore[call-overload]  # the stubs want bytes; str works
    data = bytes(buffer.data().data())
    if len(data) > MAX_IMAGE_BYTES:
        raise AttachmentError(f"The pasted image was not attached: as a PNG it is "
                              f"{describe_size(len(data))}, and an image can be at most "
                              f"{describe_size(MAX_IMAGE_BYTES)}.")
    attachment = Attachment(name, "image", len(data), mime="image/png", data=data)
    return _drafted(attachment)


def _drafted(attachment: Attachment) -> DraftPart:
    """The checked image with its thumbnail, and its file in the image cache written now, off
    the GUI thread (sending then only finds it there). An image never sent is pruned later.
    One larger than the model reads is kept at the size it reads (core/images.as_read), so a
    message does not carry (store, reload, export) pixels nobody uses."""
    try:
        image = decode_image(attachment.data, attachment.name)
        thumbnail = thumbnail_png(image, THUMB_SIDE)
        smaller = as_read(image)
    except ImageRefused as exc:
        raise AttachmentError(f"{exc} It was not attached.") from None
    attachment = dataclasses.replace(attachment, pixels=(image.width, image.height),
                                     mime=image.mime or attachment.mime)  # as its bytes say
    if smaller is not None:
        data, mime = smaller
        attachment = dataclasses.replace(attachment, data=data, mime=mime)  # size: the file's
    with contextlib.suppress(OSError):  # a cache that cannot be written is said when sending
        image_ref(attachment)
    return DraftPart(attachment, thumbnail)


def thumbnail_of(data: bytes, side: int = THUMB_SIDE) -> bytes:
    """Off the GUI thread: a stored image's thumbnail (b"" when it no longer decodes)."""
    try:
        return thumbnail_png(decode_image(data), side)
    except ImageRefused:
        return b""


class Thumbnails:
    """Pixmaps of images by their bytes' hash, the most recently used CACHE_SIZE."""

    def __init__(self) -> None:
        self._cache: OrderedDict[int, QPixmap] = OrderedDict()

    def get(self, data: bytes) -> QPixmap | None:
        key = hash(data)  # bytes cache their hash: once per image object
        found = self._cache.get(key)
        if found is not None:
            self._cache.move_to_end(key)
        return found

    def put(self, data: bytes, png: bytes) -> QPixmap:
        pixmap = QPixmap()
        pixmap.loadFromData(png, "PNG")
        self._cache[hash(data)] = pixmap
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return pixmap

    def show_in(self, label: QLabel, data: bytes) -> None:
        """The image's thumbnail on `label`: at once when made already, else when it is."""
        pixmap = self.get(data)
        if pixmap is not None:
            label.setPixmap(pixmap)
            return

        def made(png: object) -> None:
            if isinstance(png, bytes) and png:
                label.setPixmap(self.put(data, png))
            else:  # stored, or imported, bytes that no longer decode: said when sent too
                label.setText("No preview")
                label.setWordWrap(True)

        tasks.run(thumbnail_of, data, owner=label, on_done=made, name="thumbnail")


THUMBNAILS = Thumbnails()


def thumbnail_label(parent: QWidget | None = None) -> QLabel:
    """A fixed-size square that an image's thumbnail is shown in (its height is known before
    the thumbnail is made, so rows keep their height)."""
    label = QLabel(parent)
    label.setObjectName("imageThumbnail")
    label.setFixedSize(THUMB_SIDE, THUMB_SIDE)
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label
