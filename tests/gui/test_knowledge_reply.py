"""A chat that uses a collection, in the real window on the fake engine host: the engine's
request holds the passage (the fake echoes the question it was sent), the reply records its
sources, and an index that cannot be read is said on the banner while the reply goes on."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDoubleSpinBox
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.chat.knowledge_turn import recorded
from inglenook.knowledge.fts import SqliteFtsIndex
from inglenook.knowledge.index import Chunk, Document
from inglenook.ui.chat.attachment_chips import AttachmentChip
from inglenook.ui.chat.passage_dialog import PassageDialog
from inglenook.ui.chat.prompt_dialog import PromptDialog
from inglenook.ui.knowledge.knowledge_dialog import KnowledgeDialog
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import chat
from tests.gui.test_accessibility import unnamed

OWL = "The barn owl nests in the old mill."


def use_notes(window: MainWindow) -> None:
    session = window.chats.session
    session.set_settings(session.settings.replace(knowledge=("Notes",)))


def test_the_engine_is_sent_the_passage_and_the_reply_names_its_source(
        qtbot: QtBot, window: MainWindow) -> None:
    index = SqliteFtsIndex()
    index.create_collection("Notes", ["/n"])
    index.add_document("Notes", Document("/n/owl.md", 1, 1, "a", "markdown"),
                       [Chunk(OWL, 3, 3)])
    index.close()
    use_notes(window)
    chat(qtbot, window, "Where does the barn owl nest?")
    reply = window.chats.session.path[-1]
    assert reply.content.startswith("Echo: Excerpts from the user's documents")
    assert f"[1] /n/owl.md, line 3\n```text\n{OWL}" in reply.content
    given = recorded(reply.provenance)
    assert given is not None and [(s.path, s.location) for s in given.sources] == \
        [("/n/owl.md", "line 3")]
    assert not window.banner.isVisible()
    live = window.chat.bubble_of(reply.id)
    assert live is not None and len(live.findChildren(AttachmentChip, "sourceChip")) == 1
    conv_id = window.chats.conv_id
    assert conv_id is not None
    window.chats.new_chat()
    window.chats.open(conv_id)  # the bubble made again, from the saved reply
    assert window.chats.session.path.outline.attachments[-1] == 1  # its height counts chips
    bubble = window.chat.bubble_of(reply.id)
    assert bubble is not None
    [chip] = bubble.findChildren(AttachmentChip, "sourceChip")
    assert chip.isVisible() and chip.label.text() == "[1] owl.md · line 3"
    qtbot.mouseClick(chip, Qt.MouseButton.LeftButton)
    dialog = window.findChild(PassageDialog)
    assert dialog is not None and dialog.text.toPlainText() == OWL
    assert dialog.path_label.text() == "/n/owl.md" and not dialog.open_button.isEnabled()
    assert "no longer there" in dialog.where.text() and unnamed(dialog) == []
    dialog.close()
    meter = window.context_label  # the passages given leave, the next question's may come
    stats = reply.provenance.stats
    assert stats is not None and given.tokens > 0
    assert stats.context_used > given.tokens
    assert meter.text().startswith("Context ≈") and " + ≤512 passages / 2,048" in meter.text()
    assert int(meter.text().split()[1].strip("≈").replace(",", "")) < stats.context_used
    assert "Up to 512 tokens of passages" in meter.toolTip()
    window.chats.actions.show_prompt(reply.id)  # the inspector: what was sent, passages too
    qtbot.waitUntil(lambda: window.findChild(PromptDialog) is not None, timeout=30_000)
    prompt = window.findChild(PromptDialog)
    assert prompt is not None
    assert f"[1] /n/owl.md, line 3\n```text\n{OWL}\n```\n\nWhere does" in prompt.view.prompt


def test_an_unreadable_index_is_said_and_the_reply_goes_on(
        qtbot: QtBot, window: MainWindow) -> None:
    broken = paths.knowledge_database_file()
    broken.parent.mkdir(parents=True, exist_ok=True)
    broken.write_bytes(b"not a database " * 100)
    use_notes(window)
    chat(qtbot, window, "Where does the barn owl nest?")
    assert window.chats.session.path[-1].content == "Echo: Where does the barn owl nest?"
    assert window.banner.isVisible() and "cannot be opened" in window.banner.text()


def test_editing_the_sampling_keeps_the_chats_collections(
        qtbot: QtBot, window: MainWindow) -> None:
    use_notes(window)
    spin = window.panel.findChild(QDoubleSpinBox, "temperature_spin")
    assert spin is not None
    spin.setValue(1.3)
    qtbot.waitUntil(lambda: window.chats.session.settings.sampling.temperature == 1.3)
    assert window.chats.session.settings.knowledge == ("Notes",)


def test_the_side_panel_picks_the_chats_collections(
        qtbot: QtBot, window: MainWindow) -> None:
    section = window.panel.knowledge_section
    assert section.boxes == [] and "No collections yet" in section.note.text()
    window.command_actions["knowledge"].trigger()
    dialog = window.findChild(KnowledgeDialog)
    assert dialog is not None and dialog.isVisible()
    for name in ("Notes", "Papers"):
        dialog.name_edit.setText(name)
        dialog.create_collection()
    assert [b.text() for b in section.boxes] == ["Notes", "Papers"]
    assert unnamed(window.panel) == []
    assert "passages" not in window.context_label.text()
    section.boxes[1].click()
    assert window.chats.session.settings.knowledge == ("Papers",)
    assert "+ ≤512 passages / 2,048" in window.context_label.text()  # room for them
    chat(qtbot, window, "Hello")  # the chat is saved, with its collections
    conv_id = window.chats.conv_id
    assert conv_id is not None
    dialog.select("Papers")
    qtbot.waitUntil(lambda: dialog.title.text() == "Papers")
    dialog.delete_selected()
    qtbot.waitUntil(lambda: [b.text() for b in section.boxes] == [
        "Notes", "Papers (not found: deleted?)"])
    assert section.boxes[1].isChecked()  # the chat's settings are the user's to change
    window.chats.new_chat()
    assert not any(b.isChecked() for b in section.boxes)
    assert [b.text() for b in section.boxes] == ["Notes"]
    window.chats.open(conv_id)
    assert [b.isChecked() for b in section.boxes] == [False, True]
    section.boxes[1].click()
    assert section.boxes[1].text() == "Papers (not found: deleted?)"
    window.side.flush()
    assert window.store.chat_settings(conv_id)[1].get("knowledge") is None
