"""Context you can see: the meter (history + what is being typed + the passages a chat's
knowledge collections may add, of the context length), the check before sending something that
will not fit, and the marker where history was left out.

Passages go with one question only (chat/knowledge_turn.py): the engine's count after a reply
includes those it was given, which the next request leaves out, so the meter takes them off and
shows instead the room the next question's passages may take (at most knowledge_turn.budget).

While a reply streams, the meter and the reply's tok/s move with it (LiveFigures): the engine
reports its exact figures once, when the reply ends, so until then they are estimated from the
text written so far, redrawn at most every LIVE_MS, and marked "≈"; the exact ones replace them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QLabel

from inglenook.chat import knowledge_turn
from inglenook.chat.session import ChatSession, estimate_tokens
from inglenook.core.load import ModelInfo
from inglenook.engine.worker import EngineWorker
from inglenook.store import StoredMessage
from inglenook.ui.widgets.style import restyle

if TYPE_CHECKING:
    from inglenook.ui.chat.chat_view import ChatView

LIVE_MS = 250

NEAR_FULL = 0.8  # the meter turns amber
OVER = {"stop": "this chat stops at the limit (see the side panel).",
        "rolling": "the oldest turns will be left out.",
        "middle": "turns after the first exchange will be left out."}
OVERFLOW_WORDS = {"stop": "", "rolling": "the oldest turns go first",
                  "middle": "the first exchange is kept"}


class ContextMeter:
    """The status bar's meter; its `level` property ("ok", "near", "over") colours it."""

    def __init__(self, label: QLabel) -> None:
        self.label = label

    def show(self, session: ChatSession, model: ModelInfo | None, draft: int) -> None:
        """`draft`: the estimated tokens of the message being written, its files and images
        with it. Hidden when the length is unknown (some remote engines do not say)."""
        label = self.label
        if model is None or model.n_ctx <= 0:
            label.setText("")
            label.hide()
            return
        used, exact = session.context_used()
        given = passages_in(session.path[-1]) if exact and session.path else 0
        if given:  # counted with the last question; the next one is sent without them
            # (given is estimated: never below what the chat's own text is estimated at)
            used, exact = max(used - given, text_tokens(session)), False
        reserve = knowledge_turn.budget(model.n_ctx) if session.settings.knowledge else 0
        ahead = session.next_prompt(model.n_ctx) if not exact else None
        if ahead is not None:  # outgrown: what the next request will hold, not the whole chat
            used = ahead.tokens
        self._show(session, model, used, exact, draft, reserve,
                   ahead.left_out if ahead is not None else 0)

    def show_live(self, session: ChatSession, model: ModelInfo | None, used: int) -> None:
        """`used` tokens while a reply streams: an estimate until the engine counts."""
        if model is not None and model.n_ctx > 0:
            self._show(session, model, used, False, 0)

    def _show(self, session: ChatSession, model: ModelInfo, used: int, exact: bool,
              draft: int, reserve: int = 0, left_out: int = 0) -> None:
        """`reserve`: the tokens the passages found for the next question may take;
        `left_out`: the earlier messages the next request leaves out."""
        label = self.label
        total, n_ctx = used + draft + reserve, model.n_ctx
        level = "over" if total > n_ctx else "near" if total > NEAR_FULL * n_ctx else "ok"
        typed = f" + ≈{draft:,} typed" if draft else ""
        passages = f" + ≤{reserve:,} passages" if reserve else ""
        label.setText(f"Context {'' if exact else '≈'}{used:,}{typed}{passages} / {n_ctx:,}")
        reply = session.reply
        given = reply.knowledge.tokens if reply is not None and reply.knowledge else 0
        label.setToolTip(
            "Tokens of this conversation the model sees, of its context length"
            + ("" if exact else " (estimated until the next reply)")
            + (f", with ≈{given:,} of passages from your documents" if given else "")
            + {"near": ". Nearly full.", "ok": ".",
               "over": f". Over: {OVER[session.settings.overflow]}"}[level]
            + (f"\nUp to {reserve:,} tokens of passages from this chat's collections go "
               "with the next question." if reserve else "")
            + (f"\n{left_out:,} earlier messages are left out of the model's view to fit its "
               f"context ({OVERFLOW_WORDS[session.settings.overflow]}); a marker in the chat "
               "shows where. They stay in the chat." if left_out else ""))
        if label.property("level") != level:
            restyle(label, level=level)
        label.show()


def passages_in(message: StoredMessage) -> int:
    """The tokens of passages a saved reply was given with its question (0: none)."""
    turn = knowledge_turn.recorded(message.provenance) if message.role == "assistant" else None
    return turn.tokens if turn is not None else 0


def text_tokens(session: ChatSession) -> int:
    """The chat's text (and system prompt) estimated, from the outline alone."""
    outline = session.path.outline
    chars = sum(outline.chars) + sum(outline.attached)
    return estimate_tokens(session.settings.system_prompt) + (chars + 3) // 4


LOOK_BACK = 64  # messages walked back for the last counted reply before estimating it all


