"""A heavy user's history in the window: one conversation of 10,000 messages (paragraphs, lists,
tables, code), imported into the store as `inglenook conversations import` would. Prints one
JSON line. The window runs without a model; chats are opened through the chat controller, as
a click in the sidebar does. CPU times are the window process's own (the machine may be busy).

  long_chat_open_10k_ms              open it: the call, and its end painted (CPU ms)
  long_chat_open_10k_wall_ms         the same, wall clock
  long_chat_rss_before_mb            RSS with a 2-message chat on screen
  long_chat_rss_10k_mb               RSS with the long chat open, its margin of bubbles made
  long_chat_rss_after_leaving_mb     RSS once back on the 2-message chat
  long_chat_scroll_p99_stall_ms      PageUp from the end to the top: the GUI thread's CPU time
  long_chat_scroll_max_stall_ms        in each turn of the event loop (the key, the paint, a
                                     slice of the margin made); *_wall_ms the wall clock
  long_chat_scroll_steps             how many PageUps that took
  long_chat_bubbles_max              most bubbles alive at once on the way up
  long_chat_jump_top_ms / _end_ms    Ctrl+Home, then Ctrl+End (CPU ms, painted)

    .venv/bin/python bench/long_chat.py [--quick] [--messages N]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from chat_view_memory import assistant_reply, paragraph
from window_memory import open_window, rss_mb
from window_memory import settle as shared_settle


def long_conversation(messages: int, title: str, seed: int) -> object:
    from inglenook.store.imports import ImportedConversation, ImportedMessage

    rng = random.Random(seed)
    now = time.time() - messages * 60
    items = tuple(
        ImportedMessage(parent=n - 1 if n else None, role="user" if n % 2 == 0 else "assistant",
                        content=paragraph(rng) if n % 2 == 0 else assistant_reply(rng, n // 2),
                        status="complete", created_at=now + 60 * n, active=True, provenance={})
        for n in range(messages))
    return ImportedConversation(title, False, None, now, now + 60 * messages, None, items)


def fill(messages: int) -> tuple[int, int]:
    """The long chat and a short one; their ids."""
    from inglenook.store import Store
    from inglenook.store.imports import ImportBatch

    with Store() as store:
        long_id, short_id = store.import_batch(ImportBatch("a bench", [
            long_conversation(messages, "A very long chat", 1),  # type: ignore[list-item]
            long_conversation(2, "A short chat", 2)]))  # type: ignore[list-item]
    return long_id, short_id


SETTLE_TURNS = 200  # enough for the view to fill its margin


def settle(app: QApplication, turns: int = SETTLE_TURNS) -> None:
    """Let the view fill its margin and deferred deletes happen, as between two clicks."""
    shared_settle(app, turns)


def timed(app: QApplication, action: Callable[[], None]) -> tuple[float, float]:
    """(CPU ms, wall ms) of `action` and the event loop turn that paints its result."""
    cpu, wall = time.process_time(), time.perf_counter()
    action()
    app.processEvents()
    return (time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000


class Turns:
    """The GUI thread's work per turn of the event loop: its CPU time (what the window costs,
    whatever else the machine runs) and the wall clock."""

    def __init__(self) -> None:
        self.cpu: list[float] = []
        self.wall: list[float] = []

    def turn(self, app: QApplication, action: Callable[[], None] = lambda: None) -> None:
        cpu, wall = time.thread_time(), time.perf_counter()
        action()
        app.processEvents()
        self.cpu.append(time.thread_time() - cpu)
        self.wall.append(time.perf_counter() - wall)


def scroll_to_top(app: QApplication, view: object, limit: int) -> tuple[Turns, int, int]:
    """PageUp until the top, letting the view fill its margin (a slice per turn) between two
    presses, as key repeat does."""
    from inglenook.ui.chat.chat_view import ChatView

    assert isinstance(view, ChatView)
    bar = view.verticalScrollBar()
    turns = Turns()
    steps = most = 0
    while bar.value() > 0 and steps < limit:
        turns.turn(app, lambda: QTest.keyClick(view, Qt.Key.Key_PageUp))
        for _ in range(50):
            if not view._fill_timer.isActive():
                break
            turns.turn(app)
        most = max(most, len(view.bubbles))
        steps += 1
    return turns, steps, most


def p99(values: list[float]) -> float:
    return round(sorted(values)[int(len(values) * 0.99)] * 1000, 1)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="tiny counts (make test)")
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args()
    messages = 200 if args.quick else args.messages
    with tempfile.TemporaryDirectory() as home:
        os.environ["INGLENOOK_HOME"] = home
        long_id, short_id = fill(messages)
        app, window = open_window(short_id, SETTLE_TURNS)
        for _ in range(2):  # warm-up: fonts, style sheet, the store's caches
            window.chats.open(long_id)
            settle(app)
            window.chats.open(short_id)
            settle(app)
        before = rss_mb()
        open_cpu, open_wall = timed(app, lambda: window.chats.open(long_id))
        assert window.chat.row_count == messages, window.chat.row_count
        settle(app)
        open_rss = rss_mb()
        view = window.chat
        turns, steps, most = scroll_to_top(app, view, 100_000)
        view.setFocus()
        end_cpu, _ = timed(app, lambda: QTest.keyClick(view, Qt.Key.Key_End,
                                                       Qt.KeyboardModifier.ControlModifier))
        settle(app, 50)
        top_cpu, _ = timed(app, lambda: QTest.keyClick(view, Qt.Key.Key_Home,
                                                       Qt.KeyboardModifier.ControlModifier))
        settle(app, 50)
        window.chats.open(short_id)
        settle(app)
        with contextlib.suppress(OSError, AttributeError):  # freed memory malloc still holds
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        after = rss_mb()
        window.close()
    print(json.dumps({
        "long_chat_messages": messages,
        "long_chat_open_10k_ms": round(open_cpu, 1),
        "long_chat_open_10k_wall_ms": round(open_wall, 1),
        "long_chat_rss_before_mb": round(before, 1),
        "long_chat_rss_10k_mb": round(open_rss, 1),
        "long_chat_rss_after_leaving_mb": round(after, 1),
        "long_chat_scroll_p99_stall_ms": p99(turns.cpu),
        "long_chat_scroll_max_stall_ms": round(max(turns.cpu) * 1000, 1),
        "long_chat_scroll_p99_stall_wall_ms": p99(turns.wall),
        "long_chat_scroll_max_stall_wall_ms": round(max(turns.wall) * 1000, 1),
        "long_chat_scroll_steps": steps,
        "long_chat_bubbles_max": most,
        "long_chat_jump_end_ms": round(end_cpu, 1),
        "long_chat_jump_top_ms": round(top_cpu, 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
