"""A model per chat: the model a chat was answered with is kept with it (ChatSettings.model),
and showing the chat again brings that model back. Qt-free: the window asks `to_load` what
to do when a chat comes on screen, and records the model with `answered_with` when one is
ready.

A chat's own model is loaded as the window's model, so replies written in other chats at that
moment would stop: while any is being written the model is not switched, and the chat says
which model it was using (`Switch`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from inglenook.chat.chat_settings import ChatSettings


@dataclass(frozen=True)
class Switch:
    """What showing a chat means for the model: `load` this path ("" nothing), or tell the
    user `notice` (the chat's model cannot come back now)."""

    load: str = ""
    notice: str = ""


def to_load(chat: ChatSettings, loaded: str, loading: bool, others_replying: bool,
            available: bool) -> Switch:
    """The chat's own model, when another is loaded (or nothing is) and it can be loaded now
    (`available`: its file is there, or it is a remote engine's)."""
    wanted = chat.model
    if not wanted or wanted == loaded or loading:
        return Switch()
    name = Path(wanted).name or wanted
    if not available:
        return Switch(notice=f"This chat was answered by {name}, which is no longer on this "
                             "computer: it goes on with the model loaded.")
    if others_replying:
        return Switch(notice=f"This chat was answered by {name}. Loading it now would stop "
                             "the replies being written in other chats: choose it above when "
                             "they are done.")
    return Switch(load=wanted)


def answered_with(chat: ChatSettings, model_path: str) -> ChatSettings:
    """The chat's settings once `model_path` is the model it is answered with."""
    return chat if chat.model == model_path else chat.replace(model=model_path)
