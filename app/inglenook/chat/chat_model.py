"""A model per chat: the model a chat was answered with is kept with it (ChatSettings.model),
and showing the chat again brings that model back. Qt-free: the window asks `to_load` what
to do when a chat comes on screen, and records the model with `answered_with` when one is
ready.

A chat's own model is loaded as the window's model when nothing else needs the one loaded
(one model in memory, and the window's status, Details and context meter are about it). When
other chats are being answered, or the chat's model is already loaded beside the window's
(several models loaded: the Loaded models view, the API), the chat is answered by that model
where it is (`Switch.beside`): its replies run on their own engine through the router, beside
the others', and nothing is reloaded. A remote engine's model is only ever the window's.
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
    beside: str = ""  # answer the chat with this file, loaded beside the window's model


def to_load(chat: ChatSettings, loaded: str, loading: bool, others_replying: bool,
            available: bool, beside: frozenset[str] = frozenset(), local: bool = False) -> Switch:
    """The chat's own model, when another is loaded (or nothing is) and it can be loaded now
    (`available`: its file is there, or it is a remote engine's; `local`: a file; `beside`:
    the files loaded beside the window's model)."""
    wanted = chat.model
    if not wanted or wanted == loaded or loading:
        return Switch()
    name = Path(wanted).name or wanted
    if not available:
        return Switch(notice=f"This chat was answered by {name}, which is no longer on this "
                             "computer: it goes on with the model loaded.")
    switch = chosen(wanted, loaded, others_replying, beside, local)
    if switch.load and others_replying:  # a remote engine's: only ever the window's model
        return Switch(notice=f"This chat was answered by {name}. Loading it now would stop "
                             "the replies being written in other chats: choose it above when "
                             "they are done.")
    return switch


def chosen(path: str, loaded: str, others_replying: bool,
           beside: frozenset[str] = frozenset(), local: bool = False) -> Switch:
    """What choosing `path` (`local`: a file) for the chat on screen does: nothing to load
    (the window's model); the model loaded beside the window's, when it already is or other
    chats are being answered by the window's (reloading would stop them); else a load as the
    window's model."""
    if path == loaded:
        return Switch()
    if local and loaded and (path in beside or others_replying):
        return Switch(beside=path)
    return Switch(load=path)


def engine_group(chat: ChatSettings, loaded: str, local: bool) -> str:
    """The engine a reply in this chat runs on (the router's group): "" the window's model,
    else the chat's own model's file (`local`: it is one), loaded beside it (first loaded
    when it is not)."""
    wanted = chat.model
    if not wanted or wanted == loaded or not loaded or not local:
        return ""
    return wanted


def answered_with(chat: ChatSettings, model_path: str) -> ChatSettings:
    """The chat's settings once `model_path` is the model it is answered with."""
    return chat if chat.model == model_path else chat.replace(model=model_path)
