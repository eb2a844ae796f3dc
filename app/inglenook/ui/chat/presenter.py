"""How a stored message looks in the chat view: author, figures and how it ended."""

from __future__ import annotations

from inglenook.core.replies import Finish
from inglenook.core.reply_format import shown_reply
from inglenook.store import StoredMessage
from inglenook.ui.chat.chat_view import MessageBubble


def author(message: StoredMessage, model_name: str) -> str:
    """Who wrote a reply: the model its provenance names (an import's, when it has one). Only a
    reply being written now is the loaded model's (`model_name`); one without provenance (an
    imported chat, a reply cut off by a crash) is not, whatever is loaded."""
    if message.provenance.model_name:
        return message.provenance.model_name
    if message.status == "streaming" and model_name:
        return model_name
    return "Assistant"


def present(bubble: MessageBubble, message: StoredMessage, model_name: str) -> None:
    """Fill an assistant bubble from its stored reply: who wrote it, what it thought (folded),
    its figures, and a notice when it did not end normally (a stopped or failed reply is
    always marked). `model_name`: the model loaded now."""
    provenance = message.provenance
    bubble.author.setText(author(message, model_name))
    bubble.set_reasoning(message.reasoning, seconds=provenance.thinking_s)
    if provenance.stats is not None:
        bubble.set_stats(provenance.stats)
    if message.status == "interrupted":
        bubble.set_notice("Interrupted: the app closed while this reply was written.")
    elif message.status == "error":
        bubble.set_notice(provenance.error or "This reply failed.", "error")
    elif provenance.finish in ("cancelled", "length"):
        bubble.set_finish(Finish(provenance.finish, provenance.error))
    mark_stopped_thinking(bubble, message)
    show_answer(bubble, message)


def show_answer(bubble: MessageBubble, message: StoredMessage) -> None:
    """The reply's text; a JSON reply (its chat's "Reply as JSON") pretty-printed as a code
    block, marked when it does not match its schema. Copy copies the JSON."""
    fmt = message.provenance.reply_format
    if not fmt or not message.content.strip():
        bubble.set_text(message.content)
        return
    shown, copied, problem = shown_reply(message.content, fmt)
    bubble.set_text(shown)
    bubble.text = copied
    if problem and message.provenance.finish == "stop":  # a cut-off reply already says so
        bubble.set_notice(problem, "info")


def mark_stopped_thinking(bubble: MessageBubble, message: StoredMessage) -> None:
    """A reply that ended before its answer began (stopped, or at its length limit) says so, on
    the notice and on its thinking, rather than "Thought for 38 s" over an empty answer."""
    provenance = message.provenance
    if (provenance.finish not in ("cancelled", "length") or message.content.strip()
            or message.tool_cards or not message.reasoning.strip()):
        return
    if provenance.finish == "length":
        notice = ("The reply reached its length limit while the model was still thinking: no "
                  "answer was written. A higher Max tokens lets it finish.")
    elif provenance.error:
        notice = f"{provenance.error} The model was still thinking: no answer was written."
    else:
        notice = "Stopped while the model was thinking: no answer was written."
    bubble.set_notice(notice, "info")
    bubble.reasoning.show_stopped(message.reasoning, provenance.thinking_s)
