"""Exporting and importing conversations from the window."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from inglenook.store import Store
from inglenook.store.transfer import read_import


def export_conversation(store: Store, conv_id: int, parent: QWidget) -> Path | None:
    """Ask where, then write the conversation as Markdown or Inglenook JSON."""
    title = store.conversation(conv_id).title
    safe = "".join(c if c.isalnum() or c in " -_" else "_" for c in title).strip() or "chat"
    path, chosen = QFileDialog.getSaveFileName(
        parent, "Export conversation", str(Path.home() / f"{safe}.md"),
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


def import_conversations(store: Store, parent: QWidget) -> list[int]:
    """Import an Inglenook export (one conversation or an archive) or ChatGPT's
    conversations.json, all or nothing; returns the new ids. A file that cannot be imported
    raises InvalidImport (a ValueError) with the reason in one line."""
    path, _ = QFileDialog.getOpenFileName(parent, "Import conversations", str(Path.home()),
                                          "JSON (*.json)")
    if not path:
        return []
    batch = read_import(path)
    ids = store.import_batch(batch)
    if batch.notes:  # what was left out or repaired: say so, without blocking the window
        box = QMessageBox(QMessageBox.Icon.Information, "Import conversations",
                          batch.summary(), QMessageBox.StandardButton.Ok, parent)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()
    return ids
