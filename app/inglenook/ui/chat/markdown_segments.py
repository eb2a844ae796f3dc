"""A long message rendered as a series of bounded parts, for "Show all".

Qt lays out one QTextDocument in one piece, so the time it takes grows with the document: a
10,000-row table takes over a second. A long message is therefore cut into parts of at most
SEGMENT_CHARS characters and SEGMENT_LINES lines, each shown as its own document. Cuts fall
between top-level blocks where possible; a block that is itself too big is split along its own
structure: a table by rows (each part repeats the header), code by lines (later parts have no
Copy header; Copy still copies the whole block), a paragraph at spaces, a list or quote by its
items (each part keeps the container). Inline parsing and HTML happen one part at a time, so
parts can be shown as they come. No Qt here: this runs on a worker thread.

A whole 5 MB text parsed at once is ~700,000 live Python objects, and each of the garbage
collector's full passes over them stops every thread, the GUI's too, for 100-200 ms. So
`render_whole` parses the text in source slices of about SLICE_CHARS, cut at blank lines outside
fenced code; where a slice must end inside a fence or a table, the fence is closed and reopened
(the block keeps its Copy index) or the table's header is repeated.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

from markdown_it.token import Token

from inglenook.ui.chat.markdown import (
    _CODE_TYPES,
    _MD,
    DEFAULT_PALETTE,
    MarkdownPalette,
    _code_text,
    _make_parser,
    block_end,
    finish_blocks,
    normalized,
)

# ~10-25 ms of layout each: a table part of 100 rows is the slowest.
SEGMENT_CHARS = 8_000
SEGMENT_LINES = 60
SLICE_CHARS = 32_000

_BLOCKS_ONLY = _make_parser()
_BLOCKS_ONLY.core.ruler.disable("inline")  # done per part, in render_part


@dataclasses.dataclass(frozen=True)
class SegmentPlan:
    """The parts of a message, not yet rendered, and every code block's exact source."""

    parts: list[list[Token]]
    code_blocks: tuple[str, ...]
    env: dict[str, Any]


@dataclasses.dataclass
class _Unit:
    tokens: list[Token]
    chars: int
    lines: int


def _measure(tokens: list[Token]) -> _Unit:
    """Size a run of tokens: characters, and lines as Qt lays them out (a table row is one)."""
    chars = lines = 0
    in_cell = False
    for token in tokens:
        chars += len(token.content)
        if token.type == "tr_open":
            lines += 1
        elif token.type in ("td_open", "th_open"):
            in_cell = True
        elif token.type in ("td_close", "th_close"):
            in_cell = False
        elif token.content and not in_cell:
            lines += token.content.count("\n") + 1
    return _Unit(tokens, chars, lines)


def _fits(unit: _Unit, max_chars: int, max_lines: int) -> bool:
    return unit.chars <= max_chars and unit.lines <= max_lines


