"""Two ways to change a reply without asking again: Continue one that was cut or stopped, and
edit one by hand. Both write a new version of the reply (a sibling, like Regenerate), so the
original stays one ‹ › away.

Qt-free. Continue sends the same conversation with the reply so far as the start of the
assistant turn (GenerationRequest.prefill): the model goes on where it stopped, and the new
version holds the old text followed by what it wrote.
"""

from __future__ import annotations

from inglenook.core.provenance import Provenance
from inglenook.core.reasoning import ReasoningFormat
from inglenook.store import StoredMessage

CONTINUABLE = ("length", "cancelled")  # a reply cut by its limit, or stopped by the user
EDITED = "edited"  # Provenance.extra: the reply's text was written or changed by the user


def can_continue(message: StoredMessage | None) -> bool:
    """A reply that was cut, stopped or interrupted (the app ended while it was written) with
    something written, and that called no tools (a call ends a reply on purpose)."""
    return (message is not None and message.role == "assistant"
            and (message.provenance.finish in CONTINUABLE or message.status == "interrupted")
            and message.status != "streaming" and not message.tool_cards
            and bool(message.content or message.reasoning))


def written(answer: str, reasoning: str, fmt: ReasoningFormat | None) -> str:
    """The reply as the model wrote it, markers included, to continue from: reasoning in its
    tags (left open when it was cut while thinking), then the answer. The opening tag is
    left out where the generation prompt writes it (`starts_open`: there even an answer
    without reasoning comes after the closing tag); harmony channels are not rebuilt (their
    markers are control tokens): the answer alone is continued."""
    if fmt is None or fmt.kind == "channels" or not (reasoning or fmt.starts_open):
        return answer
    head = "" if fmt.starts_open else fmt.open
    if not answer:
        return f"{head}\n{reasoning}"
    return f"{head}\n{reasoning}\n{fmt.close}\n\n{answer.lstrip()}"


def edited(provenance: Provenance) -> Provenance:
    """The provenance of a reply the user rewrote: how the original was made, marked edited
    (Details says so; the figures no longer describe this text)."""
    return provenance.replace(stats=None, extra={**provenance.extra, EDITED: True})


def is_edited(provenance: Provenance) -> bool:
    return provenance.extra.get(EDITED) is True
