"""Memory of the chat view: RSS with an 80-message chat open, and growth while switching chats.

Switching is what the window does: clear() and add the other chat's bubbles, with the event loop
running in between (deferred deletes and layouts happen as they would for a user). 20 chats of
80 realistic messages (paragraphs, lists, a table, a code block); one warm-up cycle through all
of them, then 200 switches; last, one chat of 200 messages. Prints one JSON line. Offscreen
unless QT_QPA_PLATFORM says otherwise.

    .venv/bin/python bench/chat_view_memory.py [--switches N]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import random
import sys
import time
from collections.abc import Callable

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import psutil
from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication

from inglenook.ui.app import configure
from inglenook.ui.chat.chat_view import ChatView

CHATS = 20
MESSAGES = 80
WORDS = ["river", "stone", "lantern", "harbour", "keeper", "storm", "ember", "quiet", "window",
         "letter", "garden", "map", "signal", "thread", "engine", "value", "layout", "memory",
         "widget", "column", "table", "figure", "answer"]


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 18))]
    return " ".join(words).capitalize() + "."


def paragraph(rng: random.Random) -> str:
    return " ".join(sentence(rng) for _ in range(rng.randint(2, 5)))


def assistant_reply(rng: random.Random, n: int) -> str:
    parts = [paragraph(rng)]
    if n % 2 == 0:
        parts.append("\n".join(f"{i}. **{rng.choice(WORDS)}**: {sentence(rng)}"
                               for i in range(1, rng.randint(3, 6))))
    if n % 3 == 0:
        rows = "\n".join(f"| {rng.choice(WORDS)} | {rng.randint(1, 999)} | {sentence(rng)} |"
                         for _ in range(rng.randint(3, 6)))
        parts.append("| Name | Count | Note |\n|------|------:|------|\n" + rows)
    if n % 4 == 1:
        body = "\n".join(f"    total += {rng.choice(WORDS)}[{i}]  # {rng.choice(WORDS)}"
                         for i in range(rng.randint(3, 8)))
        parts.append(f"```python\ndef f(values):\n    total = 0\n{body}\n    return total\n```")
    parts.append(paragraph(rng))
    return "\n\n".join(parts)


def chat(seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [("user", sentence(rng) + " " + sentence(rng)) if i % 2 == 0
            else ("assistant", assistant_reply(rng, i)) for i in range(MESSAGES)]


def rss_mb() -> float:
    return round(psutil.Process().memory_info().rss / 2**20, 1)


class _Spinner:
    """Runs the event loop a little, as the window would between user actions. One loop and
    one timer for the whole run: a new QEventLoop per call leaks a little by itself."""

    def __init__(self) -> None:
        self.loop: QEventLoop | None = None
        self.timer: QTimer | None = None

    def __call__(self, ms: int = 30) -> None:
        if self.loop is None or self.timer is None:
            self.loop, self.timer = QEventLoop(), QTimer()
            self.timer.setSingleShot(True)
            self.timer.timeout.connect(self.loop.quit)
        self.timer.start(ms)
        self.loop.exec()


spin = _Spinner()


def timed(action: Callable[[], None]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--switches", type=int, default=200)
    args = parser.parse_args()
    app = QApplication(sys.argv)
    configure(app)
    chats = [chat(seed) for seed in range(CHATS)]
    view = ChatView()
    view.resize(900, 760)
    view.show()
    spin(100)
    result: dict[str, float | int | str] = {"platform": app.platformName()}
    result["rss_empty_mb"] = rss_mb()

    def open_chat(index: int) -> None:
        view.clear()
        for role, text in chats[index]:
            view.add_bubble(role, text)
        view.scroll_to_bottom()
        spin()

    open_time = timed(lambda: open_chat(0))
    result["open_80_s"] = round(open_time, 3)
    spin(200)
    result["rss_80_messages_mb"] = rss_mb()
    for index in range(1, CHATS):  # warm-up: every chat once
        open_chat(index)
    spin(200)
    gc.collect()
    warm = rss_mb()
    result["rss_after_warmup_mb"] = warm
    started = time.perf_counter()
    for n in range(args.switches):
        open_chat(n % CHATS)
        if n % 50 == 49:
            print(f"{n + 1} switches: {rss_mb()} MB", file=sys.stderr, flush=True)
    result["switch_mean_s"] = round((time.perf_counter() - started) / max(1, args.switches), 3)
    spin(200)
    gc.collect()
    result["rss_after_switches_mb"] = rss_mb()
    result["switches"] = args.switches
    result["growth_mb"] = round(rss_mb() - warm, 1)
    result["live_widgets"] = len(QApplication.allWidgets())
    # How much of the RSS is freed memory malloc keeps (fragmentation), not live objects.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        result["rss_after_malloc_trim_mb"] = rss_mb()
    chats.append(chats[0] + chats[1] + chats[2][:40])  # one chat of 200 messages
    open_chat(len(chats) - 1)
    spin(200)
    result["rss_200_messages_mb"] = rss_mb()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
