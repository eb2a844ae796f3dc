"""engine/host/vision.py: an image's placeholder ids are its hash, so prompts (and the KV states
keyed on them) with different images never share the image's positions."""

from __future__ import annotations

from inglenook.engine.host.vision import (
    ImageSpan,
    chunk_key,
    is_placeholder,
    placeholders,
    spans_of,
)

A, B = "a" * 64, "b" * 64


def test_placeholders_are_negative_distinct_and_follow_the_hash() -> None:
    ids = placeholders(A, 16)
    assert all(is_placeholder(t) and t >= -(2**31) for t in ids)
    assert len(set(ids)) == 16
    assert ids == placeholders(A, 16)
    assert not set(ids) & set(placeholders(B, 16))


def test_spans_are_found_in_order_even_for_the_same_image_twice() -> None:
    a2 = chunk_key(A, 1)  # A's second chunk (a slice)
    tokens = [1, 2, *placeholders(A, 3), 5, *placeholders(A, 3), 7, *placeholders(a2, 2),
              *placeholders(B, 2), 9]
    chunks = [ImageSpan(0, 3, A), ImageSpan(0, 3, A), ImageSpan(0, 2, a2, True),
              ImageSpan(0, 2, B)]
    spans = spans_of(tokens, chunks)
    assert [(s.start, s.n, s.key, s.non_causal) for s in spans] == [
        (2, 3, A, False), (6, 3, A, False), (10, 2, a2, True), (12, 2, B, False)]


def test_each_chunk_of_an_image_has_ids_of_its_own() -> None:
    assert chunk_key(A, 0) == A  # the first keeps the ids states saved before slices hold
    assert not set(placeholders(chunk_key(A, 1), 4)) & set(placeholders(A, 4))
