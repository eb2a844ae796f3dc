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

Each sequence has a KV stream of its own (`kv_unified` off): a step's batch of one token from
each of four sequences then gives every one of them exactly the logits it would get alone,
where a unified buffer rounds differently (tests/integration/test_batching.py). llama.cpp puts
only sequences with consecutive ids in one forward pass, so a batch lists its tokens by sequence
and slots.py keeps busy sequences next to each other.

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
           "Sampler", "SeqMemory", "abort_callback", "gpu_memory", "gpu_offload_supported",
           "log_to", "max_sequences", "odds_of", "quantize"]
