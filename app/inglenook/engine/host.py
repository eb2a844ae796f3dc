"""The engine process: owns the llama_cpp.Llama object. The ONLY module that imports llama_cpp.

Run as `python -m inglenook.engine.host`. Requests arrive on stdin, events leave on the process's
original stdout; fd 1 is then pointed at stderr so that anything llama.cpp prints cannot corrupt
the protocol. A reader thread takes Cancel requests as they arrive (the main thread is busy
generating), so a stop lands within one token, and mid-prompt through llama.cpp's abort callback.

Prompts are tokenized so that only the chat template's markup can produce control tokens (see
core/template.py): markup is read with special tokens on, message text with them off, and the
plain text between two control tokens is tokenized as one piece, exactly as llama.cpp reads a
whole prompt, so an ordinary conversation gets the same tokens as before.

The KV cache is kept per conversation (engine/kv_reuse.py, engine/kv_states.py): this module
hands them the llama.cpp calls as a `_LlamaMemory`, so that it stays the only importer of
llama_cpp.

A model is loaded only after the fit planner's estimate at the chosen context (weights, KV cache,
compute buffers) was checked against free memory: llama.cpp would otherwise try, and a context of
10^9 grows the process until the OOM killer ends it.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import dataclasses
import os
import queue
import random
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import IO, Any

import llama_cpp
import numpy as np
import psutil

from inglenook import paths
from inglenook.core.context import ContextOverflow, Fit, fit_messages, policy_of, reply_reserve
from inglenook.core.load import (
    LOOKUP_MIN_NGRAM,
    LoadParams,
    LoadParamsError,
    ModelInfo,
    choose_context,
)
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.replies import Finish, FinishReason, Stats
from inglenook.core.streaming import StopMatcher, Utf8Stream
from inglenook.core.template import (
    ControlStrings,
    RenderedPrompt,
    TemplateContext,
    TemplateError,
    defuse,
)
from inglenook.engine import protocol as p
from inglenook.engine.kv_reuse import ConversationStates, KvMemory
from inglenook.engine.kv_states import StateCache, common_prefix, count, pack
from inglenook.engine.model_traits import stream_markers, template_traits
from inglenook.engine.speculative import (
    MAX_VOCAB_DIFFERENCE,
    DraftLength,
    PromptLookup,
    Proposer,
    Tally,
    TokenHistory,
    decode,
    draft_header_mismatch,
)
from inglenook.engine.template_process import TemplateRenderer
from inglenook.engine.tune import tune
from inglenook.models import fit
from inglenook.models.gguf import GGUFError, GGUFHeader, read_header

# Deltas are coalesced so the window's process wakes ~60 times a second, not once per token:
# on a 2-core machine every wake-up competes with llama.cpp's threads.
DELTA_BATCH_S = 0.015
KV_TYPES = {"f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0,
            "q4_0": llama_cpp.GGML_TYPE_Q4_0}
MIB = 1024 * 1024
MAX_STATE_BUDGET = 8 * 1024 * MIB  # the automatic budgets: a quarter of what is free, this at most
PREFIX_MIN_CHARS = 600  # a system prompt shorter than this cannot be MIN_PREFIX_TOKENS long


def physical_cores() -> int:
    try:
        import psutil

        return psutil.cpu_count(logical=False) or os.cpu_count() or 1
    except ImportError:  # pragma: no cover - psutil is a dependency
        return os.cpu_count() or 1


def logical_cores() -> int:
    """The CPUs this process may run on (hyperthreads included)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def gpu_memory() -> tuple[int, int]:
    """Free and total memory of the GPUs ggml can offload to: (0, 0) on a CPU-only build.
    Read through ggml's device registry, which libllama links; any failure means unknown."""
    try:
        lib = llama_cpp.llama_cpp._lib
        lib.ggml_backend_dev_get.restype = ctypes.c_void_p
        lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
        lib.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
        lib.ggml_backend_dev_memory.argtypes = [
            ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
        free_total = [0, 0]
        for i in range(lib.ggml_backend_dev_count()):
            device = lib.ggml_backend_dev_get(i)
            if lib.ggml_backend_dev_type(device) not in _GPU_DEVICE_TYPES:
                continue
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            lib.ggml_backend_dev_memory(device, ctypes.byref(free), ctypes.byref(total))
            free_total[0] += free.value
            free_total[1] += total.value
        return free_total[0], free_total[1]
    except (AttributeError, OSError, ValueError):
        return 0, 0


_GPU_DEVICE_TYPES = (1, 2)  # ggml_backend_dev_type: CPU=0, GPU=1, IGPU=2, ACCEL=3
# Tokens that plain text must never produce: llama.cpp reads them only with special tokens on.
_CONTROL = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
_USER_DEFINED = llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
_LSTRIP, _RSTRIP = llama_cpp.LLAMA_TOKEN_ATTR_LSTRIP, llama_cpp.LLAMA_TOKEN_ATTR_RSTRIP
_C_SPACE = b" \t\n\v\f\r"  # what C's isspace() strips next to an lstrip/rstrip token


class Session:
    """A loaded model, its KV cache and the states of conversations it keeps, and what guesses
    tokens ahead for it (`proposer`, at most `most` tokens at a time; None: nothing).

    `markers`: texts the window reads replies by (reasoning channels, tool-call tags). Where
    the model writes one as a control token, which plain detokenizing drops, its text is kept
    in the reply; prompts still read such text from markup only (tokenize_prompt)."""

    def __init__(self, llm: Any, template: TemplateRenderer, info: ModelInfo,
                 cache: StateCache, proposer: Proposer | None = None, most: int = 0,
                 draft: _DraftModel | None = None, markers: Collection[str] = ()) -> None:
        self.llm = llm
        self.template = template
        self.info = info
        self.proposer, self.most, self.draft = proposer, most, draft
        self.states = ConversationStates(_LlamaMemory(llm), cache)
        self.vocab = llm._model.vocab
        self._pieces: dict[int, bytes] = {}
        self._system_probes: dict[str, bytes] = {}
        self._add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))
        self._bos = llm.token_bos()
        self._markup, self.control = self._control_tokens()
        for token, (raw, attr) in self._markup.items():
            if attr & _CONTROL and raw.decode("utf-8") in markers:
                self._pieces[token] = self.piece(token, special=True)  # what piece(token) gives

    def _control_tokens(self) -> tuple[dict[int, tuple[bytes, int]], ControlStrings]:
        """The tokens only markup may produce ({id: (text, attributes)}) and their texts.

        Control and unknown tokens, plus the user-defined tokens that the template writes:
        llama.cpp reads user-defined tokens even in plain text, and some models mark markup
        that way (gpt-oss's `<|start|>`, `<|message|>`, `<|channel|>`)."""
        markup: dict[int, tuple[bytes, int]] = {}
        every, in_plain_text = [], []
        for token in range(llama_cpp.llama_vocab_n_tokens(self.vocab)):
            attr = int(llama_cpp.llama_vocab_get_attr(self.vocab, token))
            if not attr & (_CONTROL | _USER_DEFINED):
                continue
            raw = llama_cpp.llama_vocab_get_text(self.vocab, token) or b""
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue  # cannot occur in text, so nothing to find or defuse
            if not text:
                continue
            if attr & _CONTROL:
                every.append(text)
            elif text in self.template.source:
                every.append(text)
                in_plain_text.append(text)
            else:
                continue
            markup[token] = (raw, attr)
        return markup, ControlStrings(every, in_plain_text)

    def piece(self, token: int, special: bool = False) -> bytes:
        cached = self._pieces.get(token) if not special else None
        if cached is not None:
            return cached
        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, size, 0, special)
            if n >= 0:
                break
            size = -n
        data = buf.raw[:n]
        if not special:
            self._pieces[token] = data
        return data

    def render(self, messages: Sequence[Message],
               context: TemplateContext | None = None) -> RenderedPrompt:
        return self.template.render_prompt(messages, control=self.control, context=context)

    def tokenize(self, messages: Sequence[Message]) -> list[int]:
        return self.tokenize_prompt(self.render(messages))

    def tokenize_prompt(self, prompt: RenderedPrompt) -> list[int]:
        """Markup is read with special tokens on; each control token found there splits the
        prompt, and the plain text between two of them (markup and message text together) is
        tokenized with special tokens off, as one piece: llama.cpp tokenizes each stretch
        between special tokens on its own, so this gives the tokens of the whole prompt read at
        once, except that message text cannot produce control tokens."""
        tokens = [self._bos] if self._add_bos else []
        run: list[tuple[bytes, bool]] = []  # (text, from a message) since the last control token
        before = 0  # attributes of that control token
        for segment in prompt.segments:
            data = segment.text.encode("utf-8", errors="replace")
            if segment.from_message:
                run.append((data, True))
                continue
            pos = 0
            for token in self.llm.tokenize(data, add_bos=False, special=True):
                found = self._markup.get(token)
                at = data.find(found[0], pos) if found else -1
                if found is None or at < 0:
                    continue  # plain text; a control token not found as text: left to _plain
                run.append((data[pos:at], False))
                tokens += self._plain(run, before, found[1])
                tokens.append(token)
                run, before, pos = [], found[1], at + len(found[0])
            run.append((data[pos:], False))
        tokens += self._plain(run, before, 0)
        # Templates that write the BOS text themselves would otherwise give two BOS tokens.
        if len(tokens) > 1 and tokens[0] == tokens[1] == self._bos:
            tokens = tokens[1:]
        return tokens

    def _plain(self, run: list[tuple[bytes, bool]], before: int, after: int,
               again: bool = True) -> list[int]:
        text = b"".join(data for data, _ in run)
        if before & _RSTRIP:  # llama.cpp drops the whitespace these tokens say to
            text = text.lstrip(_C_SPACE)
        if after & _LSTRIP:
            text = text.rstrip(_C_SPACE)
        if not text:
            return []
        tokens = self.llm.tokenize(text, add_bos=False, special=False)
        if again and any(from_message for _, from_message in run) and any(
                t in self._markup for t in tokens):
            # Plain text merged into a control token (a vocabulary whose merges can spell one):
            # read it again with the control strings in message text defused.
            run = [(defuse(d.decode("utf-8", errors="replace"), self.control.every).encode()
                    if m else d, m) for d, m in run]
            return self._plain(run, before, after, again=False)
        return tokens

    def system_prefix(self, messages: Sequence[Message], tokens: list[int]) -> int:
        """How many leading tokens of a prompt are its system prompt's (and the markup after
        it that any conversation would share); 0 for a short one, or when it cannot be told."""
        if not messages or messages[0].role != "system" or len(
                messages[0].content) < PREFIX_MIN_CHARS:
            return 0
        probe = self._system_probes.get(messages[0].content)
        if probe is None:
            try:  # a stand-in first message: some templates refuse a system prompt alone
                probe = pack(self.tokenize([messages[0], Message("user", "\u2026")]))
            except TemplateError:
                probe = b""
            if len(self._system_probes) > 32:
                self._system_probes.clear()
            self._system_probes[messages[0].content] = probe
        return common_prefix(probe, pack(tokens))

    def view(self, request_id: int, prompt: RenderedPrompt, tokens: list[int],
             fit: Fit) -> p.PromptView:
        """The prompt as the model sees it: its text and every token. A character whose bytes
        span several tokens is shown with the token that completes it, so the pieces add up to
        the text."""
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        shown = tuple(p.PromptToken(t, utf8.decode(self.piece(t, special=True)),
                                    t in self._markup) for t in tokens)
        text = "".join(t.piece for t in shown) + utf8.decode(b"", final=True)
        return p.PromptView(request_id, text, shown, n_ctx=self.llm.n_ctx(),
                            dropped_messages=fit.dropped, defused=prompt.defused,
                            dropped_start=fit.dropped_start)

    def close(self) -> None:
        self.states.reset()
        self.template.close()
        if self.draft is not None:
            self.draft.llm.close()
        self.llm.close()


