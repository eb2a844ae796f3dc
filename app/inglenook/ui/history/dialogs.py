"""Exporting and importing conversations from the window."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from inglenook.store import Store
from inglenook.store.checks import ImportCancelled
from inglenook.store.transfer import read_import
from inglenook.ui.plain import plain_box

# Characters some file system refuses in a name (Windows' set, which covers the others).
_UNSAFE = re.compile(r'[<>:"/\\|?*\x00-\x1f]+')


def file_stem(title: str, longest: int = 80) -> str:
    """A file name (without its extension) from a chat's title: its own words, unsafe
    characters made spaces, cut at a word: "What is 2+2?" gives "What is 2+2", not "…_"."""
    stem = " ".join(_UNSAFE.sub(" ", title).split()).strip(" .-_")
    if len(stem) > longest:
        stem = stem[:longest].rsplit(" ", 1)[0].rstrip(" .-_,;")
    return stem or "Conversation"


def export_conversation(store: Store, conv_id: int, parent: QWidget) -> Path | None:
    """Ask where, then write the conversation as Markdown or Inglenook JSON."""
    title = store.conversation(conv_id).title
    path, chosen = QFileDialog.getSaveFileName(
        parent, "Export conversation", str(Path.home() / f"{file_stem(title)}.md"),
        "Markdown (*.md);;Inglenook JSON (*.json)")
    if not path:
        return None
    target = Path(path)
    if "json" in chosen or target.suffix.lower() == ".json":
        content = json.dumps(store.export_json(conv_id), indent=2, ensure_ascii=False)
    else:
        content = store.export_markdown(conv_id)
    target.write_text(content, encoding="utf-8")
    return target


def export_everything(store: Store, parent: QWidget) -> Path | None:
    path, _ = QFileDialog.getSaveFileName(parent, "Export all conversations",
                                          str(Path.home() / "inglenook-conversations.json"),
                                          "Inglenook JSON (*.json)")
    if not path:
        return None
    target = Path(path)
    target.write_text(json.dumps(store.export_all(), indent=2, ensure_ascii=False),
                      encoding="utf-8")
    return target


def ask_import_file(parent: QWidget) -> str:
    """An Inglenook export or ChatGPT's conversations.json to import ("" when cancelled)."""
    path, _ = QFileDialog.getOpenFileName(parent, "Import conversations", str(Path.home()),
                                          "JSON (*.json)")
    return path


def import_file(path: str, database: Path, cancelled: threading.Event) -> ImportResult:
    """On a worker thread: read and check the file, then write it in one transaction through
    a connection of this thread's own. Nothing is written once `cancelled` is set."""
    batch = read_import(path, cancelled)  # ImportCancelled before its next image once set
    if cancelled.is_set():
        raise ImportCancelled
    with Store(database) as store:
        return ImportResult(store.import_batch(batch), batch.summary() if batch.notes else "")


@dataclass(frozen=True)
class ImportResult:
    ids: list[int]
    summary: str  # what was left out or repaired; "" when everything came in


def show_summary(summary: str, parent: QWidget) -> None:
    """What an import left out or repaired, without blocking the window."""
    box = plain_box(QMessageBox(QMessageBox.Icon.Information, "Import conversations", summary,
                                QMessageBox.StandardButton.Ok, parent))  # it quotes the file
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    box.open()
