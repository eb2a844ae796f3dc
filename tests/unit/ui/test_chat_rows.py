"""The transcript's geometry without widgets: tops from heights, the row at a height, and
estimates from the outline."""

from __future__ import annotations

from inglenook.store.branch import Outline
from inglenook.ui.chat.rows import HeightCache, Metrics, RowGeometry, estimate, estimates


def test_tops_follow_heights_and_spacing() -> None:
    geometry = RowGeometry(margin_top=20, margin_bottom=20, spacing=14)
    geometry.reset([100, 50, 30], [False] * 3)
    assert [geometry.top(i) for i in range(3)] == [20, 134, 198]
    assert geometry.total() == 20 + 180 + 28 + 20
    assert geometry.index_at(0) == 0 and geometry.index_at(133) == 0
    assert geometry.index_at(134) == 1 and geometry.index_at(10_000) == 2
    assert geometry.set(1, 80) == 30
    assert geometry.top(2) == 228 and geometry.total() == 278 and geometry.measured[1]
    geometry.insert(3, 10)
    assert geometry.top(3) == 228 + 30 + 14 and len(geometry) == 4
    geometry.truncate(1)
    assert geometry.total() == 140 and geometry.index_at(500) == 0


def test_many_rows_are_found_by_height() -> None:
    geometry = RowGeometry()
    geometry.reset([40] * 10_000, [False] * 10_000)
    for index in (0, 17, 5_000, 9_999):
        assert geometry.index_at(geometry.top(index)) == index
        assert geometry.index_at(geometry.top(index) + 39) == index


def test_estimates_grow_with_text_and_wrap_with_width() -> None:
    rows = Outline()
    rows.extend([(1, "user", 10, 0, 0, 0, 0, 0, 0), (2, "assistant", 2_000, 0, 0, 0, 0, 0, 0),
                 (3, "assistant", 2_000, 0, 40, 0, 0, 0, 0),
                 (4, "assistant", 2_000, 90, 0, 1, 0, 0, 0),
                 (5, "user", 10, 0, 0, 0, 2, 300, 0), (6, "user", 10, 0, 0, 0, 1, 3_000, 1)])
    metrics = Metrics()
    narrow = [estimate(rows, i, 300, metrics) for i in range(6)]
    wide = [estimate(rows, i, 800, metrics) for i in range(6)]
    assert narrow[1] > wide[1] > narrow[0]  # wrapped at the width
    assert narrow[2] > narrow[1]  # newlines are lines
    assert narrow[3] > narrow[1]  # tool cards and the folded reasoning take room
    assert narrow[4] > narrow[0]  # so do attachment chips
    assert narrow[5] > narrow[4]  # and images' thumbnails more
    assert estimates(rows, {"user": 300, "assistant": 300}, metrics) == narrow
    sources = Outline()
    sources.extend([(6, "assistant", 100, 0, 0, 0, 1, 0, 0),
                    (7, "assistant", 100, 0, 0, 0, 10, 0, 0)])
    one, ten = (estimate(sources, i, 500, metrics) for i in range(2))
    assert ten - one == 4 * metrics.chip_row  # ten source chips wrap onto five lines


def test_the_height_cache_is_bounded() -> None:
    cache = HeightCache(entries=3)
    for key in range(5):
        cache.put(key, 700, key * 10)
    assert cache.get(0, 700) is None and cache.get(4, 700) == 40
    cache.forget(4)
    assert cache.get(4, 700) is None and cache.get(3, 700) == 30
