"""A chat's "Reply as JSON" in the real window (fake engine): the schema is checked as typed,
kept with the chat, sent as the reply's format, and the reply shown pretty-printed and checked
against it."""

from __future__ import annotations

import json

from pytestqt.qtbot import QtBot

from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import Script, chat

SCHEMA = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}


def test_reply_as_json_with_a_schema_is_sent_shown_and_checked(
        qtbot: QtBot, window: MainWindow, script: Script) -> None:
    window.panel_button.setChecked(True)
    section = window.panel.reply_format_section
    assert not section.schema_edit.isVisibleTo(window.panel)
    section.json_check.setChecked(True)
    section.schema_edit.setPlainText('{"type": "integr"}')
    assert section.note.property("kind") == "error" and "not a valid" in section.note.text()
    section.schema_edit.setPlainText(json.dumps(SCHEMA))
    assert section.note.property("kind") == "" and section.note.text().startswith("Replies")
    script.write(replies=[{"match": "Who", "text": '{"name": "Ada", "age": 36}'},
                         {"match": "And", "text": '{"age": 3}'}])
    chat(qtbot, window, "Who?")
    assert window.chats.last_request.reply_format == json.dumps(SCHEMA)
    bubble = window.chat.bubbles[-1]
    assert bubble.text == '{\n  "name": "Ada",\n  "age": 36\n}'  # what Copy copies
    assert not bubble.notice.isVisibleTo(bubble)
    chat(qtbot, window, "And?")
    bubble = window.chat.bubbles[-1]
    assert "'name' is a required property" in bubble.notice.text()
    settings = window.chats.session.settings
    assert settings.reply_json and json.loads(settings.reply_schema) == SCHEMA
    conv = window.chats.conv_id
    window.chats.new_chat()
    assert not section.json_check.isChecked()  # a new chat answers in text
    window.chats.open(conv)
    assert section.json_check.isChecked() and json.loads(section.schema_edit.toPlainText())
    assert "'name' is a required property" in window.chat.bubbles[-1].notice.text()
