"""Math in replies shown as text (never raw TeX, never a resource), dollar amounts left alone,
and quote blocks with a rule."""

from __future__ import annotations

import re
import time

import pytest

from inglenook.ui.chat.markdown import MarkdownPalette, render_markdown
from inglenook.ui.chat.math_text import MAX_CHARS, MAX_DEPTH, math_html


@pytest.mark.parametrize("text", [
    "It costs $5 and $10 today.", "From $3.50 to $4", "$ x $", "a $5 bill and a $20 one",
    "price: $100$200",
])
def test_dollar_amounts_stay_text(text: str) -> None:
    html = render_markdown(text)
    assert "<span>" not in html and "$" in html


@pytest.mark.parametrize("text, shown", [
    ("Area: $\\pi r^2$.", "π<i>r</i><sup>2</sup>"),
    ("$$\\sum_{n=1}^{\\infty} \\frac{1}{n^2}$$", "∑<sub><i>n</i>\u2009=\u20091</sub><sup>∞</sup>"),
    ("\\(\\alpha \\leq \\beta\\)", "α\u2009≤\u2009β"),
    ("\\[\nx \\in \\mathbb{R}\n\\]\n", "<i>x</i>\u2009∈\u2009ℝ"),
    ("$\\sqrt{2}$", '√<span style="text-decoration:overline">2</span>'),
    ("$\\frac{a}{b}$", "<sup><i>a</i></sup>⁄<sub><i>b</i></sub>"),
    ("$\\text{speed} = \\frac{d}{t}$", "speed"),
    ("$\\hat{x}$", "<i>x</i>\u0302"),
])
def test_math_is_rendered_not_shown_raw(text: str, shown: str) -> None:
    html = render_markdown(text)
    assert shown in html
    assert "\\" not in re.sub(r"<[^>]*>", "", html)  # no TeX command left as text


def test_display_math_is_its_own_centred_paragraph() -> None:
    html = render_markdown("Before\n\n$$\nE = mc^2\n$$\n\nAfter")
    assert '<p align="center"><i>E</i>\u2009=\u2009<i>mc</i><sup>2</sup></p>' in html


@pytest.mark.parametrize("formula", [
    "\\def\\x{\\x\\x}\\x", "\\newcommand{\\a}{\\a}\\a", "\\input{/etc/passwd}",
    "\\include{x}", "\\unknowncommand{y}",
])
def test_macros_and_unknown_commands_are_shown_as_written(formula: str) -> None:
    html = render_markdown(f"${formula}$")
    assert html.count("<code>") == 1 and formula.replace("<", "&lt;") in html


def test_hostile_math_is_escaped_bounded_and_fast() -> None:
    started = time.process_time()
    assert "<img" not in render_markdown("$<img src=x>$ $\\text{<img src=y>}$")
    deep = "$" + "{" * (MAX_DEPTH + 5) + "x" + "}" * (MAX_DEPTH + 5) + "$"
    assert "<code>{{{" in render_markdown(deep)
    scripts = "$" + "x^{" * (MAX_DEPTH + 5) + "y" + "}" * (MAX_DEPTH + 5) + "$"
    assert "<code>" in render_markdown(scripts)
    assert "<code>" in math_html("x+" * MAX_CHARS)
    for odd in ["x^", "_", "\\frac", "\\frac{", "}}}", "{{{", "\\begin{pmatrix}", "\\end{x}",
                "\\sqrt[", "\\left", "\\\\", "&&&", "\\", "x''", "\\text{", "\\mathbb{"]:
        math_html(odd)  # never raises
        render_markdown(f"${odd}$ and $${odd}$$")
    assert time.process_time() - started < 5  # generous: the point is that nothing blows up


def test_math_in_code_stays_code() -> None:
    assert "$x^2$" in render_markdown("`$x^2$`")
    assert "$x^2$" in render_markdown("```\n$x^2$\n```")


def test_a_quote_block_has_a_rule() -> None:
    palette = MarkdownPalette(table_border="#123456", muted="#654321")
    html = render_markdown("> To be, or not to be\n> — that is the question", palette)
    assert '<td width="3" bgcolor="#123456"></td>' in html
    assert "color:#654321" in html and "To be, or not to be" in html
    assert "<blockquote" not in html
    nested = render_markdown("> outer\n>> inner")
    assert nested.count('bgcolor="') == 2
