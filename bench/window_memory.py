"""Memory of the whole window while switching conversations; prints one JSON line.

  window_rss_80_messages_mb            RSS of the window process with an 80-message chat open
  window_rss_growth_200_switches_mb    RSS growth over 200 switches among 20 chats of 80
                                       messages, after one warm-up cycle through all of them
  window_switch_ms                     one switch: the chat opened and painted (GUI thread CPU
                                       time; the bubbles of its margin are made after, in slices)

The window runs without a model (nothing is generated); switching goes through the chat
controller exactly as a click in the sidebar does. Run by bench/run.py; offscreen by default.

    .venv/bin/python bench/window_memory.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil
from PySide6.QtCore import QCoreApplication, QEvent
from PySide6.QtWidgets import QApplication

from chat_view_memory import assistant_reply, paragraph


def fill(chats: int, messages: int) -> list[int]:
    """`chats` conversations of `messages` realistic messages, through the store's own API."""
    from inglenook.store import Store

    rng = random.Random(80)
    ids = []
    with Store() as store:
        for c in range(chats):
            conv = store.create_conversation(f"Chat {c}")
            parent = None
            for m in range(messages):
                text = paragraph(rng) if m % 2 == 0 else assistant_reply(rng, m // 2)
                parent = store.add_message(conv, "user" if m % 2 == 0 else "assistant", text,
                                           parent)
            ids.append(conv)
    return ids


def settle(app: QApplication, turns: int = 3) -> None:
    """Let layouts and deferred deletes happen, as they would between two clicks."""
    for _ in range(turns):
        app.processEvents()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def open_window(first: int, turns: int = 3) -> tuple[QApplication, object]:
    """The real window on INGLENOOK_HOME's store, shown, with conversation `first` open."""
    from inglenook.ui.app import configure, started
    from inglenook.ui.main_window import MainWindow

    app = QApplication(sys.argv[:1])
    configure(app)
    window = MainWindow(autoload=False)
    window.resize(1280, 820)
    window.show()
    started()  # as run_app does once the window is up
    settle(app, turns)
    window.chats.open(first)
    settle(app, turns)
    return app, window


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="tiny counts (make test)")
    args = parser.parse_args()
    chats, messages, switches = (4, 20, 12) if args.quick else (20, 80, 200)
    with tempfile.TemporaryDirectory() as home:
        os.environ["INGLENOOK_HOME"] = home
        ids = fill(chats, messages)
        app, window = open_window(ids[0])
        one_chat = rss_mb()
        for conv in ids:  # warm-up: every chat once (fonts, caches, allocator pools)
            window.chats.open(conv)
            settle(app)
        before = rss_mb()
        spent = 0.0
        for n in range(switches):
            cpu = time.thread_time()  # the click's cost: the chat opened and painted
            window.chats.open(ids[(n + 1) % len(ids)])
            app.processEvents()
            spent += time.thread_time() - cpu
            settle(app)  # the margin is filled in slices after, between events
        after = rss_mb()
        bubbles = len(window.chat.bubbles)
        window.close()
    print(json.dumps({
        "window_rss_80_messages_mb": round(one_chat, 1),
        "window_rss_growth_200_switches_mb": round(after - before, 1),
        "window_switch_ms": round(spent / switches * 1000, 1),
        "window_memory_chats": chats, "window_memory_messages": messages,
        "window_memory_switches": switches, "window_memory_bubbles": bubbles}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
