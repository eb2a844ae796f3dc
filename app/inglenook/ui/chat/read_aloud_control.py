"""Read aloud in the window: binds the bubbles' Read aloud buttons to speech/read_aloud.py,
whose thread loads the voice and plays; the GUI thread only starts and stops it. Stop is a
direct call (Esc reaches it through ChatController.escape before stopping a reply).

Signals:
    changed(object): the message id now being read, or None (queued from the reading thread).
    failed(str): reading could not go on (no voice, no sound device): one sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from PySide6.QtCore import QObject, Signal

from inglenook.speech import player as players
from inglenook.speech.player import Player
from inglenook.speech.read_aloud import ReadAloud
from inglenook.speech.tts import Voice
from inglenook.ui.chat.bubble import MessageBubble
from inglenook.ui.chat.mic_button import unless_gone


def default_voice() -> Voice:
    from inglenook.speech import catalog

    return catalog.loaded.voice(None)


class ReadAloudControl(QObject):
    changed = Signal(object)
    failed = Signal(str)

    def __init__(self, bubble_of: Callable[[int], MessageBubble | None],
                 parent: QObject | None = None,
                 load_voice: Callable[[], Voice] = default_voice,
                 player: Callable[[int], Player] | None = None) -> None:
        super().__init__(parent)
        self._bubble_of = bubble_of
        self._shown: Hashable | None = None
        self.reader = ReadAloud(load_voice, player or (lambda rate: players.open_player(rate)),
                                unless_gone(self.changed.emit), unless_gone(self.failed.emit))
        self.destroyed.connect(self.reader.stop)
        self.changed.connect(self._show)

    def toggle(self, bubble: MessageBubble) -> None:
        """Read this reply aloud, or stop when it is the one being read."""
        if bubble.message_id is None:
            return
        if self.reader.reading == bubble.message_id:
            self.stop()
            return
        self.reader.read(bubble.message_id, bubble.text)

    # A reply read as it is written (when `follow_replies`): its request id while it streams.
    follow_replies = False
    _live: int | None = None

    def reply_started(self, request_id: int, message_id: int) -> None:
        if self.follow_replies:
            self._live = request_id
            self.reader.begin(message_id)

    def reply_delta(self, request_id: int, text: str) -> None:
        if request_id == self._live:
            self.reader.feed(text)

    def reply_ended(self, request_id: int, complete: bool) -> None:
        """The reply ended: what is left of it is read, unless it was stopped or failed."""
        if request_id == self._live:
            self._live = None
            if complete:
                self.reader.end()
            else:
                self.reader.stop()

    def stop(self) -> bool:
        """Silence at once; True when something was being read (Esc is then spent)."""
        self._live = None
        return self.reader.stop()

    def _show(self, key: Hashable | None) -> None:
        for old in (self._shown, key):
            bubble = self._bubble_of(old) if isinstance(old, int) else None
            if bubble is not None:
                bubble.set_speaking(old == key and key is not None)
        self._shown = key
