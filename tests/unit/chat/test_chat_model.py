"""A model per chat: kept with the chat's settings, brought back when the chat is shown."""

from __future__ import annotations

from inglenook.chat.chat_model import Switch, answered_with, chosen, engine_group, to_load
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


def test_a_chat_is_answered_beside_the_window_model_rather_than_stop_other_replies() -> None:
    chat = ChatSettings(model="/models/a.gguf")
    busy = to_load(chat, "/models/b.gguf", False, True, True, local=True)
    assert busy == Switch(beside="/models/a.gguf")  # the other chats' replies go on
    there = to_load(chat, "/models/b.gguf", False, False, True, frozenset({"/models/a.gguf"}),
                    local=True)
    assert there == Switch(beside="/models/a.gguf")  # loaded beside already: nothing reloads
    assert to_load(chat, "", False, False, True, local=True) == Switch("/models/a.gguf")


def test_choosing_a_model_for_the_chat_on_screen() -> None:
    assert chosen("/a.gguf", "/a.gguf", True) == Switch()  # the window's model
    assert chosen("/a.gguf", "/b.gguf", False, local=True) == Switch(load="/a.gguf")
    assert chosen("/a.gguf", "/b.gguf", True, local=True) == Switch(beside="/a.gguf")
    assert chosen("/a.gguf", "/b.gguf", False, frozenset({"/a.gguf"}), local=True) == \
        Switch(beside="/a.gguf")
    assert chosen("prov::m", "/b.gguf", True) == Switch(load="prov::m")  # a remote engine's
    assert chosen("/a.gguf", "", True, local=True) == Switch(load="/a.gguf")  # nothing loaded


def test_a_reply_runs_on_its_chat_model() -> None:
    chat = ChatSettings(model="/a.gguf")
    assert engine_group(chat, "/b.gguf", True) == "/a.gguf"
    assert engine_group(chat, "/a.gguf", True) == ""  # the window's
    assert engine_group(chat, "/b.gguf", False) == ""  # gone, or a remote engine's
    assert engine_group(ChatSettings(), "/b.gguf", True) == ""
    assert engine_group(chat, "", True) == ""  # nothing loaded: nothing to answer beside