def _pieces_of_text(text: str, max_chars: int, max_lines: int, at_lines: bool) -> list[str]:
    """Cut `text` into pieces within both limits: at line ends when `at_lines`, else at spaces;
    an over-long line or word is cut where it must be."""
    pieces: list[str] = []
    start = 0
    while start < len(text):
        limit = min(len(text), start + max_chars)
        end = limit
        if at_lines:
            newline, count = start - 1, 0
            while count < max_lines:
                newline = text.find("\n", newline + 1, limit)
                if newline < 0:
                    break
                count += 1
            if count == max_lines:
                end = newline + 1
            elif limit < len(text) and (last := text.rfind("\n", start, limit)) >= 0:
                end = last + 1
        if end == limit < len(text):
            space = text.rfind(" ", start + max_chars // 2, limit)
            end = space + 1 if space >= 0 else limit
        pieces.append(text[start:end])
        start = end
    return pieces or [""]


def _split_leaf(token: Token, max_chars: int, max_lines: int) -> list[_Unit]:
    is_code = token.type in _CODE_TYPES
    text = _code_text(token) if is_code else token.content
    pieces = _pieces_of_text(text, max_chars, max_lines, at_lines=True)
    units = []
    for n, piece in enumerate(pieces):
        meta = dict(token.meta, continued=bool(token.meta.get("continued")) or n > 0)
        content = piece.removesuffix("\n") + "\n" if is_code else piece
        units.append(_measure([dataclasses.replace(token, content=content, meta=meta)]))
    return units


def _split_inline(block: list[Token], max_chars: int, max_lines: int) -> list[_Unit]:
    opening, inline, closing = block
    pieces = _pieces_of_text(inline.content, max_chars, max_lines, at_lines=False)
    return [_measure([opening, dataclasses.replace(inline, content=p, children=None), closing])
            for p in pieces]


def _wrap(opening: Token, closing: Token, groups: list[list[_Unit]]) -> list[_Unit]:
    units = []
    items_before = 0
    start = int(opening.attrGet("start") or 1)
    for group in groups:
        tokens = [t for unit in group for t in unit.tokens]
        first = opening
        if opening.type == "ordered_list_open" and items_before:
            first = dataclasses.replace(opening, attrs=dict(opening.attrs))
            first.attrSet("start", start + items_before)
        units.append(_measure([first, *tokens, closing]))
        items_before += sum(1 for t in tokens
                            if t.type == "list_item_open" and t.level == opening.level + 1)
    return units


def _pack(units: list[_Unit], max_chars: int, max_lines: int) -> list[list[_Unit]]:
    groups: list[list[_Unit]] = []
    chars = lines = 0
    for unit in units:
        if groups and chars + unit.chars <= max_chars and lines + unit.lines <= max_lines:
            groups[-1].append(unit)
            chars += unit.chars
            lines += unit.lines
        else:
            groups.append([unit])
            chars, lines = unit.chars, unit.lines
    return groups


def _blocks(tokens: list[Token]) -> list[list[Token]]:
    out = []
    start = 0
    while start < len(tokens):
        end = block_end(tokens, start)
        out.append(tokens[start:end])
        start = end
    return out


def _split_table(block: list[Token], max_chars: int, max_lines: int) -> list[_Unit]:
    body = next(i for i, t in enumerate(block) if t.type == "tbody_open")
    head, rows, tail = block[:body + 1], block[body + 1:-2], block[-2:]
    groups = _pack([_measure(row) for row in _blocks(rows)], max_chars, max_lines)
    return [_measure([*head, *[t for u in g for t in u.tokens], *tail]) for g in groups]


def _split(block: list[Token], max_chars: int, max_lines: int) -> list[_Unit]:
    unit = _measure(block)
    if _fits(unit, max_chars, max_lines):
        return [unit]
    first = block[0]
    if len(block) == 1 and first.content:
        return _split_leaf(first, max_chars, max_lines)
    if len(block) == 3 and block[1].type == "inline":
        return _split_inline(block, max_chars, max_lines)
    if first.type == "table_open" and any(t.type == "tbody_open" for t in block):
        return _split_table(block, max_chars, max_lines)
    if first.nesting == 1 and len(block) > 2:
        inner = [u for child in _blocks(block[1:-1]) for u in _split(child, max_chars, max_lines)]
        return _wrap(first, block[-1], _pack(inner, max_chars, max_lines))
    return [unit]


def plan_segments(text: str, palette: MarkdownPalette = DEFAULT_PALETTE,
                  max_chars: int = SEGMENT_CHARS, max_lines: int = SEGMENT_LINES,
                  first_index: int = 0, continued: bool = False) -> SegmentPlan:
    """Parse `text` at block level and cut it into parts of bounded size. Code blocks are
    numbered from `first_index`; `continued`: the first one goes on from the previous slice."""
    env: dict[str, Any] = {"palette": palette}
    source = normalized(text)
    tokens = finish_blocks(_BLOCKS_ONLY.parse(source, env), source,
                           _BLOCKS_ONLY.options["maxNesting"], first_index)
    if continued:
        first_code = next((t for t in tokens if t.type in _CODE_TYPES), None)
        if first_code is not None:
            first_code.meta["continued"] = True
    blocks = tuple(_code_text(t) for t in tokens if t.type in _CODE_TYPES)
    units = [u for block in _blocks(tokens) for u in _split(block, max_chars, max_lines)]
    parts = [[t for u in group for t in u.tokens] for group in _pack(units, max_chars, max_lines)]
    return SegmentPlan(parts or [[]], blocks, env)


def render_part(plan: SegmentPlan, index: int) -> str:
    """HTML for part `index` of `plan`."""
    tokens = plan.parts[index]
    for token in tokens:
        # Block rules leave inline tokens with no children (or an empty list); a table's header
        # is shared by its parts, so it is parsed once.
        if token.type == "inline" and not token.children and token.content:
            token.children = []
            _MD.inline.parse(token.content, _MD, plan.env, token.children)
            for child in token.children:
                if child.type == "text_special":  # what the skipped text_join rule would do
                    child.type = "text"
    return _MD.renderer.render(tokens, _MD.options, plan.env)


_FENCE = re.compile(r"[ \t>]*(`{3,}|~{3,})([^`]*)$")
_TABLE_RULE = re.compile(r"[ \t>]*\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")


def source_slices(text: str, size: int = SLICE_CHARS) -> Iterator[tuple[str, bool, int]]:
    """(slice, whether it goes on with the previous slice's code block, where it ends in
    `text`) for consecutive slices of about `size` characters. A slice ends after a blank line
    outside fenced code where there is one; otherwise at a line end, closing an open fence (the
    next slice reopens it) or repeating an open table's header in the next slice. A single line
    is never cut."""
    pos, prefix, continued = 0, "", False
    fence: tuple[str, str] | None = None  # the open fence's marker and its opening line
    table: str | None = None  # the open table's header and rule lines
    while len(text) - pos > size:
        previous, cut, line_start = "", -1, pos
        while line_start < len(text):
            newline = text.find("\n", line_start)
            line_end = len(text) if newline < 0 else newline + 1
            line = text[line_start:line_end].rstrip("\n")
            match = _FENCE.match(line)
            if fence is None and match:
                fence = (match[1], line)
            elif (fence is not None and match and match[1][0] == fence[0][0]
                  and len(match[1]) >= len(fence[0]) and not match[2].strip()):
                fence = None
            elif fence is None and not line.strip():
                table, cut = None, line_end  # a clean place to cut
            elif fence is None and table is None and "|" in previous and _TABLE_RULE.match(line):
                table = previous + "\n" + line
            previous, line_start = line, line_end
            if line_end - pos >= size:
                break
        piece, was_continued = prefix + text[pos:line_start], continued
        prefix, continued = "", False
        if cut - pos >= size // 4:
            piece = piece[:len(piece) - (line_start - cut)]
            fence, table, line_start = None, None, cut
        elif fence is not None:  # close it here, open it again in the next slice
            piece += ("" if piece.endswith("\n") else "\n") + fence[0] + "\n"
            prefix, continued = fence[1] + "\n", True
        elif table is not None:
            prefix = table + "\n"
        yield piece, was_continued, line_start
        pos = line_start
    if pos < len(text) or not text:
        yield prefix + text[pos:], continued, len(text)


class WholeRender:
    """Renders a whole long text part by part (`parts()`), keeping only one slice parsed at a
    time; `code_blocks` holds the exact source of every code block seen so far."""

    def __init__(self, text: str, palette: MarkdownPalette = DEFAULT_PALETTE) -> None:
        self.text = normalized(text)
        self.palette = palette
        self.code_blocks: list[str] = []

    def parts(self) -> Iterator[tuple[str, float]]:
        """(html, the fraction of the text rendered so far) of each part, in order."""
        for piece, continued, end in source_slices(self.text):
            first = len(self.code_blocks) - (1 if continued and self.code_blocks else 0)
            plan = plan_segments(piece, self.palette, first_index=first,
                                 continued=continued and bool(self.code_blocks))
            blocks = list(plan.code_blocks)
            if first < len(self.code_blocks) and blocks:
                self.code_blocks[-1] += "\n" + blocks.pop(0)
            self.code_blocks.extend(blocks)
            for index in range(len(plan.parts)):
                html = render_part(plan, index)
                plan.parts[index] = []  # its tokens are garbage now, not long-lived objects
                yield html, end / max(1, len(self.text))


def render_segments(text: str, palette: MarkdownPalette = DEFAULT_PALETTE,
                    ) -> Iterator[str]:
    """The HTML of each part of `text`, in order."""
    return (html for html, _done in WholeRender(text, palette).parts())


def all_code_blocks(text: str) -> tuple[str, ...]:
    """The exact source of every code block in `text`, from a block-level parse only."""
    source = normalized(text)
    tokens = finish_blocks(_BLOCKS_ONLY.parse(source, {}), source,
                           _BLOCKS_ONLY.options["maxNesting"])
    return tuple(_code_text(t) for t in tokens if t.type in _CODE_TYPES)
