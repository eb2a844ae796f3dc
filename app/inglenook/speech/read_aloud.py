"""Reading replies aloud, Qt-free: a reply whole (Read aloud) or as it streams (sentence by
sentence, starting while the model is still writing), on one background thread, stopped at
once by stop() (Esc). What is read comes from speech/sentences.py: no code, no reasoning.

    reader = ReadAloud(load_voice, open_player, on_change=..., on_error=...)
    reader.read(key, markdown)                     # a finished reply
    reader.begin(key); reader.feed(delta); ...; reader.end()   # a streaming one
    reader.stop()                                  # True when something was being read

`key` names what is being read (a message id) so the window can mark its button; on_change(key
or None) and on_error(message) are called on the reading thread.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Hashable

from inglenook.speech.player import Player, PlayerError
from inglenook.speech.sentences import SentenceStream, lead_in, speakable
from inglenook.speech.tts import Voice, VoiceError

_END = None


class ReadAloud:
    def __init__(self, load_voice: Callable[[], Voice], open_player: Callable[[int], Player],
                 on_change: Callable[[Hashable | None], None] = lambda _key: None,
                 on_error: Callable[[str], None] = lambda _message: None,
                 speed: float = 1.0) -> None:
        self._load_voice, self._open_player = load_voice, open_player
        self._on_change, self._on_error = on_change, on_error
        self.speed = speed
        self._lock = threading.Lock()
        self._job: _Job | None = None
        self._stream: SentenceStream | None = None

    @property
    def reading(self) -> Hashable | None:
        job = self._job
        return job.key if job is not None and not job.done.is_set() else None

    def read(self, key: Hashable, markdown: str) -> None:
        self.begin(key)
        for sentence in speakable(markdown):
            self._put(sentence)
        self._put(_END)
        self._stream = None

    def begin(self, key: Hashable, on_finished: Callable[[], None] | None = None) -> None:
        """Start reading a reply that streams; `on_finished()` once it has all been read
        (not when stopped)."""
        self.stop()
        with self._lock:
            self._job = _Job(key, on_finished)
            self._stream = SentenceStream()
            threading.Thread(target=self._run, args=(self._job,), daemon=True,
                             name="read-aloud").start()

    def feed(self, delta: str) -> None:
        if self._stream is not None:
            for sentence in self._stream.feed(delta):
                self._put(sentence)

    def end(self) -> None:
        if self._stream is not None:
            for sentence in self._stream.finish():
                self._put(sentence)
            self._put(_END)
            self._stream = None

    def _put(self, sentence: str | None) -> None:
        job = self._job
        if job is None:
            return
        if sentence is not None and not job.started:
            job.started = True
            for piece in lead_in(sentence):  # the first sound comes sooner
                job.sentences.put(piece)
            return
        job.sentences.put(sentence)

    def prepare(self) -> None:
        """Load the voice now, on a thread of its own (replies will be read: the first one
        should not wait a second and a half for it). Loaded voices are kept (catalog)."""
        def load() -> None:
            with contextlib.suppress(VoiceError):
                self._load_voice()
        threading.Thread(target=load, daemon=True, name="voice-load").start()

    def stop(self) -> bool:
        """Stop reading now; True when something was being read."""
        with self._lock:
            job, self._job, self._stream = self._job, None, None
        if job is None or job.done.is_set():
            return False
        job.cancel()
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Until the current reading ends (tests); True when it did."""
        job = self._job
        return job is None or job.done.wait(timeout)

    def _run(self, job: _Job) -> None:
        self._on_change(job.key)
        try:
            voice = self._load_voice()
            # The player starts (a process) while the first sentence is being made.
            job.set_player(self._open_player(voice.sample_rate))
            while not job.cancelled:
                sentence = job.sentences.get()
                if sentence is _END or job.cancelled:
                    break
                for pcm in voice.speak([sentence], self.speed):
                    if job.cancelled:
                        break
                    job.write(pcm)
            if not job.cancelled and job.player is not None:
                job.player.close()  # the last sentence is heard to its end
        except (PlayerError, VoiceError) as exc:
            job.failed = True
            if not job.cancelled:
                self._on_error(str(exc))
        finally:
            job.done.set()
            if job.player is not None:
                job.player.stop()
            self._on_change(self.reading)  # None, or the reading that replaced this one
        if not job.cancelled and job.failed is False and job.on_finished is not None:
            job.on_finished()


class _Job:
    def __init__(self, key: Hashable, on_finished: Callable[[], None] | None = None) -> None:
        self.key, self.on_finished = key, on_finished
        self.failed = False
        self.started = False  # its first sentence was queued
        self.sentences: queue.Queue[str | None] = queue.Queue()
        self.done = threading.Event()
        self.cancelled = False
        self.player: Player | None = None
        self._lock = threading.Lock()

    def set_player(self, player: Player) -> None:
        with self._lock:
            self.player = player
            if self.cancelled:
                player.stop()

    def write(self, pcm: bytes) -> None:
        if self.player is not None:
            self.player.write(pcm)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            if self.player is not None:
                self.player.stop()
        self.sentences.put(_END)
