"""Embeddings: the loaded model in llama.cpp's embedding mode, in a context of its own (made on
the first request, freed with the model), so the chat lanes' KV cells are never touched.

The pooling (how the states of a text's tokens become one vector) is the model's, read from
its GGUF header (`<arch>.pooling_type`). A chat model has none: its vectors are the mean of its
token states, and every answer says so (such vectors are poor for search; an embedding model
such as nomic-embed-text, bge or all-MiniLM is made for it). Vectors are L2-normalised, so a
dot product is their cosine. A text longer than the context (as loaded, MAX_TOKENS at most) is
cut to it, or refused.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import numpy as np

from inglenook.engine import protocol as p
from inglenook.engine.host.llama import EmbeddingContext, Model
from inglenook.models.gguf import GGUFError, read_header

MAX_TOKENS = 2048  # per text (and per batch): the passages of a collection are far shorter
# A chat model also gives logits for every token read (llama.cpp's output buffer: tokens of a
# batch x vocabulary floats, 600 MB at 2,048 x 150k), so its batches are kept shorter; the
# longest passage of a collection (4,000 characters) still fits.
MAX_TOKENS_CHAT_MODEL = 1024
MAX_SEQUENCES = 16  # texts read together in one batch
# llama.cpp's enum llama_pooling_type, as a GGUF header stores it
_POOLING_NAMES = {1: "mean", 2: "cls", 3: "last"}
CHAT_MODEL_NOTE = ("This is not an embedding model (its file names no pooling): its vectors "
                   "are the mean of its token states, poor for search.")


class EmbedError(Exception):
    """The request gets no vectors; str() says why, for the user."""


def pooling_of(path: str) -> tuple[str, bool, str]:
    """The pooling to use for the model at `path`, whether its header named one (an embedding
    model), and a note for the user when it did not or named one that is not a vector."""
    try:
        header = read_header(path)
    except GGUFError:
        return "mean", False, CHAT_MODEL_NOTE
    value = header.metadata.get(f"{header.architecture}.pooling_type")
    if not isinstance(value, int) or isinstance(value, bool):
        return "mean", False, CHAT_MODEL_NOTE
    if value == 4:
        raise EmbedError("This model is a reranker (its pooling is 'rank'): it scores pairs "
                         "of texts and makes no embeddings.")
    if value not in _POOLING_NAMES:  # NONE: vectors per token; one per text is their mean
        return "mean", True, ("This model's file asks for no pooling (a vector per token): "
                              "each text's vector is their mean.")
    return _POOLING_NAMES[value], True, ""


class Embedder:
    def __init__(self, model: Model, path: str, n_ctx: int, n_threads: int) -> None:
        """`n_ctx`: the model's context as loaded (a text may be as long, MAX_TOKENS at most)."""
        self.pooling, self.embedding_model, self.note = pooling_of(path)
        most = MAX_TOKENS if self.embedding_model else MAX_TOKENS_CHAT_MODEL
        n_ctx = min(most, n_ctx or most)
        try:
            self.ctx = EmbeddingContext(model, n_ctx, MAX_SEQUENCES, self.pooling, n_threads)
        except ValueError as exc:
            raise EmbedError(f"llama.cpp could not make an embedding context: {exc}") from None

    def embed(self, request: p.Embed) -> p.Embedded:
        ctx = self.ctx
        tokenized: list[list[int]] = []
        truncated: list[int] = []
        given: Sequence[str | tuple[int, ...]] = request.token_lists or request.texts
        for i, text in enumerate(given):
            tokens: list[int] = ctx.tokenize(text.encode("utf-8", errors="replace")) \
                if isinstance(text, str) else [int(t) for t in text]
            if any(not 0 <= t < ctx.model.n_vocab for t in tokens):
                raise EmbedError(f"Input {i} holds a token id this model does not have "
                                 f"(0 to {ctx.model.n_vocab - 1}).")
            if not tokens:
                raise EmbedError(f"Input {i} is empty: it has no tokens to embed.")
            if len(tokens) > ctx.n_ctx:
                if not request.truncate:
                    raise EmbedError(f"Input {i} is {len(tokens):,} tokens long, more than the "
                                     f"{ctx.n_ctx:,} this model embeds at once.")
                # Keep the closing token (SEP/EOS) some poolings read the text from.
                tokens = tokens[:ctx.n_ctx - 1] + tokens[-1:]
                truncated.append(i)
            tokenized.append(tokens)
        rows = np.concatenate([ctx.embed(batch) for batch in _batches(tokenized, ctx.n_ctx)]) \
            if tokenized else np.zeros((0, ctx.dimensions), dtype=np.float32)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        rows = (rows / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        return p.Embedded(request.request_id, base64.b64encode(rows.tobytes()).decode("ascii"),
                          ctx.dimensions, tuple(len(t) for t in tokenized), tuple(truncated),
                          self.pooling, self.embedding_model, self.note)

    def close(self) -> None:
        self.ctx.close()


def _batches(tokenized: Sequence[list[int]], n_ctx: int) -> list[list[list[int]]]:
    """Consecutive texts grouped so that each group fits one batch."""
    groups: list[list[list[int]]] = [[]]
    used = 0
    for tokens in tokenized:
        if groups[-1] and (used + len(tokens) > n_ctx or len(groups[-1]) == MAX_SEQUENCES):
            groups.append([])
            used = 0
        groups[-1].append(tokens)
        used += len(tokens)
    return groups

