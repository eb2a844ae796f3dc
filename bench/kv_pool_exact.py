"""What the shared KV pool changes in greedy replies (docs/memory.md's table), on the bundled
model: the same request replayed at once; four prompts alone, the four at once, and the four
alone again after that. Prints one line per check.

    PYTHONPATH=app:. .venv/bin/python bench/kv_pool_exact.py FLASH POOL KV_TYPE
    (POOL 0: a KV cache per reply, --kv-per-reply: `0 0 f16`; `1 16384 f16`: a pool of
    16,384 tokens, what --kv-pool 16384 does; `1 4096 f16`: the default at this context)
"""

from __future__ import annotations

import sys
import tempfile
import threading
from pathlib import Path

from inglenook import paths
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient

GREEDY = SamplingParams(temperature=0.0, seed=42, repeat_penalty=1.0)
QUESTION = (Message("user", "What is the capital of France?"),)
PROMPTS = [(Message("user", text),) for text in (
    "Write a poem about the sea.", "Explain recursion to a child.",
    "List five fruits and their colours.", "What is the capital of France?")]


def ask(client: EngineClient, messages: tuple[Message, ...], rid: int, tokens: int) -> str:
    events = client.generate(GenerationRequest(rid, messages, GREEDY.replace(max_tokens=tokens)))
    return "".join(e.text for e in events if isinstance(e, p.Delta))


def main() -> int:
    flash, pool, kv_type = sys.argv[1] == "1", int(sys.argv[2]), sys.argv[3]
    model = paths.bundled_model_path()
    assert model is not None
    client = EngineClient(log_path=Path(tempfile.mkdtemp()) / "engine.log")
    try:
        client.load(LoadParams(str(model), n_ctx=4096, n_slots=4, flash_attn=flash,
                               kv_pool=pool, kv_per_reply=not pool,
                               kv_cache_type=kv_type))
        print(f"flash {flash}, pool {pool}, {kv_type}: replayed at once equal:",
              ask(client, QUESTION, 1, 40) == ask(client, QUESTION, 2, 40))
        alone = [ask(client, m, 10 + i, 60) for i, m in enumerate(PROMPTS)]
        together: list[str] = [""] * 4

        def run(i: int) -> None:
            together[i] = ask(client, PROMPTS[i], 20 + i, 60)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        again = [ask(client, m, 30 + i, 60) for i, m in enumerate(PROMPTS)]
        for name, replies in (("4 at once", together), ("alone again", again)):
            equal = sum(a == b for a, b in zip(alone, replies, strict=True))
            print(f"  {name} = alone: {equal} of 4")
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
