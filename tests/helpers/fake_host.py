"""A fake engine host: the real protocol, scripted replies, no llama.cpp.

Run as `python -m tests.helpers.fake_host SCRIPT.json`. The script is read again for every
request, so a test can change it between replies:

    {"replies": [{"match": "colour", "text": "Blue.", "token_ms": 0}, ...],
     "default": {"text": "Echo: {last}", "token_ms": 5},
     "load_ms": 0, "n_ctx": 2048}

The first reply whose `match` occurs in the last user message is used; `{last}` is replaced by
that message. After tool results (the last message is a `tool` one), only replies with
`"role": "tool"` are matched, against that result. `{tools}` is replaced by the names of the
tools the request offers (comma-separated) and `{thinking}` by its enable_thinking. A reply
streams one word per token, `token_ms` apart, or exactly the deltas in `"pieces"` (markup
split where a test wants it). Special replies:
`"crash": true` exits the process mid-reply; `"error": "..."` finishes with that error;
`"hang_ms": N` ignores cancels for N ms (the stop watchdog). `"vision": N` (read at load) makes
the model one that sees images, N positions for each started 512 × 512 tile of an image (as a
projector that tiles counts them: CountImages); `{images}` is the request's image count, and
a model without vision refuses a request with images, as the real host does. Cancel works as
in the real host.
Tune answers at once with fixed figures; Quantize "quantizes" by copying the source with the
file type asked for written into its header.

The model's traits (reasoning format, switches, tool-call format) come from its chat template
(the file's, or the override) exactly as the real host works them out (engine/model_traits.py).
"""

from __future__ import annotations

import json
import os
import queue
import re
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from inglenook.core.builtin_templates import choose, detect
from inglenook.core.load import ModelInfo, choose_context
from inglenook.core.reasoning import ReasoningCount
from inglenook.core.replies import Finish, Stats
from inglenook.core.template import TemplateError, for_model
from inglenook.engine import protocol as p
from inglenook.engine.kv_states import forget_kept_states
from inglenook.engine.model_traits import template_traits
from inglenook.models.gguf import GGUFError, read_header


