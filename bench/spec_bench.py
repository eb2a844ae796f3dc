"""Speculative decoding and a smaller copy of a model (issue 12), printed as one JSON line.

  spec_prompt_lookup_code_speedup  decode tok/s with prompt lookup ÷ without, asked to rewrite a
                                   150-line function with one change (the model copies it out)
  spec_prompt_lookup_prose_ratio   the same on free prose (a story)
  spec_prompt_lookup_*_acceptance  the share of prompt lookup's guesses accepted
  spec_draft_speedup               decode tok/s with a draft model ÷ without, on the prose; the
  spec_draft_code_speedup          only pair here: an F16 copy of the bundled SmolLM2-135M as
  spec_acceptance_rate             the model, the bundled Q4_1 file as its draft (its guesses'
                                   acceptance on prose)
  quantize_q8_to_q4km_s            llama_model_quantize of a Q8_0 copy of the bundled model to
                                   Q4_K_M, in a host of its own (quantize_total_s: with the check
                                   that it loads and answers)
  quantize_q4km_over_q8_size       the Q4_K_M copy's size ÷ the Q8_0's

Greedy; two engine hosts, one speculating and one not, both with the default load settings
(flash attention off, as a user has them), asked in turn; each ratio is of the best round of
each (on a shared machine a neighbour's burst stalls llama.cpp's spinning threads for
whole seconds, so the best round is the one that ran alone). Decode speed is the engine's own
figure (first token to last). A 135M model on a CPU is
the worst case for speculation: checking a batch costs it much more than one token, relative to
a large model whose decoding waits on memory. `--quick`: tiny counts; its figures mean nothing.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from common import bundled_model, log
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.replies import Stats
from inglenook.core.sampling import SamplingParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from inglenook.engine.quantize import Quantizer, plan

PROSE = "Write a long, detailed story about a lighthouse keeper and a storm."
FIELDS = [("width", "int", "positive"), ("height", "int", "positive"), ("label", "str", "short"),
          ("ratio", "float", "fraction"), ("owner", "str", "known"), ("count", "int", "small"),
          ("weight", "float", "positive"), ("colour", "str", "named"), ("depth", "int", "even"),
          ("score", "float", "fraction"), ("region", "str", "known"), ("level", "int", "small"),
          ("speed", "float", "positive"), ("title", "str", "short"), ("batch", "int", "even"),
          ("price", "float", "positive"), ("status", "str", "named"), ("rank", "int", "small")]


def function_150() -> str:
    """A 150-line function with a block per field, each a little different."""
    lines = ["def validate_record(record, schema, errors):",
             '    """Check every field of a record against the schema; collect errors."""',
             "    cleaned = {}"]
    for name, kind, rule in FIELDS:
        lines += [f"    # {name}: {kind}, {rule}",
                  f"    raw_{name} = record.get('{name}')",
                  f"    if raw_{name} is None:",
                  f"        errors.append('{name} is missing')",
                  f"    elif not schema.is_{rule}(raw_{name}):",
                  f"        errors.append('{name} must be {rule}')",
                  "    else:",
                  f"        cleaned['{name}'] = {kind}(raw_{name})"]
    lines += ["    if errors:", "        return None", "    return cleaned"]
    assert len(lines) == 150
    return "\n".join(lines)


def code_prompt(lines: int = 150) -> str:
    code = "\n".join(function_150().splitlines()[:lines])
    return (f"```python\n{code}\n```\n\nRewrite this function with `cleaned` renamed to "
            "`result`. Reply with the complete code only.")


CODE = code_prompt()


def ask(client: EngineClient, rid: int, prompt: str, sampling: SamplingParams) -> Stats:
    stats = None
    for event in client.generate(GenerationRequest(rid, (Message("user", prompt),), sampling)):
        if isinstance(event, p.ReplyStats):
            stats = event.stats
        elif isinstance(event, p.Finished) and event.finish.reason == "error":
            raise RuntimeError(event.finish.message)
    assert stats is not None
    return stats


def compare(plain: EngineClient, fast: EngineClient, prompt: str, tokens: int,
            rounds: int) -> tuple[float, float, float, float]:
    """The ratio of the best decode speeds, acceptance, and the best tok/s of each."""
    sampling = SamplingParams(temperature=0.0, seed=1, repeat_penalty=1.0, max_tokens=tokens)
    base, spec, drafted, accepted = [], [], 0, 0
    for i in range(rounds):
        a = ask(plain, 2 * i + 1, prompt, sampling)
        b = ask(fast, 2 * i + 2, prompt, sampling)
        base.append(a.decode_tok_s)
        spec.append(b.decode_tok_s)
        drafted, accepted = drafted + b.drafted_tokens, accepted + b.accepted_tokens
        log(f"    {a.decode_tok_s:6.1f} → {b.decode_tok_s:6.1f} tok/s "
            f"({b.generated_tokens} tokens, {b.accepted_tokens}/{b.drafted_tokens} accepted)")
    return (max(spec) / max(base), accepted / drafted if drafted else 0.0, max(base),
            max(spec))


def clients(tmp: Path, plain: LoadParams, fast: LoadParams) -> tuple[EngineClient, EngineClient]:
    a, b = EngineClient(log_path=tmp / "plain.log"), EngineClient(log_path=tmp / "fast.log")
    a.load(plain)
    b.load(fast)
    return a, b


def prompt_lookup(tmp: Path, model: str, quick: bool) -> dict[str, float]:
    params = LoadParams(model, n_ctx=4096, prompt_lookup=False)
    plain, fast = clients(tmp, params, params.replace(prompt_lookup=True))
    rounds = 1 if quick else 3
    try:
        log("  code edit (prompt lookup ÷ plain):")
        code, code_rate, base, spec = compare(plain, fast, code_prompt(10 if quick else 150),
                                              24 if quick else 400, rounds)
        log("  prose:")
        prose, prose_rate, p_base, p_spec = compare(plain, fast, PROSE, 24 if quick else 256,
                                                    rounds)
    finally:
        plain.close()
        fast.close()
    return {"spec_prompt_lookup_code_speedup": round(code, 3),
            "spec_prompt_lookup_prose_ratio": round(prose, 3),
            "spec_prompt_lookup_code_acceptance": round(code_rate, 3),
            "spec_prompt_lookup_prose_acceptance": round(prose_rate, 3),
            "spec_code_tok_s_plain": round(base, 1), "spec_code_tok_s_lookup": round(spec, 1),
            "spec_prose_tok_s_plain": round(p_base, 1),
            "spec_prose_tok_s_lookup": round(p_spec, 1)}


def draft_model(tmp: Path, target: Path, draft: str, quick: bool) -> dict[str, float]:
    params = LoadParams(str(target), n_ctx=4096, prompt_lookup=False)
    plain, fast = clients(tmp, params, params.replace(draft_model_path=draft))
    rounds = 1 if quick else 2
    try:
        log(f"  prose ({target.name} with {Path(draft).name} as its draft ÷ alone):")
        prose, rate, base, spec = compare(plain, fast, PROSE, 24 if quick else 192, rounds)
        log("  code edit:")
        code, code_rate, _, _ = compare(plain, fast, code_prompt(10 if quick else 150),
                                        24 if quick else 192, rounds)
    finally:
        plain.close()
        fast.close()
    return {"spec_draft_speedup": round(prose, 3), "spec_acceptance_rate": round(rate, 3),
            "spec_draft_code_speedup": round(code, 3),
            "spec_draft_code_acceptance": round(code_rate, 3),
            "spec_draft_tok_s_plain": round(base, 1), "spec_draft_tok_s": round(spec, 1)}


def make_copy(source: Path, kind: str, folder: Path) -> tuple[Path, float, float]:
    """A checked copy; llama.cpp's quantizing seconds and the whole job's."""
    import time

    started = time.perf_counter()
    job = Quantizer(plan(source, kind, allow_requantize=True, models_dir=folder))
    output = job.run()
    return output, job.seconds, time.perf_counter() - started


def main() -> int:
    quick = "--quick" in sys.argv
    model = bundled_model()
    if model is None:
        return 1
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        os.environ["INGLENOOK_HOME"] = str(tmp / "home")
        log("Prompt lookup (bundled model)…")
        results.update(prompt_lookup(tmp, str(model), quick))
        log("Quantizing: the bundled model to Q8_0 (setup), then Q8_0 → Q4_K_M…")
        q8, _, _ = make_copy(model, "Q8_0", tmp)
        q4, seconds, total = make_copy(q8, "Q4_K_M", tmp)
        ratio = q4.stat().st_size / q8.stat().st_size
        log(f"  {seconds:.2f} s ({total:.2f} s with the check); Q4_K_M is {ratio:.0%} of Q8_0")
        results.update({"quantize_q8_to_q4km_s": round(seconds, 2),
                        "quantize_total_s": round(total, 2),
                        "quantize_q4km_over_q8_size": round(ratio, 3)})
        log("Draft model…")
        # --quick checks that the path runs: the Q8_0 copy made above is the target (an F16
        # copy is one more conversion and a load twice the size, for figures that mean nothing).
        target = q8 if quick else make_copy(model, "F16", tmp)[0]
        results.update(draft_model(tmp, target, str(model), quick))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
