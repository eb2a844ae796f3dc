"""What rendering chat templates in a child process costs (issue 17), as one JSON line; run by
bench/run.py. The same prompts rendered by render_prompt in this process and by the engine's
TemplateRenderer (a long-lived child, one pipe round trip a prompt), with SmolLM2's template
and ChatML's control strings, medians:

  template_render_12_turns_ms       in this process, a 12-turn chat (~6 KB)
  template_isolated_12_turns_ms     the same through the child
  template_render_400_turns_ms      in this process, a 400-turn chat (~400 KB)
  template_isolated_400_turns_ms    the same through the child
  template_child_start_ms           a new child: Python, Jinja, the template compiled
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable

from inglenook.core.messages import Message
from inglenook.core.template import ChatTemplate, ControlStrings, render_prompt
from inglenook.engine.template_process import TemplateRenderer

SMOLLM2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CONTROL = ControlStrings(["<|im_start|>", "<|im_end|>", "<|endoftext|>"])


def chat(turns: int, words: int) -> list[Message]:
    return [Message("user" if i % 2 == 0 else "assistant", f"turn {i} " + "word " * words)
            for i in range(turns)]


def median_ms(run: Callable[[], object], times: int) -> float:
    run()  # warm: caches, the child's first frame
    spent = []
    for _ in range(times):
        start = time.perf_counter()
        run()
        spent.append(time.perf_counter() - start)
    return round(statistics.median(spent) * 1000, 3)


def main() -> int:
    quick = "--quick" in sys.argv
    times = 3 if quick else 50
    here = ChatTemplate(SMOLLM2)
    starts = []
    for _ in range(2 if quick else 10):
        start = time.perf_counter()
        TemplateRenderer(SMOLLM2).close()
        starts.append(time.perf_counter() - start)
    there = TemplateRenderer(SMOLLM2)
    results: dict[str, float] = {
        "template_child_start_ms": round(statistics.median(starts) * 1000, 1)}
    try:
        for turns, words in ((12, 100), (400, 200)):
            messages = chat(turns, words)
            results[f"template_render_{turns}_turns_ms"] = median_ms(
                lambda m=messages: render_prompt(here, m, control=CONTROL), times)
            results[f"template_isolated_{turns}_turns_ms"] = median_ms(
                lambda m=messages: there.render_prompt(m, control=CONTROL), times)
    finally:
        there.close()
    for key, value in results.items():
        print(f"{key:<34} {value}", file=sys.stderr)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
