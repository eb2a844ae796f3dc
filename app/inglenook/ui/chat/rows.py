"""Where the transcript's rows sit, without a widget for any of them (Qt-free).

Every row has a height: measured once its bubble has been laid out at the column's width, else
estimated from what the store's outline says of its message (characters, newlines, its
chips: a user's attachments, a reply's sources; the rows are an `Outline`, columns of numbers,
not an object per row). Tops are the running sum of heights and spacing, kept for a prefix
and extended when asked, so a change at the end of a 10,000-row chat (the reply streaming)
costs nothing for the rows above.

Measured heights are also kept by message and width (`HeightCache`, bounded), so returning to a
chat places its rows where they were.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from dataclasses import dataclass
from itertools import accumulate

from inglenook.store.branch import Outline

CACHE_ENTRIES = 20_000


@dataclass(frozen=True, slots=True)
class Metrics:
    """What an estimate needs of the font and the bubble's frame, measured once by the view."""

    char_width: float = 7.5
    line_height: float = 20.0
    chrome: int = 62  # a reply's author line, footer and padding
    user_chrome: int = 52
    chip_row: int = 30
    image_row: int = 76  # a row of thumbnails (ui/chat/image_parts.THUMB_SIDE and a frame)
    chip_width: int = 230  # a reply's source chips wrap, a few to a line
    cards: int = 60


def estimate(rows: Outline, index: int, width: int, metrics: Metrics) -> int:
    """A height for row `index` at bubble width `width`: its lines wrapped at the average
    character width, plus the frame. Markdown (lists, tables, code) is taller than prose:
    newlines count as lines of their own, which covers most of it. A reply's reasoning is
    folded to one line."""
    return _estimate(rows.roles[index], rows.chars[index], rows.reasoning[index],
                     rows.newlines[index], rows.calls_tools[index], rows.attachments[index],
                     rows.images[index], width, metrics)


def estimates(rows: Outline, widths: dict[str, int], metrics: Metrics) -> list[int]:
    """`estimate` for every row (widths by role): opening a 10,000-message chat does it."""
    return [_estimate(role, chars, reasoning, newlines, calls, attachments, images,
                      widths[role], metrics)
            for role, chars, reasoning, newlines, calls, attachments, images
            in zip(rows.roles, rows.chars, rows.reasoning, rows.newlines, rows.calls_tools,
                   rows.attachments, rows.images, strict=True)]


