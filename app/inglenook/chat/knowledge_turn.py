"""The chat side of knowledge: which collections a chat uses (ChatSettings.knowledge), the
passages its reply is given, and the record of them kept with the reply.

When a reply starts in a chat that uses collections, the user's last question is searched for
(knowledge/retrieval.py) within a fixed share of the context, and the passages go into that
question's turn as fenced data: message text, so a control token in a document stays text.
What was given is recorded in the reply's provenance (its `extra`, key "knowledge": the exact
text, the sources and any notice), so the prompt inspector replays it as sent even after the
index changed, and exports and source chips name the sources. An index that cannot be read
does not stop the reply: it goes on without documents and its record says why (`notice`).

Entry points for the window: ChatSettings.knowledge (the per-chat collections picker),
Reply.knowledge / recorded(provenance) (the source chips and the notice under the bubble). A
reply's turn (chat/turn.py) searches, off the window's thread, with the index it is handed
(index_with_vectors: the chat's collections' embedding models beside the full text); a reply
regenerated while the chat uses the same collections is given the same passages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from inglenook.core.messages import Message
from inglenook.core.provenance import Provenance
from inglenook.knowledge.fts import DATABASE_ERRORS, KnowledgeError, SqliteFtsIndex
from inglenook.knowledge.index import KnowledgeIndex
from inglenook.knowledge.retrieval import Retrieved, Source, retrieve, with_knowledge
from inglenook.knowledge.vectors import Embedder

BUDGET_SHARE = 4  # at most a quarter of the context goes to passages…
BUDGET_CAP = 2000  # …and never more than this many tokens (more passages dilute the answer)
KEY = "knowledge"  # in Provenance.extra
UNREADABLE: tuple[type[Exception], ...] = (KnowledgeError, OSError, *DATABASE_ERRORS)

# The index a reply searches, opened for the chat's collections (they decide its embedder).
OpenIndex = Callable[[Sequence[str]], AbstractContextManager[KnowledgeIndex]]


@contextmanager
def default_index(collections: Sequence[str] = ()) -> Iterator[KnowledgeIndex]:
    """The knowledge index at its place (paths.knowledge_database_file), opened for one reply
    (SqliteFtsIndex is one per thread) and closed after it; full text only."""
    index = SqliteFtsIndex()
    try:
        yield index
    finally:
        index.close()


def index_with_vectors(embedder_for: Callable[[str], Embedder]) -> OpenIndex:
    """Opens the index with an embedder for each embedding model of the chat's collections
    (`embedder_for(model path)`), so that their vectors are searched beside the full text:
    collections of different models each by their own (the question is embedded once per
    model)."""
    @contextmanager
    def open_index(collections: Sequence[str]) -> Iterator[KnowledgeIndex]:
        index = SqliteFtsIndex()
        try:
            index.embedder_for = embedder_for
            yield index
        finally:
            index.close()
    return open_index


def budget(n_ctx: int) -> int:
    """The tokens passages may take in a context of n_ctx (0: unknown, the cap)."""
    return min(n_ctx // BUDGET_SHARE, BUDGET_CAP) if n_ctx > 0 else BUDGET_CAP


@dataclass(frozen=True)
class KnowledgeTurn:
    """What one reply was given from the chat's collections."""

    collections: tuple[str, ...]
    text: str  # exactly what went before the question; "" when nothing was found or read
    sources: tuple[Source, ...] = ()
    tokens: int = 0  # estimated, for the context meter
    notice: str = ""  # why the reply went on without documents (shown, never silent)
    note: str = ""  # why the search used full text only, when it could have used vectors

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {"collections": list(self.collections), "text": self.text,
                                   "sources": [s.to_dict() for s in self.sources],
                                   "tokens": self.tokens}
        if self.notice:
            data["notice"] = self.notice
        if self.note:
            data["note"] = self.note
        return data

    @classmethod
    def from_dict(cls, data: object) -> KnowledgeTurn | None:
        """Lenient: a malformed record reads as none, a malformed source is left out."""
        if not isinstance(data, dict):
            return None
        text, notice, tokens = data.get("text"), data.get("notice"), data.get("tokens")
        note = data.get("note")
        collections = data.get("collections")
        sources = data.get("sources")
        return cls(tuple(c for c in collections if isinstance(c, str))
                   if isinstance(collections, list) else (),
                   text if isinstance(text, str) else "",
                   tuple(s for s in map(_source, sources if isinstance(sources, list) else [])
                         if s is not None),
                   tokens if type(tokens) is int else 0,
                   notice if isinstance(notice, str) else "",
                   note if isinstance(note, str) else "")


