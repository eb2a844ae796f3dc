"""Conversation store figures (issue 4), printed as one JSON line; run by bench/run.py.

  store_startup_10k_s     MainWindow created and shown over a database of 10,000 conversations
  store_switch_ms         opening another conversation (20 messages) in the window, median
  store_search_ms         a full-text search over ~100,000 messages, median
  store_bytes_per_token   bytes written (write() calls, WAL included) per streamed token
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

CONVERSATIONS = 10_000
MESSAGES_EACH = 10
WORDS = ("river", "mountain", "bread", "clock", "owl", "glass", "map", "bee", "tide", "lantern",
         "violin", "comet", "harbour", "meadow", "copper", "thistle", "engine", "garden")


def fill(path: Path, conversations: int = CONVERSATIONS) -> list[int]:
    from inglenook.store import Store

    store = Store(path)
    ids = []
    conn = store._conn  # bulk load in one transaction; the app never writes like this
    with conn:
        for c in range(conversations):
            cur = conn.execute("INSERT INTO conversations (title, created_at, updated_at) "
                               "VALUES (?, ?, ?)", (f"Chat {c}", c, c))
            conv = cur.lastrowid
            ids.append(conv)
            parent = None
            for m in range(MESSAGES_EACH):
                text = " ".join(WORDS[(c + m + k) % len(WORDS)] for k in range(30))
                cur = conn.execute(
                    "INSERT INTO messages (conversation_id, parent_id, role, content, status, "
                    "created_at, provenance) VALUES (?, ?, ?, ?, 'complete', ?, '{}')",
                    (conv, parent, "user" if m % 2 == 0 else "assistant", text, c))
                parent = cur.lastrowid
    store.close()
    return ids


def written_bytes() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("wchar"))


def main() -> int:
    count = 200 if "--quick" in sys.argv else CONVERSATIONS
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["INGLENOOK_HOME"] = tmp
        from inglenook import paths
        from inglenook.chat.session import ChatSession
        from inglenook.core.replies import Finish
        from inglenook.store import Store

        ids = fill(paths.database_file(), count)
        from PySide6.QtWidgets import QApplication

        from inglenook.ui.app import configure
        from inglenook.ui.main_window import MainWindow

        app = QApplication(sys.argv[:1])
        configure(app)
        started = time.perf_counter()
        window = MainWindow(autoload=False)
        window.show()
        app.processEvents()
        startup = time.perf_counter() - started

        switches = []
        for conv in ids[-40:]:
            t = time.perf_counter()
            window.chats.open(conv)
            app.processEvents()
            switches.append(time.perf_counter() - t)
        window.close()

        store = Store()
        searches = []
        for word in ("thistle", "harbour meadow", "copper eng", "lantern"):
            t = time.perf_counter()
            store.search(word)
            searches.append(time.perf_counter() - t)

        # A 600-token reply arriving at 140 tok/s, saved the way the window saves it.
        clock = [0.0]
        session = ChatSession(store, clock=lambda: clock[0])
        session.add_user("Tell me a long story.")
        session.begin_reply(1)
        before = written_bytes()
        for n in range(600):
            clock[0] += 1 / 140
            session.reply_delta(f" word{n}")
        session.finish_reply(Finish("stop"), None)
        per_token = (written_bytes() - before) / 600
        store.close()
    print(json.dumps({
        "store_conversations": count,
        "store_messages": count * MESSAGES_EACH,
        "store_startup_10k_s": round(startup, 3),
        "store_switch_ms": round(statistics.median(switches) * 1000, 1),
        "store_switch_max_ms": round(max(switches) * 1000, 1),
        "store_search_ms": round(statistics.median(searches) * 1000, 1),
        "store_bytes_per_token": round(per_token, 1),
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
