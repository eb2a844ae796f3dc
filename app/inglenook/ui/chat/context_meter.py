"""Context you can see: the meter (history + what is being typed, of the context length), the
check before sending something that will not fit, and the marker where history was left out."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel

from inglenook.core.load import ModelInfo
from inglenook.core.session import ChatSession, estimate_tokens
from inglenook.ui.chat.chat_view import ChatView, MessageBubble

NEAR_FULL = 0.8  # the meter turns amber
OVER = {"stop": "this chat stops at the limit (see the side panel).",
        "rolling": "the oldest turns will be left out.",
        "middle": "turns after the first exchange will be left out."}


class ContextMeter:
    """The status bar's meter; its `level` property ("ok", "near", "over") colours it."""

    def __init__(self, label: QLabel) -> None:
        self.label = label

    def show(self, session: ChatSession, model: ModelInfo | None, draft_text: str) -> None:
        """Hidden when the length is unknown (some remote engines do not say)."""
        label = self.label
        if model is None or model.n_ctx <= 0:
            label.setText("")
            label.hide()
            return
        used, exact = session.context_used()
        draft = estimate_tokens(draft_text)
        total, n_ctx = used + draft, model.n_ctx
        level = "over" if total > n_ctx else "near" if total > NEAR_FULL * n_ctx else "ok"
        typed = f" + ≈{draft:,} typed" if draft else ""
        label.setText(f"Context {'' if exact else '≈'}{used:,}{typed} / {n_ctx:,}")
        label.setToolTip(
            "Tokens of this conversation the model sees, of its context length"
            + ("" if exact else " (estimated until the next reply)")
            + {"near": ". Nearly full.", "ok": ".",
               "over": f". Over: {OVER[session.settings.overflow]}"}[level])
        if label.property("level") != level:
            label.setProperty("level", level)
            label.style().unpolish(label)
            label.style().polish(label)
        label.show()


def will_not_fit(session: ChatSession, model: ModelInfo | None, text: str) -> str:
    """Why a message should not be sent as it is, said before sending ("" if it may)."""
    if model is None or model.n_ctx <= 0:
        return ""
    draft = estimate_tokens(text)
    if draft > model.n_ctx * 3 // 4:  # the reply needs room too
        return (f"Your message is about {draft:,} tokens, but the model's context holds "
                f"{model.n_ctx:,} for the message and the reply together. Shorten it or load "
                "the model with a longer context.")
    used, _ = session.context_used()
    if session.settings.overflow == "stop" and used + draft > model.n_ctx:
        return ("This chat is full and set to stop at the limit. Start a new chat, or choose "
                "what to leave out under “When the chat is full”.")
    return ""


def mark_left_out(view: ChatView, session: ChatSession, reply_id: int) -> MessageBubble | None:
    """A marker where history was left out for this reply: on the first message after the
    run. Returns the bubble marked (the caller clears an older marker)."""
    left_out = set(session.left_out(reply_id))
    ids = [m.id for m in session.path]
    if not left_out & set(ids):
        return None
    last = max(ids.index(i) for i in left_out if i in ids)
    bubbles = {b.message_id: b for b in view.bubbles}
    if last + 1 >= len(ids) or ids[last + 1] not in bubbles:
        return None
    bubble = bubbles[ids[last + 1]]
    bubble.set_notice(f"↑ {len(left_out)} earlier messages are not seen by the model: they "
                      "were left out to fit its context.", "info")
    return bubble