def _estimate(role: str, chars: int, reasoning: int, newlines: int, calls: int,
              attachments: int, images: int, width: int, metrics: Metrics) -> int:
    per_line = max(1.0, max(40.0, width - 30.0) / metrics.char_width)
    lines = (newlines + 1 + chars / per_line if chars else 0) + (1 if reasoning else 0)
    chrome = metrics.chrome if role == "assistant" else metrics.user_chrome
    chip_rows = -(-attachments // max(1, int(width - 28) // metrics.chip_width))
    chips = metrics.image_row if images else metrics.chip_row * chip_rows
    return int(chrome + lines * metrics.line_height + chips
               + (metrics.cards if calls else 0))


class HeightCache:
    """Measured heights by (message, width), the most recent CACHE_ENTRIES."""

    def __init__(self, entries: int = CACHE_ENTRIES) -> None:
        self._heights: OrderedDict[tuple[int, int], int] = OrderedDict()
        self._entries = entries

    def get(self, key: int, width: int) -> int | None:
        return self._heights.get((key, width))

    def put(self, key: int, width: int, height: int) -> None:
        self._heights[(key, width)] = height
        self._heights.move_to_end((key, width))
        while len(self._heights) > self._entries:
            self._heights.popitem(last=False)

    def forget(self, key: int) -> None:
        for found in [k for k in self._heights if k[0] == key]:
            del self._heights[found]


@dataclass(frozen=True)
class Margin:
    """The rows around the view: `keep` (first, last) keep their bubbles, `make` should have
    one (nearest first: below the view, then upwards from its top), `ahead` beyond them are
    read and rendered ahead of time (nearest first)."""

    keep: tuple[int, int]
    make: list[int]
    ahead: list[int]


class RowGeometry:
    """Heights and tops of the rows at one width. `top(i)` is where row i starts, counting
    the top margin and the spacing between rows. Measured heights are also kept in `cache`."""

    def __init__(self, margin_top: int = 20, margin_bottom: int = 20, spacing: int = 14) -> None:
        self.margin_top, self.margin_bottom, self.spacing = margin_top, margin_bottom, spacing
        self.heights: list[int] = []
        self.measured: list[bool] = []
        self._tops: list[int] = []  # valid for rows 0 .. len(_tops) - 1
        self._sum = 0  # of every height, kept as they change
        self.cache = HeightCache()

    def lay_out(self, rows: Outline, widths: dict[str, int], metrics: Metrics) -> None:
        """Every row's height at these bubble widths (by role): measured before, or
        estimated."""
        heights = estimates(rows, widths, metrics)
        measured = [False] * len(heights)
        cache = self.cache
        for index, (key, role) in enumerate(zip(rows.ids, rows.roles, strict=True)):
            cached = cache.get(key, widths[role])
            if cached is not None:
                heights[index], measured[index] = cached, True
        self.reset(heights, measured)

    def guess(self, rows: Outline, index: int, width: int, metrics: Metrics) -> int:
        """Row `index`'s height at `width` when it has no bubble: measured before, or
        estimated."""
        cached = self.cache.get(rows.ids[index], width)
        return cached if cached is not None else estimate(rows, index, width, metrics)

    def rows_in(self, value: int, height: int) -> range:
        """The rows at least partly in a view of `height` px at `value`."""
        if not self.heights:
            return range(0)
        return range(self.index_at(value), self.index_at(value + height) + 1)

    def margin(self, value: int, height: int, above: float, below: float, keep: float,
               ahead: float) -> Margin:
        """The rows around a view of `height` px at `value`; the margins in screens."""
        def at(screens: float, down: bool) -> int:
            return self.index_at(int(value + height + screens * height) if down
                                 else int(value - screens * height))

        first, last, view_first = at(above, False), at(below, True), self.index_at(value)
        top, bottom = at(above + ahead, False), at(below + ahead, True)
        return Margin((at(keep, False), at(keep, True)),
                      [*range(view_first, last + 1), *range(view_first - 1, first - 1, -1)],
                      [*range(first - 1, top - 1, -1), *range(last + 1, bottom + 1)])

    def measure(self, index: int, key: int, width: int, height: int) -> None:
        self.set(index, height)
        self.cache.put(key, width, height)

    def __len__(self) -> int:
        return len(self.heights)

    def reset(self, heights: list[int], measured: list[bool]) -> None:
        self.heights, self.measured = heights, measured
        self._tops = []
        self._sum = sum(heights)

    def set(self, index: int, height: int, measured: bool = True) -> int:
        """Change one row's height; returns by how much it changed."""
        delta = height - self.heights[index]
        if delta:
            self.heights[index] = height
            self._sum += delta
            del self._tops[index + 1:]
        self.measured[index] = measured
        return delta

    def insert(self, index: int, height: int, measured: bool = False) -> None:
        self.heights.insert(index, height)
        self.measured.insert(index, measured)
        self._sum += height
        del self._tops[index:]

    def truncate(self, count: int) -> None:
        self._sum -= sum(self.heights[count:])
        del self.heights[count:], self.measured[count:], self._tops[count:]

    def top(self, index: int) -> int:
        tops = self._tops
        if index < len(tops):
            return tops[index]
        if not tops:
            tops.append(self.margin_top)
        step, start = self.spacing, len(tops)
        tops.extend(accumulate((h + step for h in self.heights[start - 1:index]),
                               initial=tops[-1]))
        del tops[start - 1]  # accumulate repeats its initial value first
        return tops[index]

    def bottom(self, index: int) -> int:
        return self.top(index) + self.heights[index]

    def total(self) -> int:
        """The height of the whole column."""
        if not self.heights:
            return 0
        return (self.margin_top + self._sum + self.spacing * (len(self.heights) - 1)
                + self.margin_bottom)

    def index_at(self, y: int) -> int:
        """The row at content height `y` (the last one that starts at or above it)."""
        if not self.heights:
            return 0
        if y >= self.total():
            return len(self.heights) - 1
        tops = self._tops
        if not tops or tops[-1] < y:  # extend as far as needed; usually near the end already
            self.top(self._reach(y))
        return max(0, min(bisect.bisect_right(self._tops, y) - 1, len(self.heights) - 1))

    def _reach(self, y: int) -> int:
        """A row index at or past content height `y`, extending the tops row by row."""
        index = max(0, len(self._tops) - 1)
        while index < len(self.heights) - 1 and self.top(index) <= y:
            index = min(len(self.heights) - 1, index + 64)
        return index