class _LlamaMemory:
    """llama-cpp-python's KV cache (its one sequence, id 0) as kv_reuse.KvMemory. States are
    llama.cpp's sequence states (llama_state_seq_*): the KV cells only, ~6x faster to save and
    smaller than Llama.save_state, which also copies every logit row."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def _memory(self) -> Any:
        return llama_cpp.llama_get_memory(self.llm._ctx.ctx)

    def tokens(self) -> bytes:
        return self.llm.input_ids[: self.llm.n_tokens].tobytes()

    def keep(self, n: int) -> bool:
        ok = bool(self.llm._ctx.kv_cache_seq_rm(-1, n, -1))
        if ok:
            self.llm.n_tokens = min(self.llm.n_tokens, n)
        return ok

    def cut(self, start: int, end: int) -> bool:
        memory, llm = self._memory(), self.llm
        if not llama_cpp.llama_memory_can_shift(memory) or not llama_cpp.llama_memory_seq_rm(
                memory, 0, start, end):
            return False
        llama_cpp.llama_memory_seq_add(memory, 0, end, -1, start - end)
        n = llm.n_tokens
        llm.input_ids[start: n - (end - start)] = llm.input_ids[end:n].copy()
        llm.n_tokens = n - (end - start)
        return True

    def save(self) -> bytearray:
        self.keep(self.llm.n_tokens)  # cells past n_tokens (a stopped prompt) are not saved
        ctx = self.llm._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        data = bytearray(size)
        written = llama_cpp.llama_state_seq_get_data(
            ctx, (ctypes.c_uint8 * size).from_buffer(data), size, 0)
        del data[written:]
        return data

    def restore(self, data: bytearray, tokens: bytes) -> bool:
        memory, llm, n = self._memory(), self.llm, count(tokens)
        llama_cpp.llama_memory_clear(memory, True)
        read = llama_cpp.llama_state_seq_set_data(
            llm._ctx.ctx, (ctypes.c_uint8 * len(data)).from_buffer(data), len(data), 0)
        if read != len(data) or llama_cpp.llama_memory_seq_pos_max(memory, 0) != n - 1:
            self.clear()
            return False
        llm.input_ids[:n] = memoryview(tokens).cast("i")
        llm.n_tokens = n
        llm._requires_eval = True
        return True

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self._memory(), True)
        self.llm.n_tokens = 0


class _Target:
    """The loaded model as speculative.Target: evaluates a batch with logits at every token and
    samples with the request's sampler chain, keeping llama-cpp-python's token record (which
    the KV-state code reads) in step."""

    def __init__(self, llm: Any, sampler: Any) -> None:
        self.llm, self.sampler = llm, sampler

    def n_past(self) -> int:
        return int(self.llm.n_tokens)

    def evaluate(self, tokens: Sequence[int]) -> None:
        llm, n = self.llm, self.llm.n_tokens
        llm._ctx.kv_cache_seq_rm(-1, n, -1)  # as Llama.eval: nothing stale past n
        llm._batch.set_batch(tokens, n, True)
        llm._ctx.decode(llm._batch)
        llm.input_ids[n: n + len(tokens)] = tokens
        llm.n_tokens = n + len(tokens)

    def sample(self, index: int) -> int:
        return int(self.sampler.sample(self.llm._ctx, index))

    def keep(self, n: int) -> None:
        self.llm._ctx.kv_cache_seq_rm(-1, n, -1)
        self.llm.n_tokens = min(self.llm.n_tokens, n)


class _DraftModel:
    """A second, small model with the same vocabulary, guessing greedily while it is at least
    `p_min` sure. Its KV cache follows the reply: only what it has not seen is evaluated."""

    def __init__(self, llm: Any, p_min: float, n_vocab: int, abort_cb: Any) -> None:
        self.llm, self.p_min, self.n_vocab, self._abort_cb = llm, p_min, n_vocab, abort_cb
        self._n_vocab_draft = llm.n_vocab()

    def catch_up(self, tokens: Sequence[int], with_last: bool = False) -> bool:
        """Make the KV cache hold `tokens` but the last (which is evaluated again for fresh
        logits, `with_last`): only what it has not seen is evaluated. False when a stop
        interrupted it."""
        llm = self.llm
        seen = min(common_prefix(llm.input_ids[: llm.n_tokens].tobytes(), pack(tokens)),
                   len(tokens) - 1)
        llm._ctx.kv_cache_seq_rm(-1, seen, -1)
        llm.n_tokens = seen
        end = len(tokens) if with_last else len(tokens) - 1
        # A new prompt can take a while: a stop interrupts it. (Only then: the callback
        # costs every evaluation a little.)
        abortable = end - seen > llm.n_batch
        if abortable:
            llama_cpp.llama_set_abort_callback(llm._ctx.ctx, self._abort_cb, None)
        try:
            llm.eval(tokens[seen:end])
        except RuntimeError:
            if not abortable:
                raise
            return False
        finally:
            if abortable:
                llama_cpp.llama_set_abort_callback(llm._ctx.ctx, _NO_ABORT, None)
        return True

    def propose(self, history: TokenHistory, limit: int) -> list[int]:
        llm = self.llm
        guesses: list[int] = []
        if not self.catch_up(history.tokens, with_last=True):
            return guesses  # stopped: the reply ends before any guess is needed
        while len(guesses) < limit:
            logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1),
                                           shape=(self._n_vocab_draft,))
            token = int(logits.argmax())
            # p(token) = 1 / sum(exp(logits - max)): the draft's confidence in its guess.
            if token >= self.n_vocab or (self.p_min > 0 and float(
                    np.exp(logits - logits[token]).sum()) * self.p_min > 1.0):
                break
            guesses.append(token)
            if len(guesses) < limit:
                llm.eval([token])
        return guesses


class EngineHost:
    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._session: Session | None = None
        self._cancelled: set[int] = set()
        self._current = -1
        self._abort = threading.Event()
        self._lock = threading.Lock()
        # Kept alive for as long as a context may call it.
        self._abort_cb = llama_cpp.ggml_abort_callback(lambda _data: self._abort.is_set())

    def send(self, message: Any) -> None:
        p.write_frame(self._out, message)

    # Called from the reader thread.
    def cancel(self, request_id: int) -> None:
        with self._lock:
            if request_id == self._current:
                self._abort.set()
            elif request_id > self._current:  # not started yet; late cancels are dropped
                self._cancelled.add(request_id)

    def abort_all(self) -> None:
        self._abort.set()

    # ---- loading -------------------------------------------------------------------------
    def load(self, params: LoadParams) -> None:
        self.unload()
        started = time.perf_counter()
        try:
            params.validate()
            header = read_header(params.model_path)
            draft_header = _draft_header(params, header)
        except (LoadParamsError, GGUFError) as exc:
            self.send(p.LoadFailed(str(exc)))
            return
        supported = bool(llama_cpp.llama_supports_gpu_offload())
        n_gpu_layers = params.n_gpu_layers if supported else 0
        n_threads = params.n_threads or physical_cores()
        n_threads_batch = params.n_threads_batch or logical_cores()
        n_ctx = choose_context(params.n_ctx, header.context_length)
        refusal = _refusal(params, header, n_ctx, offload=supported and n_gpu_layers != 0,
                           draft=draft_header)
        if refusal:
            self.send(p.LoadFailed(refusal))
            return
        # Checking guesses evaluates several tokens in one batch. On a CPU, llama.cpp's attention
        # without flash attention rounds a batch's rows differently from a lone token's, which
        # can flip a near-tie and change the reply; with it they match exactly, except that an
        # f16 cache of 512 cells or more sums a lone token's attention in per-thread chunks
        # (q8_0 and q4_0 caches always match). See tests/integration/test_speculative.py.
        # Speculation does not turn flash attention on for that: on a CPU it made a long
        # chat's next prompt 30-65% slower to read (bench: ttft_turn12_over_turn1), and an
        # f16 cache is not exact past 512 cells anyway. Who wants the exact reply turns it on.
        flash = params.flash_attn
        threads = (n_threads, n_threads_batch, n_gpu_layers, flash)
        try:
            llm = self._construct(params.model_path, params, n_ctx, *threads)
        except (ValueError, RuntimeError, OSError) as exc:
            self.send(p.LoadFailed(f"llama.cpp could not load this model: {exc}"))
            return
        bos = _special_text(llm, llm.token_bos())
        eos = _special_text(llm, llm.token_eos())
        template = None
        try:
            template, source = TemplateRenderer.for_model(header.chat_template,
                                                          params.chat_template, bos, eos)
            template.render_prompt([Message("system", "s"), Message("user", "Hi")])
            proposer, most, draft = self._speculation(params, llm, n_ctx, threads)
        except (TemplateError, _DraftError) as exc:
            if template is not None:
                template.close()
            llm.close()
            self.send(p.LoadFailed(str(exc) if isinstance(exc, _DraftError) else
                                   f"This model's chat template cannot be used. {exc}"))
            return
        info = ModelInfo(
            path=params.model_path, name=Path(params.model_path).stem,
            architecture=header.architecture,
            size_bytes=header.file_size, n_ctx=llm.n_ctx(), n_ctx_train=header.context_length,
            n_threads=n_threads, n_gpu_layers=n_gpu_layers, gpu_offload_supported=supported,
            flash_attn=flash, kv_cache_type=params.kv_cache_type,
            template_source=source,  # type: ignore[arg-type]
            load_seconds=time.perf_counter() - started, quantization=header.quantization,
            n_threads_batch=n_threads_batch,
            speculation=params.speculation if proposer is not None else "",
            draft_model=Path(params.draft_model_path).stem if draft is not None else "",
        )
        ram, disk = _state_budgets(params)
        traits, tools = template_traits(template)
        info = dataclasses.replace(info, kv_state_ram_budget=ram, kv_state_disk_budget=disk,
                                   traits=traits, tool_format=tools)
        self._session = Session(llm, template, info, StateCache(ram, disk, paths.kv_state_dir),
                                proposer, most, draft, stream_markers(traits.reasoning, tools))
        self.send(p.Loaded(info))

    def _speculation(self, params: LoadParams, llm: Any, n_ctx: int,
                     threads: tuple[int, int, int, bool]
                     ) -> tuple[Proposer | None, int, _DraftModel | None]:
        """What guesses tokens for this model, and how many at most. Raises _DraftError."""
        if not params.speculation or llm._is_recurrent or llm._is_hybrid:
            return None, 0, None  # recurrent state cannot drop rejected guesses
        most = min(llm.n_batch - 1, params.draft_tokens if params.draft_model_path
                   else params.lookup_tokens)
        if most < 1:
            return None, 0, None
        if not params.draft_model_path:
            return PromptLookup(params.lookup_ngram, LOOKUP_MIN_NGRAM), most, None
        name = Path(params.draft_model_path).name
        try:
            draft_llm = self._construct(params.draft_model_path, params, n_ctx, *threads,
                                        progress=False)
        except (ValueError, RuntimeError, OSError) as exc:
            raise _DraftError(f"llama.cpp could not load the draft model {name}: {exc}") from exc
        mismatch = _vocab_mismatch(llm, draft_llm)
        if draft_llm._is_recurrent or draft_llm._is_hybrid:
            mismatch = "its recurrent state cannot drop rejected guesses."
        if mismatch:
            draft_llm.close()
            raise _DraftError(f"The draft model {name} cannot be used with this model: "
                              f"{mismatch}")
        draft = _DraftModel(draft_llm, params.draft_p_min, llm.n_vocab(), self._abort_cb)
        return draft, most, draft

    def _construct(self, path: str, params: LoadParams, n_ctx: int, n_threads: int,
                   n_threads_batch: int, n_gpu_layers: int, flash_attn: bool,
                   progress: bool = True) -> Any:
        last = [-1.0]

        def report(fraction: float, _data: object) -> bool:
            if progress and (fraction - last[0] >= 0.02 or fraction >= 1.0):
                last[0] = fraction
                self.send(p.LoadProgress(float(fraction)))
            return True

        kv_type = KV_TYPES[params.kv_cache_type]
        with _progress_callback(report):
            return llama_cpp.Llama(
                model_path=path, n_ctx=n_ctx, n_batch=params.n_batch,
                n_ubatch=params.n_batch, n_threads=n_threads, n_threads_batch=n_threads_batch,
                n_gpu_layers=n_gpu_layers, flash_attn=flash_attn, type_k=kv_type,
                type_v=kv_type, use_mmap=params.use_mmap, use_mlock=params.use_mlock,
                verbose=False,
            )

    def unload(self) -> None:
        """Also forgets every kept conversation state: it belongs to this model and settings."""
        if self._session is not None:
            self._session.close()
            self._session = None

    def drop_state(self, conversation: str) -> None:
        if self._session is not None:
            self._session.states.forget(conversation)

    def state_report(self) -> p.StateReport:
        if self._session is None:
            return p.StateReport()
        cache = self._session.states.cache
        use = cache.usage()
        return p.StateReport(use.ram_bytes, use.disk_bytes, use.in_ram, use.on_disk,
                             cache.ram_budget, cache.disk_budget)

    # ---- generating ----------------------------------------------------------------------
    @contextlib.contextmanager
    def _running(self, rid: int) -> Any:
        """While a request runs, a Cancel of its id sets the abort flag."""
        with self._lock:
            self._current = rid
            self._abort.clear()
            if rid in self._cancelled:
                self._abort.set()
        try:
            yield
        finally:
            with self._lock:
                self._current = -1
                self._cancelled.discard(rid)
                self._abort.clear()

    def generate(self, request: GenerationRequest) -> None:
        rid = request.request_id
        with self._running(rid):
            self.send(p.Started(rid))
            try:
                if self._session is None:
                    self._finish(rid, "error", "No model is loaded.")
                else:
                    self._generate(self._session, request)
            except Exception as exc:  # the reply fails; the host and the model stay up
                self._finish(rid, "error", f"The engine failed: {exc}")

    # ---- tuning and quantizing -----------------------------------------------------------
    def tune(self, request: p.Tune) -> None:
        rid, s = request.request_id, self._session
        if s is None:
            self.send(p.TuneResult(rid, error="No model is loaded."))
            return
        llm = s.llm
        with self._running(rid):
            s.states.park()
            bench = _TuneBench(llm, s.states.memory, self._abort_cb)
            try:
                tuned = tune(bench, physical_cores(), logical_cores(), llm.n_batch,
                             max(0.05, request.seconds_per_trial), self._abort.is_set)
            except Exception as exc:  # Stopped, or llama.cpp's abort: a stop; else a failure
                tuned = None
                if not self._abort.is_set():
                    self.send(p.TuneResult(rid, error=f"The engine failed: {exc}"))
                    return
            finally:
                bench.restore(s.info.n_threads, s.info.n_threads_batch)
                s.states.memory.clear()
            if tuned is None:
                self.send(p.TuneResult(rid, cancelled=True))
                return
            if request.apply:
                bench.restore(tuned.n_threads, tuned.n_threads_batch)
                if s.draft is not None:
                    s.draft.llm._ctx.set_n_threads(tuned.n_threads, tuned.n_threads_batch)
                s.info = dataclasses.replace(s.info, n_threads=tuned.n_threads,
                                             n_threads_batch=tuned.n_threads_batch)
            self.send(p.TuneResult(
                rid, tuned.n_threads, tuned.n_threads_batch, tuned.n_batch, tuned.decode_tok_s,
                tuned.prompt_tok_s, tuple(p.TuneTrial(t.kind, t.n_threads, t.n_batch, t.tok_s)
                                          for t in tuned.trials), applied=request.apply))

    def quantize(self, request: p.Quantize) -> None:
        """llama.cpp's quantizer, run here so that this stays the only module importing
        llama_cpp; engine/quantize.py runs it in a host process of its own (it has no cancel
        of its own: that host is ended) and checks what it wrote."""
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = request.ftype
        params.nthread = request.threads or logical_cores()
        params.allow_requantize = request.allow_requantize
        progress = _QuantizeLog(request.source, self.send)
        started = time.perf_counter()
        with _llama_log(progress.line):
            code = llama_cpp.llama_model_quantize(
                request.source.encode(), request.output.encode(), ctypes.byref(params))
        why = f": {progress.error}" if progress.error else ""
        error = "" if code == 0 else f"llama.cpp could not quantize this model{why} (code {code})."
        self.send(p.Quantized(request.output, time.perf_counter() - started, error))

    def _finish(self, rid: int, reason: FinishReason, message: str = "") -> None:
        self.send(p.Finished(rid, Finish(reason, message)))

    @staticmethod
    def _fit(s: Session, request: GenerationRequest) -> tuple[RenderedPrompt, list[int], Fit]:
        """The prompt for a request, history left out under its overflow policy until it fits,
        its tokens, and what was left out."""
        n_ctx = s.llm.n_ctx()
        rendered: dict[tuple[Message, ...], tuple[RenderedPrompt, list[int]]] = {}
        context = TemplateContext(request.tools, request.enable_thinking,
                                  request.reasoning_effort)

        def count_tokens(messages: Sequence[Message]) -> int:
            prompt = s.render(messages, context)
            rendered[tuple(messages)] = prompt, s.tokenize_prompt(prompt)
            return len(rendered[tuple(messages)][1])

        fit = fit_messages(request.messages, count_tokens, n_ctx,
                           reply_reserve(n_ctx, request.sampling.max_tokens),
                           policy_of(request.overflow))
        prompt, tokens = rendered.get(fit.messages) or (s.render(fit.messages, context), [])
        return prompt, tokens or s.tokenize_prompt(prompt), fit

    def inspect(self, request: GenerationRequest) -> None:
        """Answer with the prompt a Generate of this request would evaluate; generates nothing
        and leaves the KV cache as it is."""
        rid = request.request_id
        if self._session is None:
            self.send(p.PromptView(rid, error="No model is loaded."))
            return
        try:
            prompt, tokens, fit = self._fit(self._session, request)
            self.send(self._session.view(rid, prompt, tokens, fit))
        except (TemplateError, ContextOverflow) as exc:
            self.send(p.PromptView(rid, error=str(exc)))
        except Exception as exc:  # the host and the model stay up
            self.send(p.PromptView(rid, error=f"The engine failed: {exc}"))

    def _generate(self, s: Session, request: GenerationRequest) -> None:
        rid, sp, llm = request.request_id, request.sampling, s.llm
        started = time.perf_counter()
        n_ctx = llm.n_ctx()
        try:
            _, tokens, fit = self._fit(s, request)
        except ContextOverflow as exc:
            self.send(p.Finished(rid, Finish("error", str(exc), context_full=True)))
            return
        except TemplateError as exc:
            self._finish(rid, "error", str(exc))
            return
        if not tokens:
            self._finish(rid, "error", "The chat template produced an empty prompt.")
            return
        # The KV cache is made to hold as much of the prompt as it can (the live cache, a saved
        # state, a shift past left-out history); the last token is always evaluated again,
        # with the rest of the prompt, so that its logits give the first token.
        reuse = s.states.prepare(request.conversation, tokens, may_shift=fit.dropped > 0)
        cached = reuse.cached
        boundary = s.system_prefix(request.messages, tokens) if request.conversation else 0
        keep_at = boundary if s.states.wants_prefix(tokens, boundary, cached) else 0
        # The draft model reads the prompt too, before the first token rather than inside
        # the first guess.
        if not self._prefill(s, rid, tokens, cached, keep_at) or (
                s.draft is not None and not s.draft.catch_up(tokens)):
            self._finish(rid, "cancelled")
            return
        prefilled = time.perf_counter()
        seed = sp.seed if sp.seed >= 0 else random.getrandbits(31)
        llm.set_seed(seed)
        llm.last_n_tokens_size = sp.repeat_last_n
        sampler = llm._init_sampler(
            top_k=sp.top_k, top_p=sp.top_p, min_p=sp.min_p, typical_p=sp.typical_p,
            temp=sp.temperature, repeat_penalty=sp.repeat_penalty,
            frequency_penalty=sp.frequency_penalty, presence_penalty=sp.presence_penalty,
            mirostat_mode=sp.mirostat_mode, mirostat_tau=sp.mirostat_tau,
            mirostat_eta=sp.mirostat_eta)
        utf8, stops = Utf8Stream(), StopMatcher(sp.stop)
        n_gen, first_at, reason, stopped_by_string = 0, 0.0, "stop", False
        pending: list[str] = []  # text not sent yet: one frame per ~15 ms, not per token
        last_sent = 0.0
        tally = Tally()

        def room() -> int:
            """Guesses that could still be used: within max_tokens, the context, a batch."""
            left = sp.max_tokens - n_gen - 1 if sp.max_tokens > 0 else s.most
            return min(left, s.most, n_ctx - 2 - llm.n_tokens)

        generator = decode(_Target(llm, sampler), TokenHistory(tokens), s.proposer,
                           DraftLength(s.most), tally, room, primed=True)
        try:
            for token in generator:
                if n_gen == 0:
                    first_at = time.perf_counter()
                if llama_cpp.llama_vocab_is_eog(s.vocab, token):
                    break
                n_gen += 1
                text, stopped = stops.feed(utf8.feed(s.piece(token)))
                if text:
                    pending.append(text)
                    now = time.perf_counter()
                    if now - last_sent >= DELTA_BATCH_S:
                        self.send(p.Delta(rid, "".join(pending)))
                        pending.clear()
                        last_sent = now
                if stopped:
                    stopped_by_string = True
                    break
                if self._abort.is_set():
                    reason = "cancelled"
                    break
                # The KV cache holds the prompt and the tokens before this one.
                if n_gen == sp.max_tokens or len(tokens) + n_gen >= n_ctx:
                    reason = "length"
                    break
        except RuntimeError:
            if not self._abort.is_set():
                raise
            reason = "cancelled"
        finally:
            generator.close()
            sampler.close()
        if not stopped_by_string:
            pending.append(_tail(utf8, stops))
        if "".join(pending):
            self.send(p.Delta(rid, "".join(pending)))
        done = time.perf_counter()
        new_prompt = len(tokens) - cached
        stats = Stats(
            prompt_tokens=len(tokens), cached_tokens=cached, generated_tokens=n_gen,
            ttft_s=(first_at or done) - started,
            decode_tok_s=(n_gen - 1) / (done - first_at) if n_gen > 1 and done > first_at else 0.0,
            prompt_tok_s=new_prompt / (prefilled - started) if prefilled > started else 0.0,
            context_used=llm.n_tokens, n_ctx=n_ctx, dropped_messages=fit.dropped, seed=seed,
            dropped_start=fit.dropped_start, cache_source=reuse.source,
            state_restore_s=reuse.restore_s, shifted_tokens=reuse.shifted,
            drafted_tokens=tally.drafted, accepted_tokens=tally.accepted)
        self.send(p.ReplyStats(rid, stats))
        self._finish(rid, reason)  # type: ignore[arg-type]

    def _prefill(self, s: Session, rid: int, tokens: list[int], cached: int,
                 keep_at: int = 0) -> bool:
        """Evaluate the prompt in batches (its last token's logits are then the first reply
        token's), reporting progress; when `keep_at` is set, the state of that many tokens (a
        long system prompt) is kept on the way. False when cancelled."""
        llm = s.llm
        llm.n_tokens = cached
        end = len(tokens)
        total = end - cached
        step = llm.n_batch
        stops = [keep_at, end] if cached < keep_at < end else [end]
        # The abort callback lets a stop interrupt a batch mid-way. It is only installed for
        # the prompt: ggml calls it for every graph node, which costs ~6% of decode speed, and
        # while decoding the per-token check in _generate already stops within one token.
        llama_cpp.llama_set_abort_callback(llm._ctx.ctx, self._abort_cb, None)
        try:
            start = cached
            for stop in stops:
                for i in range(start, stop, step):
                    if self._abort.is_set():
                        return False
                    llm.eval(tokens[i: min(i + step, stop)])
                    if total > step:
                        self.send(p.PromptProgress(rid, min(i + step, stop) - cached, total))
                if stop == keep_at:
                    s.states.keep_prefix()
                start = stop
        except RuntimeError:
            if self._abort.is_set():
                return False  # llama.cpp dropped the unfinished batch; eval() trims the rest
            raise
        finally:
            llama_cpp.llama_set_abort_callback(llm._ctx.ctx, _NO_ABORT, None)
        return not self._abort.is_set()


_NO_ABORT = llama_cpp.ggml_abort_callback()  # a NULL callback


class _TuneBench:
    """tune.Bench on the loaded model: a fixed text evaluated from an empty KV cache. Prompt
    trials run with the abort callback, so that a stop ends one mid-batch; decoding trials are
    short, and the callback would slow them (see _prefill)."""

    def __init__(self, llm: Any, memory: KvMemory, abort_cb: Any) -> None:
        self.llm = llm
        self.memory = memory
        self.abort_cb = abort_cb
        text = b"The keeper climbed the stairs of the lighthouse and lit the lamp. " * 400
        self.tokens = llm.tokenize(text, add_bos=False)[: max(64, llm.n_ctx() - 64)]

    def decode_rate(self, n_threads: int, seconds: float) -> float:
        llm = self.llm
        self.memory.clear()
        llm._ctx.set_n_threads(n_threads, n_threads)
        llm.eval(self.tokens[:16])
        n, started = 0, time.perf_counter()
        while n < 16 or time.perf_counter() - started < seconds:
            llm.eval(self.tokens[16 + n: 17 + n])
            n += 1
            if 17 + n >= len(self.tokens):
                break
        return n / (time.perf_counter() - started)

    def prompt_rate(self, n_threads: int, n_batch: int, seconds: float) -> float:
        llm = self.llm
        self.memory.clear()
        llm._ctx.set_n_threads(n_threads, n_threads)
        llama_cpp.llama_set_abort_callback(llm._ctx.ctx, self.abort_cb, None)
        try:
            n, started = 0, time.perf_counter()
            while n == 0 or time.perf_counter() - started < seconds:
                chunk = self.tokens[n: n + n_batch]
                if len(chunk) < n_batch:
                    break
                llm.eval(chunk)
                n += len(chunk)
            return n / (time.perf_counter() - started)
        finally:
            llama_cpp.llama_set_abort_callback(llm._ctx.ctx, _NO_ABORT, None)

    def restore(self, n_threads: int, n_threads_batch: int) -> None:
        self.llm._ctx.set_n_threads(n_threads, n_threads_batch)


class _QuantizeLog:
    """Progress of llama_model_quantize, read from its log: it names each tensor as it starts
    ("[  12/ 272] blk.0.attn_k.weight - …"); the share done is counted in the source's tensor
    bytes. Its last error line is kept for the message."""

    _TENSOR = re.compile(r"\[\s*(\d+)/\s*(\d+)\]\s+(\S+)")

    def __init__(self, source: str, send: Callable[[Any], None]) -> None:
        self.send = send
        self.error = ""
        try:
            tensors = read_header(source).tensors
        except GGUFError:
            tensors = ()
        self._sizes = {t.name: t.nbytes for t in tensors}
        self._total = sum(self._sizes.values())
        self._done_bytes = 0
        self._last = ("", 0)  # the tensor started last, and its size

    def line(self, level: int, text: str) -> None:
        if level == _LOG_ERROR and text.strip():
            self.error = text.strip()
        found = self._TENSOR.search(text)
        if found is None:
            return
        index, total, name = int(found[1]), int(found[2]), found[3]
        self._done_bytes += self._last[1]
        self._last = (name, self._sizes.get(name, 0))
        fraction = self._done_bytes / self._total if self._total else (index - 1) / total
        self.send(p.QuantizeProgress(index - 1, total, min(1.0, fraction), name))


_LOG_ERROR = 3  # ggml_log_level


@contextlib.contextmanager
def _llama_log(callback: Callable[[int, str], None]) -> Any:
    """Route llama.cpp's log lines to `callback` (level, text), then back to
    llama-cpp-python's own logger."""
    @llama_cpp.llama_log_callback
    def on_log(level: int, text: bytes, _data: object) -> None:
        callback(level, text.decode("utf-8", errors="replace"))

    llama_cpp.llama_log_set(on_log, None)
    try:
        yield
    finally:
        llama_cpp.llama_log_set(llama_cpp._logger.llama_log_callback, ctypes.c_void_p(0))


