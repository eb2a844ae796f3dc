"""A long conversation written straight into the store (as an import does): numbered messages
of prose, lists, tables and code, so a test can find message N by its text."""

from __future__ import annotations

import time

from inglenook.store import Store
from inglenook.store.imports import ImportBatch, ImportedConversation, ImportedMessage

TABLE = "| Name | Count |\n|------|------:|\n| alpha | 1 |\n| beta | 22 |\n"
CODE = "```python\ndef total(values):\n    return sum(values)\n```\n"


def text_of(n: int) -> str:
    """Message n: a question (even) or a reply (odd) of a few shapes and heights."""
    if n % 2 == 0:
        return f"Question {n}: tell me about item {n}."
    shape = n % 7
    body = f"Reply {n}. " + "Some ordinary words about the item at hand. " * (1 + n % 5)
    if shape == 1:
        body += "\n\n" + "\n".join(f"{i}. point {i} of reply {n}" for i in range(1, 5))
    elif shape == 3:
        body += "\n\n" + TABLE
    elif shape == 5:
        body += "\n\n" + CODE
    return body


def add_long_chat(store: Store, messages: int, title: str = "A long chat",
                  reasoning: dict[int, str] | None = None) -> int:
    """A conversation of `messages` messages on one branch; its id. `reasoning`: the
    reasoning of some replies, by index."""
    now = time.time() - messages
    items = tuple(
        ImportedMessage(parent=n - 1 if n else None, role="user" if n % 2 == 0 else "assistant",
                        content=text_of(n), status="complete", created_at=now + n, active=True,
                        provenance={}, reasoning=(reasoning or {}).get(n, ""))
        for n in range(messages))
    conversation = ImportedConversation(title, False, None, now, now + messages, None, items)
    return store.import_batch(ImportBatch("a test", [conversation]))[0]
