"""What a chat sends: the turns of its branch, read from the outline, and of a long chat only
those its model could hold (core/context.history_start), so a 10,000-message chat does not read,
copy and send them all."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from inglenook.chat.chat_settings import ChatSettings
from inglenook.chat.images import image_ref
from inglenook.chat.tool_round import as_turns
from inglenook.core.attachments import Attachment, inline
from inglenook.core.context import (
    ContextOverflow,
    estimate,
    fit_messages,
    history_start,
    reply_reserve,
)
from inglenook.core.messages import Message, build_messages
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
    rows, behind = _rows_sent(path.outline, settings, stop, n_ctx)
    turns: list[Message] = []
    for index in rows:
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
    return turns, ((system + behind[0], behind[1]) if behind[1] else (0, 0))


def _rows_sent(outline: Outline, settings: ChatSettings, stop: int | None,
               n_ctx: int) -> tuple[list[int], tuple[int, int]]:
    """The positions of the turns before `stop` worth sending to a model of context `n_ctx`
    (core/context.history_start), and the run left behind: (where it starts among the turns,
    how many), (0, 0) when none is."""
    rows = turn_rows(outline, stop)
    starts = [n for n, i in enumerate(rows) if outline.roles[i] == "user" or n == 0]
    units = list(zip(starts, [*starts[1:], len(rows)][:len(starts)], strict=True))[:-1]
    sizes = [sum(outline.chars[i] + outline.attached[i] for i in rows[a:b]) for a, b in units]
    first = history_start(sizes, n_ctx, settings.overflow)
    pinned = 1 if settings.overflow == "middle" else 0
    if first <= pinned:
        return rows, (0, 0)
    start, end = units[pinned][0], units[first][0]
    return rows[:start] + rows[end:], (start, end - start)


@dataclass(frozen=True)
class NextPrompt:
    """What a chat's next request will hold, estimated as the engine will budget it
    (core/context.fit_messages): its tokens, and the run of earlier messages it leaves out,
    as `left_out` messages before branch position `first_seen` (None when none are)."""

    tokens: int
    left_out: int = 0
    first_seen: int | None = None


def next_prompt(path: Branch, settings: ChatSettings, n_ctx: int) -> NextPrompt:
    """The next request of a chat on a model of context `n_ctx`: the turns it could send
    (as sent_turns chooses them), fitted with estimated counts, the reply's room kept. Read
    from the outline alone: each turn is a stand-in of its size, so nothing is read from the
    store for it (a chat opens at its end, whatever its length)."""
    outline = path.outline
    rows, behind = _rows_sent(outline, settings, len(path), n_ctx)
    sizes, roles = outline.chars, outline.roles
    turns = [Message(roles[i], "x" * (sizes[i] + outline.attached[i]))  # type: ignore[arg-type]
             for i in rows]
    messages = build_messages(settings.system_prompt, turns)
    if behind[1]:
        behind = (behind[0] + len(messages) - len(turns), behind[1])
    reserve = reply_reserve(n_ctx, settings.sampling.max_tokens)
    try:
        fit = fit_messages(messages, estimate, n_ctx, reserve, settings.overflow)
    except ContextOverflow:  # the send says why; the meter shows all of it
        return NextPrompt(estimate(messages))
    if not behind[1] and not fit.dropped:
        return NextPrompt(estimate(fit.messages))
    # Positions among the turns (one message a row, as session.left_out reads them): the run
    # sent_turns left behind, and the fit's run in the request with that run taken out.
    system = len(messages) - len(turns)
    run = (behind[0] - system, behind[1]) if behind[1] else None
    if fit.dropped:
        start = fit.dropped_start - system
        if run is not None and start >= run[0]:
            start += run[1]
        run = (min(start, run[0]) if run else start, (run[1] if run else 0) + fit.dropped)
    assert run is not None
    rows = turn_rows(path.outline)
    after = run[0] + run[1]
    return NextPrompt(estimate(fit.messages), run[1], rows[after] if after < len(rows) else None)
