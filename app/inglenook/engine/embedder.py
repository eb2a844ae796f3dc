"""An engine as a knowledge collection's embedder (knowledge.vectors.Embedder): the vectors of
the model at `model`, from an engine that has it loaded (an engine host of its own that
`EngineEmbedder.load` starts, for the command line and the bench), or through the window's
worker (RoutedEmbedder), whose router loads the embedding model beside the chat model, in a
host of its own, on first use and unloads it when idle, as for a model an API request names."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from inglenook.core.load import LoadParams
from inglenook.engine import protocol as p
from inglenook.engine.client import EngineClient
from inglenook.engine.interface import Engine
from inglenook.models.gguf import GGUFError, read_header

EMBED_CONTEXT = 2048  # tokens a passage may have; a collection's passages are far shorter


def embed_context(model: str) -> int:
    """EMBED_CONTEXT, or the model's trained context when shorter (BERT's 512: the engine
    refuses a context beyond it, and a position past it has no embedding)."""
    try:
        trained = read_header(model).context_length
    except (OSError, GGUFError):
        trained = 0  # the load says what is wrong with the file
    return min(EMBED_CONTEXT, trained) if trained > 0 else EMBED_CONTEXT


class EngineEmbedder:
    def __init__(self, engine: Engine, model: str) -> None:
        self.engine = engine
        self.model = model
        self.note = ""  # the engine's word on these vectors (a chat model used as embedder)
        self._own: EngineClient | None = None

    @classmethod
    def load(cls, model: str, log_path: Path | None = None) -> EngineEmbedder:
        """Start an engine host of its own with the model loaded (EngineError if it cannot
        be); close() ends it."""
        client = EngineClient(log_path=log_path)
        try:
            client.load(LoadParams(model, n_ctx=embed_context(model), n_slots=1))
        except BaseException:
            client.close()
            raise
        embedder = cls(client, model)
        embedder._own = client
        return embedder

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        answer = self.engine.embed(list(texts), truncate=True)
        self.note = answer.note
        rows: np.ndarray = answer.vectors()
        return rows

    def close(self) -> None:
        if self._own is not None:
            self._own.close()
            self._own = None


class RoutedEmbedder:
    """The window's embedder: `model`'s vectors through `embed(texts, model)` (the worker's,
    which routes them to the window's own engine when it is the window's model). Blocks while
    the model loads: call it off the GUI thread."""

    def __init__(self, embed: Callable[[Sequence[str], str], p.Embedded], model: str) -> None:
        self._embed = embed
        self.model = model
        self.note = ""

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        answer = self._embed(list(texts), self.model)
        self.note = answer.note
        rows: np.ndarray = answer.vectors()
        return rows
