"""What a reply format costs (issue 22), printed as one JSON line (run by bench/run.py):

  grammar_decode_tok_s      decode speed of a reply constrained to a JSON schema
  plain_decode_tok_s        the same prompt and sampling, unconstrained
  grammar_over_plain        the first ÷ the second (goal ≥ 0.8)
  grammar_full_mask_share   of the constrained reply's tokens, the share for which the
                            likeliest candidates held too few the grammar allows, so that
                            it masked the whole vocabulary (the slow path)
  grammar_greedy_*          the same three figures greedy (temperature 0), where the model's
                            likeliest token is far more often one the grammar allows

The engine with the bundled model, seeded sampling at temperature 1, prompt lookup off;
medians of several replies. `--quick`: one short reply each.
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


def rate(client: EngineClient, rid: int, sampling: SamplingParams,
         reply_format: str) -> tuple[float, float]:
    """Decode speed, and the share of tokens that needed a whole-vocabulary mask."""
    stats = None
    for event in client.generate(GenerationRequest(rid, ASK, sampling,
                                                   reply_format=reply_format)):
        if isinstance(event, p.ReplyStats):
            stats = event.stats
    assert stats is not None
    return stats.decode_tok_s, stats.grammar_full_masks / max(stats.generated_tokens, 1)


def compare(client: EngineClient, runs: int, tokens: int, temperature: float,
            prefix: str) -> dict[str, float]:
    shaped, plain, masked = [], [], []
    for i in range(runs):  # interleaved, so drift in machine speed hits both alike
        sampling = SamplingParams(temperature=temperature, seed=i, max_tokens=tokens,
                                  repeat_penalty=1.0 if temperature == 0 else 1.1)
        speed, share = rate(client, 2 * i + 1, sampling, json.dumps(SCHEMA))
        shaped.append(speed)
        masked.append(share)
        plain.append(rate(client, 2 * i + 2, sampling, "")[0])
    g, f = statistics.median(shaped), statistics.median(plain)
    return {f"{prefix}decode_tok_s": round(g, 1), f"plain_{prefix[8:]}decode_tok_s": round(f, 1),
            f"{prefix}over_plain": round(g / f, 3) if f else 0.0,
            f"{prefix}full_mask_share": round(statistics.median(masked), 3)}


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
            results = compare(client, runs, tokens, 1.0, "grammar_")
            log("…and greedy")
            results.update(compare(client, runs, tokens, 0.0, "grammar_greedy_"))
        finally:
            client.close()
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