class FakeHost:
    def __init__(self, out: IO[bytes], script: Path) -> None:
        self.out = out
        self.script = script
        self.model: ModelInfo | None = None
        self.cancelled: set[int] = set()
        self.lock = threading.Lock()

    def send(self, message: Any) -> None:
        p.write_frame(self.out, message)

    def read_script(self) -> dict:
        try:
            return json.loads(self.script.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def load(self, params: Any) -> None:
        script = self.read_script()
        try:
            header = read_header(params.model_path)
        except GGUFError as exc:
            self.send(p.LoadFailed(str(exc)))
            return
        for step in range(1, 5):
            time.sleep(script.get("load_ms", 0) / 4000)
            self.send(p.LoadProgress(step / 4))
        n_ctx = script.get("n_ctx") or choose_context(params.n_ctx, header.context_length)
        try:
            choice = choose(header.chat_template, params.chat_template, params.template_name,
                            lambda: detect(CHATML_TOKENS.__contains__))  # what it speaks
            template = for_model(choice, "", "")
        except TemplateError as exc:
            self.send(p.LoadFailed(f"This model's chat template cannot be used. {exc}"))
            return
        traits, tool_format = template_traits(template)
        self.model = ModelInfo(
            path=params.model_path, name=Path(params.model_path).stem,
            architecture=header.architecture, size_bytes=header.file_size, n_ctx=n_ctx,
            n_ctx_train=header.context_length, n_threads=1, n_gpu_layers=0,
            n_threads_batch=params.n_threads_batch or 1, n_batch=params.n_batch,
            gpu_offload_supported=False, flash_attn=params.flash_attn,
            kv_cache_type=params.kv_cache_type,
            template_source=choice.kind, template_name=choice.label,
            template_reason=choice.reason,
            quantization=header.quantization, traits=traits, tool_format=tool_format,
            vision=bool(script.get("vision")), image_tokens=int(script.get("vision") or 0),
            projector=(params.mmproj_path or f"fake-mmproj-{script['vision']}.gguf")
            if script.get("vision") else "")
        self.send(p.Loaded(self.model))

    def count_images(self, request: p.CountImages) -> None:
        model = self.model
        if model is None or not model.vision:
            self.send(p.ImagesCounted(request.request_id, error="The loaded model cannot see "
                                      "images." if model else "No model is loaded."))
            return
        tiles = [-(-w // 512) * -(-h // 512) for w, h in request.sizes]
        self.send(p.ImagesCounted(request.request_id,
                                  tuple(model.image_tokens * n for n in tiles), model.projector))

    def tune(self, request: p.Tune) -> None:
        if self.model is None:
            self.send(p.TuneResult(request.request_id, error="No model is loaded."))
            return
        with self.lock:
            stopped = request.request_id in self.cancelled
        trials = (p.TuneTrial("decode", 1, 1, 80.0), p.TuneTrial("prompt", 1, 512, 900.0),
                  p.TuneTrial("decode", 2, 1, 100.0), p.TuneTrial("prompt", 2, 256, 1000.0))
        if not stopped:
            for done in range(1, len(trials) + 1):
                self.send(p.TuneProgress(request.request_id, done, len(trials)))
        self.send(p.TuneResult(request.request_id, cancelled=True) if stopped else p.TuneResult(
            request.request_id, 2, 2, 256, 100.0, 1000.0, trials, applied=request.apply,
            before_n_threads=self.model.n_threads, before_n_threads_batch=1,
            before_n_batch=512, before_decode_tok_s=80.0, before_prompt_tok_s=900.0))

    def quantize(self, request: p.Quantize) -> None:
        from tests.gguf_tools import rewrite_metadata

        for done in range(1, 4):
            self.send(p.QuantizeProgress(done, 3, done / 3, f"tensor.{done}"))
        try:
            rewrite_metadata(request.source, request.output,
                             {"general.file_type": request.ftype})
        except (OSError, ValueError) as exc:
            self.send(p.Quantized(request.output, 0.0, str(exc)))
            return
        self.send(p.Quantized(request.output, 0.01))

    def inspect(self, request: Any) -> None:
        rid = request.request_id
        if self.model is None:
            self.send(p.PromptView(rid, error="No model is loaded."))
            return
        tokens = _chatml_tokens(request.messages)
        self.send(p.PromptView(rid, "".join(t.piece for t in tokens), tuple(tokens),
                               self.model.n_ctx))

    def generate(self, request: Any) -> None:
        rid = request.request_id
        self.send(p.Started(rid))
        if self.model is None:
            self.send(p.Finished(rid, Finish("error", "No model is loaded.")))
            return
        script = self.read_script()
        role = "tool" if request.messages and request.messages[-1].role == "tool" else "user"
        last = next((m.content for m in reversed(request.messages) if m.role == role), "")
        reply = next((r for r in script.get("replies", []) if r.get("role", "user") == role
                      and r.get("match", "") in last),
                     script.get("default", {"text": "Echo: {last}", "token_ms": 2}))
        if reply.get("error"):
            self.send(p.Finished(rid, Finish("error", reply["error"])))
            return
        names = ",".join(t.get("function", {}).get("name", "") for t in request.tools)
        images = sum(len(m.images) for m in request.messages)
        if images and not (self.model.vision):
            self.send(p.Finished(rid, Finish("error", "This model cannot see images.")))
            return
        fill = {"{last}": last, "{tools}": names, "{thinking}": str(request.enable_thinking),
                "{images}": str(images)}
        text = reply.get("text", "")
        for key, value in fill.items():
            text = text.replace(key, value)
        if request.prefill and text.startswith(request.prefill):  # Continue: goes on from it
            text = text[len(request.prefill):]
        pieces = reply.get("pieces") or re.findall(r"\S+\s*|\s+", text) or [""]
        prompt_tokens = sum(len(m.content.split()) + 4 for m in request.messages)
        started = time.perf_counter()
        reason = "stop"
        n = 0
        hang_until = started + reply.get("hang_ms", 0) / 1000
        thought = ReasoningCount(self.model.traits.reasoning, request.enable_thinking)
        for n, piece in enumerate(pieces, start=1):
            if reply.get("crash") and n > 1:
                os._exit(3)
            time.sleep(reply.get("token_ms", 0) / 1000)
            with self.lock:
                stop = rid in self.cancelled
            if stop and time.perf_counter() >= hang_until:
                reason = "cancelled"
                n -= 1
                break
            self.send(p.Delta(rid, piece))
            thought.feed(piece)
            if request.sampling.max_tokens > 0 and n >= request.sampling.max_tokens:
                reason = "length"
                break
        elapsed = max(time.perf_counter() - started, 1e-6)
        self.send(p.ReplyStats(rid, Stats(
            prompt_tokens=prompt_tokens, cached_tokens=0, generated_tokens=n,
            ttft_s=0.001, decode_tok_s=n / elapsed, prompt_tok_s=1000.0,
            context_used=prompt_tokens + n, n_ctx=self.model.n_ctx,
            seed=request.sampling.seed if request.sampling.seed >= 0 else 1234,
            reasoning_tokens=thought.count)))
        self.send(p.Finished(rid, Finish(reason)))  # type: ignore[arg-type]
        with self.lock:
            self.cancelled.discard(rid)


CHATML_TOKENS = ("<|im_start|>", "<|im_end|>")


def _chatml_tokens(messages: Any) -> list[p.PromptToken]:
    """ChatML markup as control tokens, each word of a message as an ordinary token."""
    tokens: list[p.PromptToken] = []
    for m in messages:
        tokens.append(p.PromptToken(1, "<|im_start|>", True))
        tokens += [p.PromptToken(100 + n, w, False)
                   for n, w in enumerate(re.findall(r"\S+\s*|\s+", f"{m.role}\n{m.content}"))]
        tokens.append(p.PromptToken(2, "<|im_end|>", True))
        tokens.append(p.PromptToken(198, "\n", False))
    return [*tokens, p.PromptToken(1, "<|im_start|>", True),
            p.PromptToken(101, "assistant\n", False)]


def _read(stream: IO[bytes], host: FakeHost, inbox: queue.Queue) -> None:
    while True:
        try:
            message = p.read_frame(stream)
        except p.ProtocolError:
            message = None
        if message is None:
            inbox.put(p.Shutdown())
            return
        if isinstance(message, p.Cancel):
            with host.lock:
                host.cancelled.add(message.request_id)
        else:
            inbox.put(message)


def _embedded(request: p.Embed) -> p.Embedded:
    """Unit vectors of FAKE_DIMENSIONS from each text's hash: the same text, the same vector;
    a text of more than FAKE_MAX_CHARS is too long."""
    import base64
    import hashlib

    import numpy as np

    given = request.texts or tuple(" ".join(map(str, t)) for t in request.token_lists)
    too_long = [i for i, t in enumerate(given) if len(t) > FAKE_MAX_CHARS]
    if too_long and not request.truncate:
        return p.Embedded(request.request_id, error=f"Input {too_long[0]} is too long.",
                          refused=True)
    rows = np.array([np.frombuffer(hashlib.sha256(t[:FAKE_MAX_CHARS].encode()).digest()[
        :FAKE_DIMENSIONS], dtype=np.uint8) for t in given], dtype=np.float32) - 127.5
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return p.Embedded(request.request_id, base64.b64encode(rows.tobytes()).decode(),
                      FAKE_DIMENSIONS, tuple(max(1, len(t) // 4) for t in given),
                      tuple(too_long), "mean", False, "Not an embedding model (fake).")


FAKE_DIMENSIONS = 8
FAKE_MAX_CHARS = 1000


def main() -> int:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    host = FakeHost(out, Path(sys.argv[1]))
    inbox: queue.Queue = queue.Queue()
    threading.Thread(target=_read, args=(sys.stdin.buffer, host, inbox), daemon=True).start()
    host.send(p.Ready(os.getpid(), False, 1))
    while True:
        message = inbox.get()
        if isinstance(message, p.Shutdown):
            out.flush()
            os._exit(0)
        if isinstance(message, p.Load):
            host.load(message.params)
        elif isinstance(message, p.Unload):
            host.model = None
            host.send(p.Unloaded())
        elif isinstance(message, p.Generate):
            host.generate(message.request)
        elif isinstance(message, p.Inspect):
            host.inspect(message.request)
        elif isinstance(message, p.StateUsage):
            host.send(p.StateReport())  # keeps no conversation states
        elif isinstance(message, p.MemoryUsage):  # round figures a test can read back
            host.send(p.MemoryReport(100 << 20, 64 << 20, 8 << 20, 32 << 20, 0, 0, 300 << 20)
                      if host.model is not None else p.MemoryReport(rss_bytes=20 << 20))
        elif isinstance(message, p.Tune):
            host.tune(message)
        elif isinstance(message, p.Quantize):
            host.quantize(message)
        elif isinstance(message, p.Embed):
            host.send(_embedded(message))
        elif isinstance(message, p.CountImages):
            host.count_images(message)
        elif isinstance(message, p.DropState) and message.everything:
            forget_kept_states()  # what engines before this one kept on disk
        # Another DropState: nothing is kept, so nothing to forget.


if __name__ == "__main__":
    raise SystemExit(main())