def _tail(utf8: Utf8Stream, stops: StopMatcher) -> str:
    """What the decoders still hold when a reply ends: bytes of an unfinished character and
    text held back because it could have begun a stop string."""
    text, _ = stops.feed(utf8.flush())
    return text + stops.flush()


def _refusal(params: LoadParams, header: GGUFHeader, n_ctx: int, offload: bool,
             draft: GGUFHeader | None = None) -> str | None:
    """Why this load should not be tried (see fit.load_refusal), or None."""
    try:
        shape = fit.shape_from_header(header)
        draft_shape = fit.shape_from_header(draft) if draft is not None else None
    except GGUFError:
        return None  # no shape to estimate from: llama.cpp decides (it needs the same keys)
    available = psutil.virtual_memory()
    vram_free = gpu_memory()[0] if offload else 0
    memory = fit.Memory(ram_free=int(available.available), ram_total=int(available.total),
                        vram_free=vram_free, gpu_offload=offload)
    return fit.load_refusal(shape, n_ctx, params.kv_cache_type, memory,
                            allow_beyond_trained=params.allow_beyond_trained, draft=draft_shape)


class _DraftError(Exception):
    """The draft model cannot be used; the message is for the user."""


def _draft_header(params: LoadParams, header: GGUFHeader) -> GGUFHeader | None:
    """The draft model's header, checked against the model's before either is loaded."""
    if not params.draft_model_path:
        return None
    try:
        draft = read_header(params.draft_model_path)
    except GGUFError as exc:
        raise GGUFError(f"The draft model cannot be used. {exc}") from None
    mismatch = draft_header_mismatch(header, draft)
    if mismatch:
        raise GGUFError(mismatch)
    return draft


