"""engine/host/vision.py: an image's placeholder ids are its hash, so prompts (and the KV states
keyed on them) with different images never share the image's positions."""

from __future__ import annotations

from inglenook.core.messages import ImageRef
from inglenook.engine.host.vision import is_placeholder, placeholders, spans_of

A, B = "a" * 64, "b" * 64


def test_placeholders_are_negative_distinct_and_follow_the_hash() -> None:
    ids = placeholders(A, 16)
    assert all(is_placeholder(t) and t >= -(2**31) for t in ids)
    assert len(set(ids)) == 16
    assert ids == placeholders(A, 16)
    assert not set(ids) & set(placeholders(B, 16))


def test_spans_are_found_in_order_even_for_the_same_image_twice() -> None:
    tokens = [1, 2, *placeholders(A, 3), 5, *placeholders(A, 3), *placeholders(B, 2), 9]
    refs = (ImageRef(A, "/a.png"), ImageRef(A, "/a.png"), ImageRef(B, "/b.png"))
    spans = spans_of(tokens, refs, [3, 3, 2])
    assert [(s.start, s.n, s.sha256) for s in spans] == [(2, 3, A), (6, 3, A), (9, 2, B)]
