"""What a chat sends: the turns of its branch, read from the outline, and of a long chat only
those its model could hold (core/context.history_start), so a 10,000-message chat does not read,
copy and send them all."""

from __future__ import annotations

from collections.abc import Sequence

from inglenook.chat.chat_settings import ChatSettings
from inglenook.chat.images import image_ref
from inglenook.chat.tool_round import as_turns
from inglenook.core.attachments import Attachment, inline
from inglenook.core.context import history_start
from inglenook.core.messages import Message
from inglenook.store.branch import Branch, Outline


def turn_rows(outline: Outline, stop: int | None = None) -> list[int]:
    """The positions of the messages before `stop` that are turns (read from the outline:
    a reply that failed without writing anything goes, and its question with it)."""
    roles, chars, calls = outline.roles, outline.chars, outline.calls_tools
    kept: list[int] = []
    for index in range(len(outline) if stop is None else stop):
        role = roles[index]
        if role == "assistant" and not chars[index] and not calls[index]:
            if kept and roles[kept[-1]] == "user":
                kept.pop()
            continue
        if role in ("user", "assistant", "system", "tool"):
            kept.append(index)
    return kept


def images_sent(path: Branch, stop: int | None = None) -> list[Attachment]:
    """The images of the turns before `stop` (a model that sees is sent them all, unless the
    context leaves some behind): read on the thread that owns the store."""
    outline = path.outline
    return [a for index in turn_rows(outline, stop) if outline.images[index]
            for a in path[index].attachments if a.kind == "image"]


def user_turn(text: str, attachments: Sequence[Attachment], vision: bool) -> Message:
    """A user's message as sent: its text files inlined, its images as ImageRefs to a model
    that sees (files in the image cache: OSError when they cannot be written) or named in the
    text to one that does not (a chat with a photo in its history goes on with a text model)."""
    if not vision:
        return Message("user", inline(text, attachments))
    texts = [a for a in attachments if a.kind != "image"]
    images = tuple(image_ref(a) for a in attachments if a.kind == "image")
    return Message("user", inline(text, texts), images=images)


def sent_turns(path: Branch, settings: ChatSettings, stop: int, reads_reasoning: bool,
               n_ctx: int = 0, vision: bool = False) -> tuple[list[Message], tuple[int, int]]:
    """The turns of the branch before position `stop` as they are sent to a model of context
    `n_ctx` (0: all of them) that sees images or not (`vision`), and the run of messages left
    behind: (where the run starts among the request's messages, how many messages it holds),
    (0, 0) when all are sent."""
    outline = path.outline
    rows = turn_rows(outline, stop)
    starts = [n for n, i in enumerate(rows) if outline.roles[i] == "user" or n == 0]
    units = list(zip(starts, [*starts[1:], len(rows)][:len(starts)], strict=True))[:-1]
    sizes = [sum(outline.chars[i] + outline.attached[i] for i in rows[a:b]) for a, b in units]
    first = history_start(sizes, n_ctx, settings.overflow)
    pinned = 1 if settings.overflow == "middle" else 0
    behind = (units[pinned][0], units[first][0]) if first > pinned else (0, 0)
    turns: list[Message] = []
    for index in rows[:behind[0]] + rows[behind[1]:]:
        m = path[index]
        reasoning = m.reasoning if reads_reasoning and m.role == "assistant" else ""
        if m.tool_cards:
            turns += as_turns(m.content, reasoning, m.tool_cards)
        elif m.role == "user" and m.attachments:
            turns.append(user_turn(m.content, m.attachments, vision))
        else:
            turns.append(Message(m.role, inline(m.content, m.attachments),  # type: ignore[arg-type]
                                 reasoning))
    system = 1 if settings.system_prompt.strip() else 0
    return turns, ((system + behind[0], behind[1] - behind[0]) if first > pinned else (0, 0))