def context_before_reply(session: ChatSession) -> int:
    """Tokens of the chat the model sees before the reply in flight: the engine's count after
    the last reply that has one, plus an estimate of what came since (the new question); the
    whole chat estimated when no reply in the last LOOK_BACK messages was counted."""
    reply, path = session.reply, session.path
    outline, since = path.outline, 0
    for index in range(len(outline) - 1, max(-1, len(outline) - 1 - LOOK_BACK), -1):
        if reply is not None and outline.ids[index] == reply.message_id:
            continue  # the reply itself: its text so far is counted apart
        stats = path[index].provenance.stats
        if stats is not None:  # less the passages that reply was given: not sent again
            return stats.context_used - passages_in(path[index]) + (since + 3) // 4
        since += outline.chars[index] + outline.attached[index]
    return session.context_used()[0]


class LiveFigures(QObject):
    """Moves the meter and the streaming reply's figures while it is written (see above):
    those of `session()`, the chat on screen, in `meter` and in its bubble in `view`."""

    def __init__(self, worker: EngineWorker, session: Callable[[], ChatSession],
                 meter: ContextMeter, view: ChatView, model: Callable[[], ModelInfo | None],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._session, self.meter, self.view, self._model = session, meter, view, model
        self._first: dict[int, float] = {}  # request id -> when its first text came
        self._before: dict[int, int] = {}  # request id -> context_before_reply, once
        self._timer = QTimer(self, interval=LIVE_MS)
        self._timer.timeout.connect(self.tick)
        worker.token_delta.connect(self._on_delta)
        worker.generation_stats.connect(self._on_done)  # exact figures from here on
        worker.generation_finished.connect(self._on_done)

    def _on_delta(self, rid: int, _text: str) -> None:
        self._first.setdefault(rid, time.monotonic())
        if not self._timer.isActive():
            self._timer.start()

    def _on_done(self, rid: int, _result: object) -> None:
        self._first.pop(rid, None)
        self._before.pop(rid, None)
        if not self._first:
            self._timer.stop()

    def tick(self) -> None:
        """Redraw the estimates for the reply on screen, if it streams and has no exact
        figures yet."""
        session = self._session()
        reply = session.reply
        if reply is None or reply.stats is not None or reply.request_id not in self._first:
            return
        rid = reply.request_id
        if rid not in self._before:  # once per reply: it walks back through the branch
            self._before[rid] = context_before_reply(session)
        written = estimate_tokens(reply.parts.answer + reply.parts.reasoning)
        given = reply.knowledge.tokens if reply.knowledge is not None else 0
        self.meter.show_live(session, self._model(), self._before[rid] + given + written)
        bubble = self.view.bubble_of(reply.message_id)
        if bubble is None:
            return
        elapsed = time.monotonic() - self._first[rid]
        if written and elapsed > 0.5:  # a rate over less is noise
            rate = written / elapsed
            speed = f"≈{rate:.1f} tok/s" if rate < 100 else f"≈{rate:,.0f} tok/s"
            bubble.stats_label.set_forms(f"≈{written:,} tokens · {speed}", speed)
            bubble.stats_label.setToolTip("Estimated from the text so far; the exact figures "
                                          "come when the reply ends.")
            bubble.stats_label.show()


def will_not_fit(session: ChatSession, model: ModelInfo | None, draft: int) -> str:
    """Why a message of `draft` tokens (estimated: core/attachments.message_tokens) should not
    be sent as it is, said before sending ("" if it may)."""
    if model is None or model.n_ctx <= 0:
        return ""
    if draft > model.n_ctx * 3 // 4:  # the reply needs room too
        return (f"Your message is about {draft:,} tokens, but the model's context holds "
                f"{model.n_ctx:,} for the message and the reply together. Shorten it or load "
                "the model with a longer context.")
    used, _ = session.context_used()
    if session.settings.overflow == "stop" and used + draft > model.n_ctx:
        return ("This chat is full and set to stop at the limit. Start a new chat, or choose "
                "what to leave out under “When the chat is full”.")
    return ""


def ahead_marker(session: ChatSession, n_ctx: int) -> tuple[int, str] | None:
    """Where the next request's cut falls (on the first message it sends after the run it
    leaves out) and what it says; None when it leaves nothing out."""
    ahead = session.next_prompt(n_ctx)
    if ahead is None or not ahead.left_out or ahead.first_seen is None:
        return None
    return (session.path.outline.ids[ahead.first_seen],
            f"↑ {ahead.left_out:,} earlier messages are left out of the model's view to fit "
            "its context.")


def left_out_marker(session: ChatSession, reply_id: int) -> tuple[int, str] | None:
    """Where to say that history was left out for this reply, and what: on the first message
    after the run (its id), or None when nothing was left out."""
    left_out = session.left_out(reply_id)
    path = session.path
    indices = [i for i in (path.index_of(m) for m in left_out) if i is not None]
    if not indices or max(indices) + 1 >= len(path):
        return None
    return (path.outline.ids[max(indices) + 1],
            f"↑ {len(left_out)} earlier messages are not seen by the model: they were left out "
            "to fit its context.")