def given_passage(turn: KnowledgeTurn, source: Source) -> str | None:
    """The text of one passage as the reply was given it (read back from the record, so it
    is what the model saw even after the file changed); None when the record lacks it."""
    head = f"[{source.number}] {source.path}, {source.location}\n"
    start = turn.text.find(head)
    if start < 0:
        return None
    opener_end = turn.text.find("\n", start + len(head))
    opener = turn.text[start + len(head):opener_end]
    bar = opener[:len(opener) - len(opener.lstrip("`"))]
    if len(bar) < 3 or opener_end < 0:
        return None
    end = turn.text.find(f"\n{bar}", opener_end)  # longer than any run of ` inside
    return turn.text[opener_end + 1:end] if end >= 0 else None


def _source(data: object) -> Source | None:
    if not isinstance(data, dict):
        return None
    number, chunk_id = data.get("number"), data.get("chunk_id")
    strings = [data.get(k) for k in ("collection", "path", "location")]
    if type(number) is not int or type(chunk_id) is not int or \
            not all(isinstance(s, str) for s in strings):
        return None
    return Source(number, str(strings[0]), str(strings[1]), str(strings[2]), chunk_id)


def for_question(collections: Sequence[str], question: str, n_ctx: int,
                 open_index: OpenIndex = default_index) -> KnowledgeTurn | None:
    """The passages for the question from the chat's collections; None when it uses none."""
    if not collections:
        return None
    names = tuple(collections)
    try:
        with open_index(names) as index:
            got = retrieve(index, names, question, budget(n_ctx))
            note = index.search_note
    except UNREADABLE as exc:
        # The index's own words say what went wrong (cannot be opened, no such collection).
        return KnowledgeTurn(names, "", notice=f"Answered without your documents: {exc}")
    return KnowledgeTurn(names, got.text, got.sources, got.tokens, note=note)


def with_passages(messages: Sequence[Message], turn: KnowledgeTurn | None
                  ) -> tuple[Message, ...]:
    """The messages with the passages before the user's last question."""
    if turn is None or not turn.text:
        return tuple(messages)
    last = max(i for i, m in enumerate(messages) if m.role == "user")
    m = messages[last]
    given = with_knowledge(m.content, Retrieved(turn.text, turn.sources, turn.tokens))
    return (*messages[:last], dataclasses.replace(m, content=given), *messages[last + 1:])


def recorded(provenance: Provenance) -> KnowledgeTurn | None:
    """What a saved reply was given (its chips, its notice, the inspector's replay)."""
    return KnowledgeTurn.from_dict(provenance.extra.get(KEY))


def describe(turn: KnowledgeTurn) -> list[tuple[str, str]]:
    """Readable rows for the Details view: (label, value)."""
    if turn.notice:
        return [("Knowledge", turn.notice)]
    note = [("Search", turn.note)] if turn.note else []
    if not turn.sources:
        return [("Knowledge", f"nothing found in {', '.join(turn.collections)}"), *note]
    return [("Knowledge", f"≈{turn.tokens:,} tokens from {', '.join(turn.collections)}"),
            *note,
            *((f"Source [{s.number}]", f"{s.path}, {s.location}") for s in turn.sources)]


def recording(provenance: Provenance, turn: KnowledgeTurn | None) -> Provenance:
    """The provenance with the reply's knowledge record (none: as it was)."""
    if turn is None:
        return provenance
    return provenance.replace(extra={**provenance.extra, KEY: turn.to_dict()})