def _vocab_mismatch(llm: Any, draft: Any) -> str | None:
    """Where two loaded models' vocabularies differ, as llama.cpp's speculative example checks:
    the same kind, BOS and EOS, sizes within MAX_VOCAB_DIFFERENCE, and the same text for every
    token both have past the first five (special tokens some conversions renumber)."""
    a, b = llm._model.vocab, draft._model.vocab
    if llama_cpp.llama_vocab_type(a) != llama_cpp.llama_vocab_type(b):
        return "their tokenizers are of different kinds."
    if llm.token_bos() != draft.token_bos() or llm.token_eos() != draft.token_eos():
        return "their beginning- or end-of-text tokens differ."
    n_a, n_b = llama_cpp.llama_vocab_n_tokens(a), llama_cpp.llama_vocab_n_tokens(b)
    if abs(n_a - n_b) > MAX_VOCAB_DIFFERENCE:
        return f"their vocabularies have {n_a:,} and {n_b:,} tokens."
    for token in range(5, min(n_a, n_b)):
        if llama_cpp.llama_vocab_get_text(a, token) != llama_cpp.llama_vocab_get_text(b, token):
            return f"token {token} differs, so they do not share a vocabulary."
    return None


def _special_text(llm: Any, token: int) -> str:
    if token < 0:
        return ""
    return llm.detokenize([token], special=True).decode("utf-8", errors="replace")


