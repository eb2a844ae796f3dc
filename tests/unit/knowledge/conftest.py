"""Each test starts with no approximate index in memory (ann.py keeps one per database and
process), and leaves no build running."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from inglenook.knowledge import ann


@pytest.fixture(autouse=True)
def fresh_vector_indexes() -> Iterator[None]:
    yield
    ann.close_all()


@pytest.fixture(autouse=True)
def no_remembered_refusals() -> Iterator[None]:
    """The indexer remembers, per process, contents a converter refused: not across tests."""
    from inglenook.knowledge import indexer

    indexer._REFUSED.clear()
    yield
    indexer._REFUSED.clear()
