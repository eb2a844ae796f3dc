"""A reply's grammar is made off the batch loop: the engine's other replies go on meanwhile.
The engine host runs in this process (the real model), so that making a grammar can be held up
until the other reply has ended: made on the loop, it could never end."""

from __future__ import annotations

import io
import json
import queue
import threading
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from inglenook.core.load import LoadParams, ModelInfo
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.replies import Finish
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.host import process
from inglenook.engine.host.grammar import MAX_ALTERNATIVES, alternatives, grammar_for
from inglenook.engine.host.process import EngineHost

GREEDY = SamplingParams(temperature=0.0, seed=7, max_tokens=48)
# Large, and allowed: a thousand choices.
CHOICES = {"type": "object", "additionalProperties": False, "required": ["city"],
           "properties": {"city": {"enum": [f"Town {i:04d}" for i in range(1000)]}}}
BIG, PLAIN = 1, 2
HANG_GUARD_S = 120.0  # only ever reached when the test fails


class Watched(EngineHost):
    """Keeps what it sends; `ended` is set once both replies have finished."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO())
        self.sent: list[Any] = []
        self.finished: dict[int, Finish] = {}
        self.plain_ended, self.ended = threading.Event(), threading.Event()

    def send(self, message: Any) -> None:
        self.sent.append(message)
        if isinstance(message, p.Finished):
            self.finished[message.request_id] = message.finish
            if message.request_id == PLAIN:
                self.plain_ended.set()
            if len(self.finished) == 2:
                self.ended.set()
        super().send(message)

    def text(self, rid: int) -> str:
        return "".join(m.text for m in self.sent if isinstance(m, p.Delta)
                       and m.request_id == rid)


def test_the_grammar_is_allowed_yet_large() -> None:
    grammar = grammar_for(json.dumps(CHOICES))
    assert 1000 <= alternatives(grammar) <= MAX_ALTERNATIVES


def test_other_replies_go_on_while_a_grammar_is_made(bundled_model: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    host = Watched()
    host.load(LoadParams(str(bundled_model), n_ctx=1024, n_slots=2))
    made_after_the_plain_reply: list[bool] = []
    real = process.reply_grammar

    def slow(request: GenerationRequest, info: ModelInfo) -> str:
        made_after_the_plain_reply.append(host.plain_ended.wait(HANG_GUARD_S))
        return real(request, info)

    monkeypatch.setattr(process, "reply_grammar", slow)
    inbox: queue.Queue[Any] = queue.Queue()
    ask = (Message("user", "Name a town."),)
    inbox.put(p.Generate(GenerationRequest(BIG, ask, GREEDY, reply_format=json.dumps(CHOICES))))
    inbox.put(p.Generate(GenerationRequest(PLAIN, (Message("user", "Say hello."),), GREEDY)))
    runner = threading.Thread(target=host.run, args=(inbox,), daemon=True)
    runner.start()
    try:
        assert host.ended.wait(HANG_GUARD_S)
    finally:
        inbox.put(p.Shutdown())
        runner.join(HANG_GUARD_S)
        host.unload()
    assert made_after_the_plain_reply == [True]
    assert host.finished[PLAIN].reason in ("stop", "length") and host.text(PLAIN)
    assert host.finished[BIG].reason == "stop", host.finished[BIG]
    jsonschema.validate(json.loads(host.text(BIG)), CHOICES)
