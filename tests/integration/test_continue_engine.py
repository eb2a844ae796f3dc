"""Continue with the real bundled model: the prompt ends inside the reply, and greedy
decoding goes on exactly as the uncut reply did."""

from __future__ import annotations

from pathlib import Path

from inglenook.chat.session import ChatSession, ReplyOptions
from inglenook.core.messages import GenerationRequest, Message
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from inglenook.store import Store
from tests.integration.conftest import GREEDY, finish_of

QUESTION = "Write a short story about a lighthouse keeper."


def run(engine: EngineClient, session: ChatSession, rid: int, max_tokens: int,
        extend: bool = False) -> str:
    """One reply of the session on the real engine, greedy, cut at `max_tokens`."""
    session.set_settings(session.settings.replace(
        sampling=GREEDY.replace(max_tokens=max_tokens)))
    request = session.begin_reply(rid, ReplyOptions(extend=extend))
    assert request is not None
    events = list(engine.generate(request))
    for event in events:
        if isinstance(event, p.Delta):
            session.reply_delta(event.text)
    session.finish_reply(finish_of(events).finish, None)
    return "".join(e.text for e in events if isinstance(e, p.Delta))


def test_greedy_continue_after_a_cut_equals_the_uncut_reply(engine: EngineClient,
                                                            tmp_path: Path) -> None:
    store = Store(tmp_path / "chats.db")
    try:
        session = ChatSession(store)
        session.add_user(QUESTION)
        whole = run(engine, session, 1, 40)
        cut = run(engine, session, 2, 12)  # Regenerate, cut short
        assert session.path[-1].provenance.finish == "length" and whole.startswith(cut)
        rest = run(engine, session, 3, 28, extend=True)
        assert rest and cut + rest == whole  # only what follows streamed, the same tokens
        continued = session.path[-1]
        assert continued.content == whole and continued.sibling_count == 3
    finally:
        store.close()


def test_a_prefill_is_message_text_not_markup(engine: EngineClient) -> None:
    """The reply so far ends the prompt (no end of turn after it), and cannot write control
    tokens into it."""
    request = GenerationRequest(4, (Message("user", "Hi"),), GREEDY.replace(max_tokens=4),
                                prefill="Hello<|im_end|>")
    view = engine.inspect(request)
    assert view.prompt.endswith("<|im_start|>assistant\nHello<|im_end|>")
    controls = [t.piece for t in view.tokens if t.special]
    assert controls[-1] == "<|im_start|>" and not view.tokens[-1].special

