"""The words some embedding models expect before what they embed.

Several embedding models were trained with a prefix that says whether a text is a question or a
passage (nomic-embed-text: "search_query: " / "search_document: "; EmbeddingGemma: "task:
search result | query: " / "title: none | text: "; Qwen3 Embedding: an instruction before the
question; BGE, mxbai and Arctic Embed v1: an instruction before short questions; Arctic Embed
v2: "query: " before questions only; E5: "query: " / "passage: "). Without them their vectors
are worse than a smaller model's; their model cards say so. Nothing in a GGUF names the
prefixes, so they are chosen by the model's name (the header's `general.name` and
`general.basename`, then the file's name) and architecture.

A collection records the style its vectors were made with (fts.Collection.embed_prompts), so a
change of style re-embeds its passages, and a question is embedded in the style of the vectors it
is compared with. The API's /v1/embeddings adds nothing: its callers send their own texts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from inglenook.models.gguf import GGUFError, read_header


@dataclass(frozen=True)
class EmbedPrompts:
    query: str = ""  # before a question
    document: str = ""  # before each passage's window


_SEARCH_INSTRUCTION = "Represent this sentence for searching relevant passages: "

STYLES: dict[str, EmbedPrompts] = {
    "": EmbedPrompts(),
    "nomic": EmbedPrompts("search_query: ", "search_document: "),
    "embeddinggemma": EmbedPrompts("task: search result | query: ", "title: none | text: "),
    "qwen3-embedding": EmbedPrompts("Instruct: Given a web search query, retrieve relevant "
                                    "passages that answer the query\nQuery:"),
    "bge": EmbedPrompts(_SEARCH_INSTRUCTION),
    "e5": EmbedPrompts("query: ", "passage: "),
    "arctic-v2": EmbedPrompts("query: "),
}

# (what the lower-cased names contain, or the architecture is, the style), first match wins.
_BY_NAME: tuple[tuple[str, str], ...] = (
    ("nomic-embed-text", "nomic"),
    ("embeddinggemma", "embeddinggemma"),
    ("qwen3-embedding", "qwen3-embedding"),
    ("bge-m3", ""),  # BGE M3 reads questions as they are
    ("bge-small-en", "bge"), ("bge-base-en", "bge"), ("bge-large-en", "bge"),
    ("mxbai-embed-large", "bge"),
    ("snowflake-arctic-embed-m-v2", "arctic-v2"), ("snowflake-arctic-embed-l-v2", "arctic-v2"),
    ("snowflake-arctic-embed", "bge"),
    ("multilingual-e5", "e5"), ("e5-small", "e5"), ("e5-base", "e5"), ("e5-large", "e5"),
)
_BY_ARCHITECTURE = {"nomic-bert": "nomic", "nomic-bert-moe": "nomic",
                    "gemma-embedding": "embeddinggemma"}


def style_for(names: list[str], architecture: str) -> str:
    """The style of a model known by these names (header names, file name) and architecture."""
    joined = " ".join(names).lower().replace("_", "-").replace(" ", "-")
    for needle, style in _BY_NAME:
        if needle in joined:
            return style
    return _BY_ARCHITECTURE.get(architecture, "")


def style_of(model: str) -> str | None:
    """The style for the model file at `model`; None when its header cannot be read now (the
    caller keeps the style it has: a file being copied must not re-embed a collection)."""
    try:
        key = (model, os.stat(model).st_mtime_ns)
        if key not in _STYLES_READ:
            header = read_header(model)
            names = [str(header.metadata.get(k) or "") for k in ("general.name",
                                                                   "general.basename")]
            if len(_STYLES_READ) >= 32:
                _STYLES_READ.clear()
            _STYLES_READ[key] = style_for([*names, os.path.basename(model)],
                                          header.architecture)
    except (OSError, GGUFError):
        return None  # not remembered: the next call reads it again
    return _STYLES_READ[key]


_STYLES_READ: dict[tuple[str, int], str] = {}  # (path, mtime) → style, of headers read


def query_text(style: str, question: str) -> str:
    return STYLES.get(style, STYLES[""]).query + question


def document_texts(style: str, texts: list[str]) -> list[str]:
    prefix = STYLES.get(style, STYLES[""]).document
    return [prefix + text for text in texts] if prefix else texts
