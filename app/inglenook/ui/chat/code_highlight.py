"""Syntax highlighting of code blocks with Pygments, as the HTML spans a QTextDocument shows.

Only a block whose fence names a language Pygments knows is highlighted: guessing is slow and
often wrong. Token colours come from a Pygments style, nudged where needed to stay readable
(4.5:1) on the block's background. Results are cached by content, so re-rendering a streaming
reply costs nothing for its finished blocks; markdown.py never highlights the block still being
written. No Qt here: Show all renders on a worker thread.
"""

from __future__ import annotations

import html
import threading
import time
from functools import lru_cache

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.styles import get_style_by_name
from pygments.token import _TokenType
from pygments.util import ClassNotFound

from inglenook.ui.contrast import readable

# Longer blocks are shown plain: lexing costs ~1 ms per 1,000 characters.
MAX_CHARS = 20_000
# Off the GUI thread (Show all), lexing lets the GUI thread have the GIL this often (tokens):
# pure-Python lexing would otherwise hold it for whole switch intervals, and the GUI thread
# waits that long each time it comes back from Qt.
YIELD_EVERY = 200


@lru_cache(maxsize=64)
def lexer_for(language: str) -> Lexer | None:
    """The lexer for a fence's language name ("py", "c++", "shell"…), or None."""
    name = language.strip().lower().lstrip(".{").rstrip("}")
    if not name:
        return None
    try:
        return get_lexer_by_name(name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


class _Formats:
    """The opening span for each token type in one style on one background."""

    def __init__(self, style: str, background: str) -> None:
        try:
            self._style = get_style_by_name(style)
        except ClassNotFound:
            self._style = get_style_by_name("default")
        self._background = background
        self._spans: dict[_TokenType, str] = {}

    def span(self, ttype: _TokenType) -> str:
        found = self._spans.get(ttype)
        if found is None:
            found = self._spans[ttype] = self._make(ttype)
        return found

    def _make(self, ttype: _TokenType) -> str:
        spec = self._style.style_for_token(ttype)
        css = []
        if spec["color"]:
            css.append(f"color:{readable('#' + spec['color'], self._background)}")
        if spec["bold"]:
            css.append("font-weight:600")
        if spec["italic"]:
            css.append("font-style:italic")
        return f'<span style="{"; ".join(css)}">' if css else ""


@lru_cache(maxsize=8)
def _formats(style: str, background: str) -> _Formats:
    return _Formats(style, background)


@lru_cache(maxsize=128)
def highlight(code: str, language: str, style: str, background: str) -> str | None:
    """`code` as escaped HTML with coloured spans, or None when the language is unknown or the
    block too long to highlight."""
    lexer = lexer_for(language)
    if lexer is None or len(code) > MAX_CHARS:
        return None
    formats = _formats(style, background)
    out: list[str] = []
    run: list[str] = []
    current = ""
    polite = threading.current_thread() is not threading.main_thread()

    def close_run() -> None:
        if run:
            text = html.escape("".join(run), quote=False)
            out.append(f"{current}{text}</span>" if current else text)
            run.clear()

    for count, (ttype, value) in enumerate(lexer.get_tokens(code)):
        if polite and count % YIELD_EVERY == YIELD_EVERY - 1:
            time.sleep(0)
        span = formats.span(ttype) if value.strip() else current  # whitespace joins any run
        if span != current:
            close_run()
            current = span
        run.append(value)
    close_run()
    return "".join(out)
