"""A model per chat: kept with the chat's settings, brought back when the chat is shown."""

from __future__ import annotations

from inglenook.chat.chat_model import Switch, answered_with, to_load
from inglenook.chat.chat_settings import ChatSettings


def test_a_chat_keeps_its_model_with_its_settings() -> None:
    chat = answered_with(ChatSettings(), "/models/a.gguf")
    assert chat.model == "/models/a.gguf" and answered_with(chat, "/models/a.gguf") is chat
    again = ChatSettings.stored(None, chat.to_dict(), [], ChatSettings())
    assert again == chat
    assert "model" not in ChatSettings().to_dict()  # files of chats without one are as before
    assert ChatSettings.stored(None, {"model": 7}, [], ChatSettings()).model == ""


def test_showing_a_chat_brings_its_model_back_when_it_can() -> None:
    chat = ChatSettings(model="/models/a.gguf")
    assert to_load(chat, "/models/b.gguf", False, False, True) == Switch("/models/a.gguf")
    assert to_load(chat, "", False, False, True) == Switch("/models/a.gguf")  # none loaded
    assert to_load(chat, "/models/a.gguf", False, False, True) == Switch()  # already
    assert to_load(ChatSettings(), "/models/b.gguf", False, False, True) == Switch()  # new chat
    assert to_load(chat, "/models/b.gguf", True, False, True) == Switch()  # a load under way
    busy = to_load(chat, "/models/b.gguf", False, True, True)
    assert not busy.load and "a.gguf" in busy.notice and "stop" in busy.notice
    gone = to_load(chat, "/models/b.gguf", False, False, False)
    assert not gone.load and "no longer on this computer" in gone.notice