def _state_budgets(params: LoadParams) -> tuple[int, int]:
    """RAM and disk for the states of conversations: as asked, else a quarter of what is free
    now (the model is loaded), at most MAX_STATE_BUDGET each."""
    ram = params.kv_state_ram_mb * MIB if params.kv_state_ram_mb >= 0 else min(
        psutil.virtual_memory().available // 4, MAX_STATE_BUDGET)
    if params.kv_state_disk_mb >= 0:
        return ram, params.kv_state_disk_mb * MIB
    try:
        free = shutil.disk_usage(paths.cache_dir()).free
    except OSError:
        free = 0
    return ram, min(free // 4, MAX_STATE_BUDGET)


@contextlib.contextmanager
def _progress_callback(callback: Callable[[float, object], bool]):
    """Llama() builds its model params internally; wrap the default-params factory it calls so
    the load reports progress."""
    module = llama_cpp.llama_cpp
    original = module.llama_model_default_params
    c_callback = llama_cpp.llama_progress_callback(callback)

    def with_progress() -> Any:
        params = original()
        params.progress_callback = c_callback
        return params

    module.llama_model_default_params = with_progress
    try:
        yield
    finally:
        module.llama_model_default_params = original


def _read_requests(stream: IO[bytes], host: EngineHost, inbox: queue.Queue) -> None:
    while True:
        try:
            message = p.read_frame(stream)
        except p.ProtocolError:
            message = None
        if message is None:  # the window went away: stop what we are doing, then exit
            host.abort_all()
            inbox.put(p.Shutdown())
            return
        if isinstance(message, p.Cancel):
            host.cancel(message.request_id)
        else:
            inbox.put(message)


def main() -> int:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    host = EngineHost(out)
    inbox: queue.Queue = queue.Queue()
    threading.Thread(target=_read_requests, args=(sys.stdin.buffer, host, inbox),
                     daemon=True, name="requests").start()
    host.send(p.Ready(os.getpid(), bool(llama_cpp.llama_supports_gpu_offload()),
                      physical_cores(), *gpu_memory()))
    while True:
        message = inbox.get()
        if isinstance(message, p.Shutdown):
            host.unload()
            out.flush()
            # The reader thread is blocked inside a buffered read of stdin; a normal exit would
            # abort on that buffer's lock. Nothing is left to clean up, so leave at once.
            os._exit(0)
        if isinstance(message, p.Load):
            host.load(message.params)
        elif isinstance(message, p.Unload):
            host.unload()
            host.send(p.Unloaded())
        elif isinstance(message, p.Generate):
            host.generate(message.request)
        elif isinstance(message, p.Inspect):
            host.inspect(message.request)
        elif isinstance(message, p.DropState):
            host.drop_state(message.conversation)
        elif isinstance(message, p.StateUsage):
            host.send(host.state_report())
        elif isinstance(message, p.Tune):
            host.tune(message)
        elif isinstance(message, p.Quantize):
            host.quantize(message)


if __name__ == "__main__":
    raise SystemExit(main())
