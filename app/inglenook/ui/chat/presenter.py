"""How a stored message looks in the chat view: author, figures and how it ended."""

from __future__ import annotations

from inglenook.core.replies import Finish
from inglenook.store import StoredMessage
from inglenook.ui.chat.chat_view import MessageBubble


def present(bubble: MessageBubble, message: StoredMessage, model_name: str) -> None:
    """Fill an assistant bubble from its stored reply: who wrote it, what it thought (folded),
    its figures, and a notice when it did not end normally (a stopped or failed reply is
    always marked)."""
    provenance = message.provenance
    bubble.author.setText(provenance.model_name or model_name or "Assistant")
    bubble.set_reasoning(message.reasoning, seconds=provenance.thinking_s)
    if provenance.stats is not None:
        bubble.set_stats(provenance.stats)
    if message.status == "interrupted":
        bubble.set_notice("Interrupted: the app closed while this reply was written.")
    elif message.status == "error":
        bubble.set_notice(provenance.error or "This reply failed.", "error")
    elif provenance.finish in ("cancelled", "length"):
        bubble.set_finish(Finish(provenance.finish, provenance.error))
