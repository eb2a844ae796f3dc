"""Turning a stream of token bytes into text that is safe to show as it arrives.

Tokens are byte pieces: one emoji or CJK character is often split over several tokens, so decoding
each token on its own yields broken characters. And stop strings can span tokens, so text that
might be the start of one has to wait until we know.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence


class Utf8Stream:
    """Decodes UTF-8 incrementally: returns only complete characters, holding back a split one."""

    def __init__(self) -> None:
        # errors="replace": a model can emit invalid byte sequences; show U+FFFD rather than crash.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        return self._decoder.decode(data)

    def flush(self) -> str:
        """At the end of the reply: a character left incomplete becomes U+FFFD."""
        return self._decoder.decode(b"", final=True)


class StopMatcher:
    """Cuts streamed text at the first stop string, never showing any part of the stop string."""

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        # Every proper prefix of every stop: the suffixes worth holding back.
        self._prefixes = {s[:i] for s in self._stops for i in range(1, len(s))}
        self._longest_prefix = max((len(p) for p in self._prefixes), default=0)
        self._held = ""
        self._stopped = False
        self.matched = ""  # the stop string reached (the first in the text)

    def feed(self, text: str) -> tuple[str, bool]:
        """Returns (text safe to show now, whether a stop string was reached)."""
        if not self._stops:
            return text, False
        if self._stopped:
            return "", True
        buffer = self._held + text
        # Only the held suffix and the new text can contain a stop: anything already shown
        # was checked, and any stop starting in it would have been held back.
        found = [(i, s) for s in self._stops if (i := buffer.find(s)) >= 0]
        if found:
            cut, self.matched = min(found, key=lambda f: f[0])
            self._held = ""
            self._stopped = True
            return buffer[:cut], True
        keep = self._held_back(buffer)
        self._held = buffer[len(buffer) - keep:]
        return buffer[:len(buffer) - keep], False

    def flush(self) -> str:
        """At the end of a reply that did not stop: the text held back was not a stop after all."""
        held, self._held = self._held, ""
        return held

    def _held_back(self, buffer: str) -> int:
        """Length of the longest suffix of `buffer` that could still grow into a stop string."""
        for length in range(min(len(buffer), self._longest_prefix), 0, -1):
            if buffer[-length:] in self._prefixes:
                return length
        return 0
