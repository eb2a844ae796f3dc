"""Several replies at once on the real model: sequences decoded in one llama.cpp batch give
each the reply it gets alone and the one raw llama-cpp-python gives, token for token; they join
and leave between steps; a stop ends one and leaves the others and their KV states intact."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient, LoadRefused
from inglenook.models import fit
from inglenook.models.gguf import read_header
from tests.integration.conftest import GREEDY

N_CTX = 2048
QUESTIONS = ("Write a short poem about the sea.", "What is the capital of France?",
             "Explain how bread rises.", "List three colours and one thing of each colour.")
REPLY = GREEDY.replace(max_tokens=48)


@pytest.fixture(scope="module")
def four(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[EngineClient]:
    """Four slots with a KV cache each (the exact layout: in the shared pool, the default, a
    reply may part from the lone one at a near-tie, tests/integration/test_kv_pool.py); no
    speculation, so that a reply alone is plain decoding too."""
    client = EngineClient(log_path=tmp_path_factory.mktemp("logs") / "engine.log")
    info = client.load(LoadParams(str(bundled_model), n_ctx=N_CTX, n_slots=4,
                                  prompt_lookup=False, kv_per_reply=True))
    assert info.n_slots == 4 and info.n_ctx == N_CTX
    yield client
    client.close()


class Run:
    """One reply on a thread: its text, events, and an event set after `after` deltas."""

    def __init__(self, client: EngineClient, request: GenerationRequest, after: int = 0) -> None:
        self.client, self.request = client, request
        self.text, self.events = "", []  # type: ignore[var-annotated]
        self.streaming = threading.Event()
        self._after = after
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        deltas = 0
        for event in self.client.generate(self.request):
            self.events.append(event)
            if isinstance(event, p.Delta):
                self.text += event.text
                deltas += 1
                if deltas >= self._after:
                    self.streaming.set()
        self.streaming.set()

    @property
    def finish(self) -> p.Finished:
        (finished,) = [e for e in self.events if isinstance(e, p.Finished)]
        return finished

    @property
    def stats(self) -> p.ReplyStats:
        (stats,) = [e for e in self.events if isinstance(e, p.ReplyStats)]
        return stats


def alone(client: EngineClient, rid: int, messages: tuple[Message, ...],
          sampling: SamplingParams = REPLY, conversation: str = "") -> str:
    events = list(client.generate(GenerationRequest(rid, messages, sampling, conversation)))
    return "".join(e.text for e in events if isinstance(e, p.Delta))


def together(client: EngineClient, requests: list[GenerationRequest]) -> list[Run]:
    runs = [Run(client, r) for r in requests]
    for run in runs:
        run.thread.start()
    for run in runs:
        run.thread.join(300)
    return runs


def ask_of(i: int) -> tuple[Message, ...]:
    return (Message("user", QUESTIONS[i]),)


def near_tie(client: EngineClient, model: Path, messages: tuple[Message, ...], text: str,
             other: str) -> bool:
    """Whether the first token where two replies part is a near-tie of the two likeliest tokens
    (llama.cpp's batched arithmetic rounding differently), by raw llama-cpp-python's logits
    after the prompt (as the engine tokenizes it) and the tokens both replies share."""
    import llama_cpp  # the reference; the app imports llama_cpp only in engine/host/

    prompt = [t.id for t in client.inspect(GenerationRequest(1, messages, REPLY)).tokens]
    llm = llama_cpp.Llama(str(model), n_ctx=N_CTX, logits_all=True, verbose=False)
    try:
        a = llm.tokenize(text.encode(), add_bos=False, special=False)
        b = llm.tokenize(other.encode(), add_bos=False, special=False)
        k = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                 min(len(a), len(b)))
        llm.eval(prompt + a[:k])
        scores = list(llm.scores[llm.n_tokens - 1])
        first, second = sorted(range(len(scores)), key=scores.__getitem__)[-2:][::-1]
        return scores[first] - scores[second] < 1.0
    finally:
        llm.close()


def test_four_at_once_give_each_the_reply_it_gets_alone_and_raw_llama_cpps(
        four: EngineClient, bundled_model: Path) -> None:
    import llama_cpp  # the reference; the app imports llama_cpp only in engine/host/

    solo = [alone(four, 100 + i, ask_of(i)) for i in range(4)]
    runs = together(four, [GenerationRequest(200 + i, ask_of(i), REPLY) for i in range(4)])
    assert [r.finish.finish.reason for r in runs] == ["length"] * 4 or all(
        r.finish.finish.reason in ("stop", "length") for r in runs)
    assert [r.text for r in runs] == solo
    # Every sequence was decoded beside the others: their steps overlapped.
    firsts = [r.stats.stats.ttft_s for r in runs]
    assert all(r.stats.stats.generated_tokens > 8 for r in runs) and len(firsts) == 4
    llm = llama_cpp.Llama(str(bundled_model), n_ctx=N_CTX, verbose=False)
    try:
        for i, text in enumerate(solo):
            raw = llm.create_chat_completion(
                [{"role": "user", "content": QUESTIONS[i]}], temperature=0.0, seed=42,
                repeat_penalty=1.0, top_k=REPLY.top_k, top_p=REPLY.top_p, min_p=REPLY.min_p,
                max_tokens=REPLY.max_tokens)["choices"][0]["message"]["content"]
            assert raw == text or near_tie(four, bundled_model, ask_of(i), text, raw), (
                raw, text)
    finally:
        llm.close()


def test_seeded_sampling_is_reproducible_per_sequence(four: EngineClient) -> None:
    sampled = [REPLY.replace(temperature=0.9, seed=10 + i, repeat_penalty=1.1)
               for i in range(4)]
    solo = [alone(four, 300 + i, ask_of(i), sampled[i]) for i in range(4)]
    runs = together(four, [GenerationRequest(400 + i, ask_of(i), sampled[i]) for i in range(4)])
    assert [r.text for r in runs] == solo
    assert [r.stats.stats.seed for r in runs] == [10, 11, 12, 13]


def test_stopping_one_of_four_leaves_the_others_and_their_kv_states_intact(
        four: EngineClient) -> None:
    long = GREEDY.replace(max_tokens=80)
    short = GREEDY.replace(max_tokens=16)
    conversations = [f"chat:stop{i}" for i in range(4)]
    solo = {i: alone(four, 500 + i, ask_of(i), long, conversations[i] + "-solo")
            for i in (0, 2, 3)}
    requests = [GenerationRequest(600 + i, ask_of(i), long, conversations[i]) for i in range(4)]
    runs = [Run(four, r, after=3) for r in requests]
    for run in runs:
        run.thread.start()
    assert runs[1].streaming.wait(120)
    four.cancel(601)
    for run in runs:
        run.thread.join(300)
    assert runs[1].finish.finish.reason == "cancelled"
    assert runs[1].stats.stats.generated_tokens < 80
    assert [runs[i].text for i in (0, 2, 3)] == [solo[i] for i in (0, 2, 3)]
    # Their KV cells hold exactly their conversations: a follow-up reads only the new turn
    # and gives the reply the same follow-up gives after the solo run.
    for i in (0, 2, 3):
        follow = (*ask_of(i), Message("assistant", runs[i].text), Message("user", "Shorter."))
        after_solo = (*ask_of(i), Message("assistant", solo[i]), Message("user", "Shorter."))
        reference = alone(four, 700 + i, after_solo, short, conversations[i] + "-solo")
        events = list(four.generate(GenerationRequest(710 + i, follow, short,
                                                      conversations[i])))
        stats = next(e.stats for e in events if isinstance(e, p.ReplyStats))
        assert stats.prompt_tokens - stats.cached_tokens < 20
        assert "".join(e.text for e in events if isinstance(e, p.Delta)) == reference


def test_a_sequence_joining_while_others_decode(four: EngineClient) -> None:
    long = GREEDY.replace(max_tokens=64)
    solo = [alone(four, 800 + i, ask_of(i), long) for i in range(3)]
    first = [Run(four, GenerationRequest(900 + i, ask_of(i), long), after=4) for i in range(2)]
    for run in first:
        run.thread.start()
    assert first[0].streaming.wait(120) and first[1].streaming.wait(120)
    joining = Run(four, GenerationRequest(902, ask_of(2), long))
    joining.thread.start()
    still_writing = not any(isinstance(e, p.Finished) for r in first for e in r.events)
    for run in (*first, joining):
        run.thread.join(300)
    assert still_writing  # the joiner read its prompt while the others wrote
    assert [r.text for r in (*first, joining)] == solo


def test_a_conversation_restored_into_a_slot_continues_exactly(
        bundled_model: Path, tmp_path: Path) -> None:
    client = EngineClient(log_path=tmp_path / "engine.log")
    try:
        client.load(LoadParams(str(bundled_model), n_ctx=N_CTX, n_slots=2, prompt_lookup=False,
                               kv_per_reply=True))
        facts = " ".join(f"Fact {i}: river number {i} flows north." for i in range(30))
        a1 = (Message("user", facts + " Which way does river 3 flow?"),)
        first = alone(client, 1, a1, REPLY, "chat:a")
        a2 = (*a1, Message("assistant", first), Message("user", "And river 7?"))
        straight = alone(client, 2, a2, REPLY, "chat:a-straight")
        # Two other conversations take both slots: chat:a is saved, its slot given away.
        for i, question in enumerate(QUESTIONS[:2]):
            alone(client, 10 + i, (Message("user", question * 6),), REPLY, f"chat:other{i}")
        events = list(client.generate(GenerationRequest(20, a2, REPLY, "chat:a")))
        stats = next(e.stats for e in events if isinstance(e, p.ReplyStats))
        assert stats.cache_source in ("ram", "live", "slot") and stats.cached_tokens > 300
        assert "".join(e.text for e in events if isinstance(e, p.Delta)) == straight
    finally:
        client.close()


def test_a_load_is_refused_when_its_slots_cannot_fit(bundled_model: Path,
                                                     tmp_path: Path) -> None:
    shape = fit.shape_from_header(read_header(bundled_model))
    memory = fit.system_memory()
    # The largest context one slot can have, then as many slots of it as the most there are.
    n_ctx = fit.largest_context(shape, "f16", memory, 1 << 20) // 2
    assert fit.refusal(shape, n_ctx, "f16", memory, allow_beyond_trained=True) is None
    client = EngineClient(log_path=tmp_path / "engine.log")
    progress: list[float] = []
    try:
        with pytest.raises(LoadRefused) as refused:
            client.load(LoadParams(str(bundled_model), n_ctx=n_ctx, n_slots=16,
                                   allow_beyond_trained=True, kv_per_reply=True),
                        on_progress=progress.append)
        refusal = refused.value.refusal
        assert refusal.reason == "memory" and "16 replies at once" in refusal.message
        assert 1 <= refusal.largest_slots < 16 and refusal.largest_context < n_ctx
        assert progress == []  # nothing was read: the planner refused it first
        assert client.alive
    finally:
        client.close()
