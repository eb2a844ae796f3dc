"""The adapter: the only package that touches llama-cpp-python, and through it only libllama's
C functions (its low-level API), never the `Llama` class or its private attributes.

    library    libllama started once, its log, the devices it sees, quantizing
    model      Model: weights and vocabulary (tokenize, pieces, token attributes)
    context    Context: KV memory for `n_seq` sequences and llama_decode; SeqMemory: one
               sequence's KV cells and the tokens they hold (kv_reuse.KvMemory);
               EmbeddingContext: a context of its own in embedding mode; Batch: the tokens of
               one llama_decode
    sampler    Sampler: a chain built as llama-cpp-python's Llama builds it, so a seeded reply
               here is the one `create_chat_completion` gives; and a reply held to a grammar

The sequences draw KV cells from one pool (`kv_unified` on, as llama-server's slots): memory
follows the tokens in flight, a prefix two sequences share is held once (llama_memory_seq_cp),
and llama.cpp decodes any set of sequences in one pass. The price: a batch of four sequences
rounds differently from each alone, so a greedy reply may part from the lone one at a near-tie
(measured in docs/memory.md; tests/integration/test_batching.py). A seeded reply is still the
same every time it is run alone, or with the same company.

The C signatures are those of llama-cpp-python 0.3.x (pyproject pins it below 0.4).
"""

from inglenook.engine.host.llama.context import (
    Batch,
    Context,
    EmbeddingContext,
    SeqMemory,
    abort_callback,
)
from inglenook.engine.host.llama.library import (
    ATTR_CONTROL,
    ATTR_LSTRIP,
    ATTR_RSTRIP,
    ATTR_USER_DEFINED,
    DECODE_ABORTED,
    KV_TYPES,
    LOG_ERROR,
    build_id,
    gpu_memory,
    gpu_offload_supported,
    log_to,
    max_sequences,
    quantize,
)
from inglenook.engine.host.llama.model import Model
from inglenook.engine.host.llama.sampler import Odds, Sampler, odds_of

__all__ = ["ATTR_CONTROL", "ATTR_LSTRIP", "ATTR_RSTRIP", "ATTR_USER_DEFINED", "DECODE_ABORTED",
           "KV_TYPES", "LOG_ERROR", "Batch", "Context", "EmbeddingContext", "Model", "Odds",
           "Sampler", "SeqMemory", "abort_callback", "build_id", "gpu_memory",
           "gpu_offload_supported", "log_to", "max_sequences", "odds_of", "quantize"]
