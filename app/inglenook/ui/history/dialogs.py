"""Exporting and importing conversations from the window."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

from inglenook.store import Store


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
    """Import one exported conversation or a whole archive; returns the new ids."""
    path, _ = QFileDialog.getOpenFileName(parent, "Import conversations", str(Path.home()),
                                          "Inglenook JSON (*.json)")
    if not path:
        return []
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, dict) and "conversations" in data:
        return store.import_all(data)
    return [store.import_json(data)]
