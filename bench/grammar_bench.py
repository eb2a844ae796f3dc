"""What a reply format costs (issue 22), printed as one JSON line (run by bench/run.py):

  grammar_decode_tok_s      decode speed of a reply constrained to a JSON schema
  plain_decode_tok_s        the same prompt and sampling, unconstrained
  grammar_over_plain        the first ÷ the second (goal ≥ 0.8)

The engine with the bundled model, seeded sampling at temperature 1 (greedy JSON ends too
soon to time), prompt lookup off; medians of several replies. `--quick`: one short reply each.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

from common import bundled_model, log
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from inglenook.engine.host import physical_cores

# Long enough to time: a list of short notes the model keeps writing until max_tokens.
SCHEMA = {"type": "object", "required": ["notes"], "additionalProperties": False,
          "properties": {"notes": {"type": "array", "items": {"type": "string",
                                                               "maxLength": 40}}}}
ASK = (Message("user", "Write many short notes about a lighthouse keeper and a storm."),)


def rate(client: EngineClient, rid: int, sampling: SamplingParams, reply_format: str) -> float:
    stats = None
    for event in client.generate(GenerationRequest(rid, ASK, sampling,
                                                   reply_format=reply_format)):
        if isinstance(event, p.ReplyStats):
            stats = event.stats
    assert stats is not None
    return stats.decode_tok_s


def main() -> int:
    quick = "--quick" in sys.argv
    model = bundled_model()
    if model is None:
        return 1
    runs, tokens = (1, 8) if quick else (5, 160)
    threads = physical_cores()
    with tempfile.TemporaryDirectory() as tmp:
        client = EngineClient(log_path=Path(tmp) / "engine.log")
        try:
            client.load(LoadParams(str(model), n_ctx=2048, n_threads=threads,
                                   n_threads_batch=threads, prompt_lookup=False))
            log(f"{runs} replies of {tokens} tokens with a JSON schema and without…")
            shaped, plain = [], []
            for i in range(runs):
                sampling = SamplingParams(temperature=1.0, seed=i, max_tokens=tokens)
                shaped.append(rate(client, 2 * i + 1, sampling, json.dumps(SCHEMA)))
                plain.append(rate(client, 2 * i + 2, sampling, ""))
        finally:
            client.close()
    g, f = statistics.median(shaped), statistics.median(plain)
    print(json.dumps({"grammar_decode_tok_s": round(g, 1), "plain_decode_tok_s": round(f, 1),
                      "grammar_over_plain": round(g / f, 3) if f else 0.0}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
