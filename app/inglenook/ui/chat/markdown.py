"""Markdown from untrusted model output to the HTML subset a QTextDocument understands.

Everything a model writes is treated as hostile: raw HTML is shown as text, images never become
`<img>` (which would make Qt load a resource), and only http, https and mailto links become
anchors. Code blocks get a "Copy" anchor `copy:N`; since no link the model writes can have that
scheme, the view can trust it. No Qt here, so this is cheap to test and to fuzz.

A code block is two tables: a header (language, Copy) as wide as the text, and the code with its
lines unwrapped (`white-space:pre`), which Qt lays out as wide as its longest line; the view
scrolls that table sideways (rich_text.py), so Copy stays in view. A block with a line of more
than WRAP_LINE_CHARS is data rather than code to read, and wraps. A fenced block is highlighted
(code_highlight.py) once its closing fence has arrived: the block still streaming stays plain.

Hostile text must also stay cheap to lay out and never vanish: runs of 48+ characters without a
space get zero-width break opportunities (Qt's fallback line breaking is quadratic in the run's
length; unwrapped code lines are never broken, so they need none), and a block nested
deeper than Qt can show
(or past markdown-it's nesting limit, where it silently drops content) is shown as its plain
source. `display_cut` picks how much of a long message is shown at first.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.texmath import texmath_plugin

from inglenook.ui.chat.code_highlight import highlight
from inglenook.ui.chat.math_text import math_html
from inglenook.ui.theme import MarkdownPalette

__all__ = [
    "DEFAULT_PALETTE",
    "HEAD_CHARS",
    "HEAD_LINES",
    "HEAD_ROWS",
    "MarkdownPalette",
    "RenderedMarkdown",
    "code_blocks",
    "display_cut",
    "render",
    "render_head",
    "render_markdown",
]

# Scheme checks run on the normalized href markdown-it produced (percent-encoded, no whitespace).
_SAFE_HREF = re.compile(r"(?:https?://|mailto:)", re.IGNORECASE)
_CODE_TYPES = frozenset({"fence", "code_block"})
_CONTAINERS = frozenset({"blockquote_open", "bullet_list_open", "ordered_list_open"})
_MATH = ("math_inline", "math_inline_double", "math_block", "math_block_eqno", "math_single")
# Deeper than this, indentation leaves no room for text in a bubble; shown as plain source.
MAX_DISPLAY_DEPTH = 8
# What a long message shows before "Show all": a bounded amount of work for Qt's layout.
HEAD_CHARS = 40_000
HEAD_LINES = 1_000
HEAD_ROWS = 250
ZWSP = "\u200b"
_LONG_RUN = re.compile(r"\S{48,}")
# A code line longer than this (minified code, a hex dump) wraps: scrolling sideways through it
# is of no use, and Qt draws every glyph of a line however little of it is in view.
WRAP_LINE_CHARS = 1_000
_GIANT_LINE = re.compile(rf"[^\n]{{{WRAP_LINE_CHARS + 1}}}")
_BREAK_EVERY = 24


DEFAULT_PALETTE = MarkdownPalette()


@dataclass(frozen=True)
class RenderedMarkdown:
    """The HTML for one message and the exact source of each code block, by Copy index."""

    html: str
    code_blocks: tuple[str, ...]


def breakable(text: str) -> str:
    """`text` with a zero-width space every few characters of any very long unbroken run."""
    if len(text) < 48:
        return text
    return _LONG_RUN.sub(
        lambda m: ZWSP.join(m[0][i:i + _BREAK_EVERY] for i in range(0, len(m[0]), _BREAK_EVERY)),
        text)


def display_cut(text: str, max_chars: int = HEAD_CHARS, max_lines: int = HEAD_LINES,
                max_rows: int = HEAD_ROWS) -> int:
    """Where to cut `text` for the first display: its length if it is short enough, else the end
    of a line (or a space) within all limits. Table rows are counted apart: laying one out costs
    Qt far more than a line of text or code."""
    limit = min(len(text), max_chars)
    start = lines = rows = 0
    while (newline := text.find("\n", start, limit)) >= 0:
        lines += 1
        rows += text[start:newline].lstrip().startswith("|")
        start = newline + 1
        if lines >= max_lines or rows >= max_rows:
            return start
    if limit == len(text):
        return limit
    for sep in ("\n", " "):
        at = text.rfind(sep, limit // 2, limit)
        if at >= 0:
            return at + 1
    return limit


def _code_text(token: Token) -> str:
    # Fence and indented-block content always ends with the line break before the closing fence;
    # it is not part of the code the user wants to copy.
    content = token.content
    return content[:-1] if content.endswith("\n") else content


class _SafeRenderer(RendererHTML):
    """markdown-it's HTML renderer with every way out of the document closed."""

    def _palette(self, env: Any) -> MarkdownPalette:
        return env.get("palette", DEFAULT_PALETTE) if isinstance(env, dict) else DEFAULT_PALETTE

    # html is off in the parser; these only matter if a plugin ever produces such tokens.
    def html_block(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        return "<p>" + escapeHtml(tokens[idx].content) + "</p>\n"

    def html_inline(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        return escapeHtml(tokens[idx].content)

    def link_open(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        href = str(token.attrGet("href") or "")
        safe = bool(_SAFE_HREF.match(href))
        if safe and href[:7].lower() == "mailto:":
            href = href.split("?", 1)[0]  # some mail clients honour ?attach=/path/to/file
        # Links cannot nest, so a stack pairs each close with its open.
        env.setdefault("_links", []).append((safe, href, token.markup == "autolink"))
        if not safe:
            return ""
        return f'<a href="{escapeHtml(href)}" style="color:{self._palette(env).link}">'

    def link_close(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        stack = env.get("_links")
        if not stack:
            return ""
        safe, href, autolink = stack.pop()
        if safe:
            return "</a>"
        if autolink or not href:
            return ""  # the label already is the URL
        # Show where the link pointed, as inert text, so nothing is silently hidden.
        return f' <span style="color:{self._palette(env).muted}">({escapeHtml(href)})</span>'

    def image(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        children = tokens[idx].children
        alt = self.renderInlineAsText(children, options, env) if children else ""
        return escapeHtml(f"[image: {alt}]" if alt else "[image]")

    def text(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        return escapeHtml(breakable(tokens[idx].content))

    def code_inline(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        bg = self._palette(env).code_background
        code = escapeHtml(breakable(tokens[idx].content))
        return f'<code style="background-color:{bg}">{code}</code>'

    def plain_block(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        # Source of a block nested too deeply to show as Markdown: its text, exactly as written.
        text = escapeHtml(breakable(tokens[idx].content))
        return f'<p style="white-space:pre-wrap">{text}</p>\n'

    def fence(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        info = token.info.strip()
        return self._code(token, info.split(maxsplit=1)[0] if info else "", env)

    def code_block(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        return self._code(tokens[idx], "", env)

    def _code(self, token: Token, lang: str, env: Any) -> str:
        # A table is the only reliable way to give a block a background in Qt rich text.
        p = self._palette(env)
        index = token.meta.get("copy_index", 0)
        label = "Copied" if env.get("copied") == index else "Copy"
        # The header is its own table, as wide as the text, so a long line cannot push Copy
        # out of view; a block continued from the previous part of a long message has none.
        header = "" if token.meta.get("continued") else (
            f'<table width="100%" border="0" cellspacing="0" cellpadding="0"'
            f' style="margin-top:6px"><tr>'
            f'<td bgcolor="{p.code_header}" style="padding:4px 8px">'
            f'<span style="color:{p.muted}">{escapeHtml(lang)}</span></td>'
            f'<td bgcolor="{p.code_header}" align="right" style="padding:4px 8px">'
            f'<a href="copy:{index}" style="color:{p.link}; text-decoration:none">{label}</a>'
            f"</td></tr></table>"
        )
        source = _code_text(token)
        table = f'{header}<table width="100%" border="0" cellspacing="0" cellpadding="0"><tr>'
        if _GIANT_LINE.search(source):  # data, not code to read: wrapped, as plain text
            return (f'{table}<td bgcolor="{p.code_background}" style="padding:8px 10px">'
                    f'<pre style="white-space:pre-wrap">{escapeHtml(breakable(source))}</pre>'
                    f"</td></tr></table>\n")
        code = token.meta.get("closed") and highlight(source, lang, p.code_style,
                                                      p.code_background)
        # The bottom padding leaves room for the view's horizontal scroll bar; no margin, so
        # the table's rect is where its background is (the view scrolls that rect).
        return (
            f'{table}<td bgcolor="{p.code_background}" style="padding:8px 10px 14px 10px">'
            f'<pre style="white-space:pre">{code or escapeHtml(source)}</pre>'
            f"</td></tr></table>\n"
        )

    def blockquote_open(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        # Qt draws no border on one side of a block: a narrow coloured cell is the rule.
        p = self._palette(env)
        return ('<table border="0" cellspacing="0" cellpadding="0"'
                ' style="margin-top:4px; margin-bottom:4px"><tr>'
                f'<td width="3" bgcolor="{p.table_border}"></td>'
                f'<td style="padding-left:10px; color:{p.muted}">\n')

    def blockquote_close(self, tokens: Sequence[Token], idx: int, options: Any, env: Any
                         ) -> str:
        return "</td></tr></table>\n"

    # Math ($…$, $$…$$, \(…\), \[…\]) as rich text: see math_text.py.
    def math_inline(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        return math_html(tokens[idx].content)

    def math_inline_double(self, tokens: Sequence[Token], idx: int, options: Any, env: Any
                           ) -> str:
        return math_html(tokens[idx].content)  # within a paragraph: inline

    def math_block(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        return math_html(tokens[idx].content, display=True)

    math_block_eqno = math_block
    math_single = math_inline

    def table_open(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        colour = self._palette(env).table_border
        return (
            '<table border="1" cellspacing="0" cellpadding="4"'
            f' style="border-collapse:collapse; border-color:{colour}; border-style:solid;'
            ' margin-top:6px; margin-bottom:6px">\n'
        )

    def th_open(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        return self._cell("th", tokens[idx])

    def td_open(self, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        return self._cell("td", tokens[idx])

    @staticmethod
    def _cell(tag: str, token: Token) -> str:
        # markdown-it writes alignment as CSS; Qt honours the plain attribute reliably.
        style = str(token.attrGet("style") or "")
        for align in ("left", "center", "right"):
            if align in style:
                return f'<{tag} align="{align}">'
        return f"<{tag}>"


def _make_parser() -> MarkdownIt:
    md = MarkdownIt(
        "commonmark",
        # breaks: models end lines with single newlines (poems, addresses) and expect them kept.
        {"html": False, "linkify": False, "typographer": False, "breaks": True},
        renderer_cls=_SafeRenderer,
    )
    md.enable("table").enable("strikethrough")
    # Math: "$5 and $10" stays text (no space inside the dollars, no digit after the closing
    # one), as do labels and equation numbers' markup.
    md.use(dollarmath_plugin, allow_space=False, allow_digits=False, double_inline=True,
           allow_labels=False)
    md.use(texmath_plugin, delimiters="brackets")
    renderer = md.renderer
    assert isinstance(renderer, _SafeRenderer)
    for name in _MATH:  # ours, not the plugins' (which write <eq>, unknown to Qt)
        renderer.rules[name] = getattr(renderer, name)
    # The stock validator drops javascript:/file: links back to literal "[x](...)" text; accept
    # every destination here and let the renderer decide, so all unsafe links look the same.
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    return md


_MD = _make_parser()


def _clean(text: str) -> str:
    # A str can carry lone surrogates (surrogateescape-decoded bytes); Qt cannot take them.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def block_end(tokens: Sequence[Token], start: int) -> int:
    """The index just past the block that starts at `start` (its closing token, if it opens)."""
    if tokens[start].nesting != 1:
        return start + 1
    level = tokens[start].level
    end = start + 1
    while end < len(tokens) and not (tokens[end].nesting == -1 and tokens[end].level == level):
        end += 1
    return end + 1


def _too_deep(tokens: Sequence[Token], max_nesting: int) -> bool:
    depth = deepest = 0
    for token in tokens:
        if token.level >= max_nesting - 2:
            return True  # markdown-it stops at its limit and drops what is nested further
        if token.type in _CONTAINERS:
            depth += 1
            deepest = max(deepest, depth)
        elif token.nesting == -1 and token.type.replace("_close", "_open") in _CONTAINERS:
            depth -= 1
    return deepest > MAX_DISPLAY_DEPTH


def normalized(text: str) -> str:
    """`text` as markdown-it sees it, so token line maps index its lines."""
    return _clean(text).replace("\r\n", "\n").replace("\r", "\n").replace("\0", "\ufffd")


def _closed(token: Token, lines: list[str]) -> bool:
    """Whether a code block's closing fence has arrived (indented code never needs one)."""
    if token.type != "fence":
        return True
    if not token.map or token.map[1] - 1 <= token.map[0] or token.map[1] > len(lines):
        return False
    last = lines[token.map[1] - 1].lstrip(" \t>").rstrip()
    marker = token.markup
    return len(last) >= len(marker) and last == marker[0] * len(last)


def finish_blocks(tokens: list[Token], source: str, max_nesting: int, first_index: int = 0,
                  ) -> list[Token]:
    """Replace top-level blocks nested too deeply by their plain source, and number the code
    blocks in source order from `first_index` (code tokens are flat at block level, even inside
    lists and quotes), marking those whose closing fence has arrived."""
    out: list[Token] = []
    lines: list[str] | None = None
    start = 0
    while start < len(tokens):
        end = block_end(tokens, start)
        first = tokens[start]
        if first.nesting == 1 and first.map and _too_deep(tokens[start:end], max_nesting):
            lines = lines if lines is not None else source.split("\n")
            plain = Token("plain_block", "", 0, map=first.map, block=True)
            plain.content = "\n".join(lines[first.map[0]:first.map[1]]).strip("\n")
            out.append(plain)
        else:
            out.extend(tokens[start:end])
        start = end
    index = first_index
    for token in out:
        if token.type in _CODE_TYPES:
            lines = lines if lines is not None else source.split("\n")
            token.meta["copy_index"] = index
            token.meta["closed"] = _closed(token, lines)
            index += 1
    return out


def _parse(text: str, env: dict[str, Any]) -> list[Token]:
    source = normalized(text)
    return finish_blocks(_MD.parse(source, env), source, _MD.options["maxNesting"])


def render(text: str, palette: MarkdownPalette = DEFAULT_PALETTE, copied: int | None = None,
           ) -> RenderedMarkdown:
    """Render `text` (complete or mid-stream) once, returning the HTML and the code blocks;
    code block `copied` says "Copied" instead of "Copy"."""
    env: dict[str, Any] = {"palette": palette, "copied": copied}
    tokens = _parse(text, env)
    html = _MD.renderer.render(tokens, _MD.options, env)
    blocks = tuple(_code_text(t) for t in tokens if t.type in _CODE_TYPES)
    return RenderedMarkdown(html, blocks)


def render_markdown(text: str, palette: MarkdownPalette = DEFAULT_PALETTE) -> str:
    """HTML for a QTextDocument; safe to show whatever `text` contains."""
    return render(text, palette).html


def code_blocks(text: str) -> list[str]:
    """The source of each code block in `text`; index N is what the `copy:N` anchor copies."""
    return [_code_text(t) for t in _parse(text, {}) if t.type in _CODE_TYPES]


CACHE_CHARS = 4_000_000  # of HTML kept for finished messages (a few thousand of them)


class _HeadCache:
    """The rendered heads of finished messages, the most recently used first: a message that
    scrolls back into view (the transcript makes its bubble again) is not parsed again. Kept as
    plain tuples of strings, which the garbage collector stops walking."""

    def __init__(self, max_chars: int = CACHE_CHARS) -> None:
        self._found: dict[MarkdownPalette, OrderedDict[str, tuple[int, str, tuple[str, ...]]]] = {}
        self._chars = 0
        self._max = max_chars

    def get(self, text: str, palette: MarkdownPalette) -> tuple[int, RenderedMarkdown] | None:
        heads = self._found.get(palette)
        found = heads.get(text) if heads is not None else None
        if heads is None or found is None:
            return None
        heads.move_to_end(text)
        return found[0], RenderedMarkdown(found[1], found[2])

    def put(self, text: str, palette: MarkdownPalette, cut: int,
            rendered: RenderedMarkdown) -> None:
        if palette not in self._found:  # another theme: the old one's renders are of no use
            self._found, self._chars = {palette: OrderedDict()}, 0
        heads = self._found[palette]
        if text in heads:
            return
        heads[text] = (cut, rendered.html, rendered.code_blocks)
        self._chars += len(rendered.html)
        while self._chars > self._max and heads:
            _, old = heads.popitem(last=False)
            self._chars -= len(old[1])


_heads = _HeadCache()


def render_head(text: str, palette: MarkdownPalette = DEFAULT_PALETTE, copied: int | None = None,
                keep: bool = True) -> tuple[int, RenderedMarkdown]:
    """The first display of `text`: where it is cut (display_cut) and that head rendered.
    `keep`: the text is final (not a reply mid-stream), so the result is kept for next time."""
    if copied is None and keep:
        found = _heads.get(text, palette)
        if found is not None:
            return found
    cut = display_cut(text)
    rendered = render(text[:cut], palette, copied)
    if copied is None and keep:
        _heads.put(text, palette, cut, rendered)
    return cut, rendered
