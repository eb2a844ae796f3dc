"""The longest GUI-thread stall while the chat view opens hostile messages, measured by a QTimer
probe that should fire every 5 ms: a 200 KB single line, a 10,000-row table and a 5 MB message.
For each: opening it, then "Show all" until the whole message is shown, then a resize of the
window with the whole message in it. Also "stream": a 60 KB reply streamed in 200-character
deltas every 30 ms under 80 other messages. Prints one JSON line (stalls in ms, times in s, RSS
in MB).

    .venv/bin/python bench/chat_view_stall.py [--cases line,table,big,stream] [--no-show-all]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil
from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication

import inglenook.ui.models.bridge  # noqa: F401 - the window has it loaded (Show all uses it)
from chat_view_memory import assistant_reply, chat
from inglenook.ui.app import configure
from inglenook.ui.chat.chat_view import ChatView

PROBE_MS = 5
TIMEOUT_S = 180.0


def hostile(case: str) -> str:
    if case == "line":  # one 200 KB line without a break opportunity: a hex dump gone on
        rng = random.Random(3)
        return "".join(rng.choice("0123456789abcdef") for _ in range(200_000))
    if case == "table":
        return "| # | Name | Value | Note |\n|---|------|------:|------|\n" + "".join(
            f"| {i} | item {i} | {i * 37 % 1000} | a short note about row {i} |\n"
            for i in range(10_000))
    rng = random.Random(5)  # "big": 5 MB of ordinary replies (paragraphs, lists, tables, code)
    parts, size, n = [], 0, 0
    while size < 5_000_000:
        parts.append(assistant_reply(rng, n))
        size += len(parts[-1]) + 2
        n += 1
    return "\n\n".join(parts)


class Probe:
    """Records the gaps between ticks of a 5 ms timer: the GUI thread's stalls."""

    def __init__(self) -> None:
        self.timer = QTimer()
        self.timer.setInterval(PROBE_MS)
        self.timer.timeout.connect(self._tick)
        self.last = 0.0
        self.worst = 0.0

    def _tick(self) -> None:
        now = time.perf_counter()
        if self.last:
            self.worst = max(self.worst, now - self.last)
        self.last = now

    def measure(self, action: Callable[[], None], done: Callable[[], bool],
                settle_s: float = 0.5) -> tuple[float, float]:
        """Run `action` from the event loop; wait until `done()`, then `settle_s` more.
        Returns (worst stall in ms, seconds until done)."""
        self.last, self.worst = 0.0, 0.0
        self.timer.start()
        loop = QEventLoop()
        started, finished = [0.0], [0.0]

        def run() -> None:
            started[0] = time.perf_counter()
            action()
            QTimer.singleShot(0, poll)

        def poll() -> None:
            if not finished[0] and done():
                finished[0] = time.perf_counter()
            now = time.perf_counter()
            if (finished[0] and now - finished[0] > settle_s) or now - started[0] > TIMEOUT_S:
                loop.quit()
            else:
                QTimer.singleShot(20, poll)

        QTimer.singleShot(50, run)  # after the probe has ticked, so its gaps cover the action
        loop.exec()
        self.timer.stop()
        elapsed = (finished[0] or time.perf_counter()) - started[0]
        return round(max(0.0, self.worst * 1000 - PROBE_MS), 1), round(elapsed, 2)


def stream(probe: Probe) -> dict[str, object]:
    """A long reply arriving as a model would send it, below a chat of 80 messages."""
    rng = random.Random(9)
    reply = ""
    while len(reply) < 60_000:
        reply += assistant_reply(rng, len(reply) % 12) + "\n\n"
    view = ChatView()
    view.resize(900, 760)
    view.show()
    for role, message in chat(1):
        view.add_bubble(role, message)
    probe.measure(lambda: None, lambda: True, settle_s=0.5)
    bubble = view.add_bubble("assistant", "")
    bubble.set_streaming(True)
    sent = [0]
    timer = QTimer()
    timer.setInterval(30)

    def deliver() -> None:
        bubble.append_text(reply[sent[0]:sent[0] + 200])
        sent[0] += 200
        if sent[0] >= len(reply):
            timer.stop()
            bubble.set_streaming(False)

    timer.timeout.connect(deliver)
    stall, took = probe.measure(timer.start, lambda: sent[0] >= len(reply))
    view.close()
    view.deleteLater()
    return {"chars": len(reply), "deltas": len(reply) // 200, "stream_stall_ms": stall,
            "stream_s": took, "truncated_at_end": getattr(bubble.body, "truncated", False)}


def rss_mb() -> float:
    return round(psutil.Process().memory_info().rss / 2**20, 1)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="line,table,big,stream")
    parser.add_argument("--no-show-all", action="store_true")
    args = parser.parse_args()
    app = QApplication(sys.argv)
    configure(app)
    probe = Probe()
    result: dict[str, object] = {"platform": app.platformName()}
    for case in args.cases.split(","):
        if case == "stream":
            result[case] = stream(probe)
            continue
        text = hostile(case)
        view = ChatView()
        view.resize(900, 760)
        view.show()
        for role, message in chat(0)[:10]:
            view.add_bubble(role, message)
        probe.measure(lambda: None, lambda: True, settle_s=0.3)
        bubbles: list[object] = []
        stall, took = probe.measure(
            lambda v=view, t=text, b=bubbles: b.append(v.add_bubble("assistant", t)),
            lambda b=bubbles: bool(b) and b[0].body.isVisible())  # type: ignore[attr-defined]
        figures: dict[str, object] = {"chars": len(text), "open_stall_ms": stall,
                                      "open_s": took, "rss_open_mb": rss_mb()}
        body = bubbles[0].body  # type: ignore[attr-defined]
        figures["truncated"] = bool(getattr(body, "truncated", False))
        if figures["truncated"] and not args.no_show_all:
            stall, took = probe.measure(body.show_all, lambda b=body: not b.truncated)
            figures.update(show_all_stall_ms=stall, show_all_s=took,
                           rss_show_all_mb=rss_mb(), parts=len(body._parts))
            stall, took = probe.measure(lambda v=view: v.resize(700, 760), lambda: True)
            figures["resize_stall_ms"] = stall
        result[case] = figures
        print(case, figures, file=sys.stderr, flush=True)
        view.close()
        view.deleteLater()
        probe.measure(lambda: None, lambda: True, settle_s=0.2)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
