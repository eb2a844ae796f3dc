"""Markdown rendering of untrusted model output: nothing active may survive into the HTML."""

from __future__ import annotations

import re
import time

import pytest

from inglenook.ui.chat.markdown import (
    MarkdownPalette,
    code_blocks,
    render,
    render_markdown,
)

HREFS = re.compile(r'href="([^"]*)"')


def hrefs(html: str) -> list[str]:
    return HREFS.findall(html)


@pytest.mark.parametrize(
    "text",
    [
        "<script>alert(1)</script>",
        "hi <script>alert(1)</script> there",
        '<img src=x onerror="alert(1)">',
        "<div onclick=x>\n\nblock html\n\n</div>",
        '<a href="javascript:alert(1)">x</a>',
        "<style>p{color:red}</style>",
        '<link rel="stylesheet" href="http://127.0.0.1/x.css">',
    ],
)
def test_raw_html_is_shown_as_text(text: str) -> None:
    html = render_markdown(text)
    for tag in ("<script", "<img", "<div", "<style", "<link", "<a "):
        assert tag not in html
    assert "&lt;" in html


@pytest.mark.parametrize(
    "text",
    [
        "![alt](http://127.0.0.1/x.png)",
        '![a](x.png "t")',
        "![](file:///etc/passwd)",
        "![r][x]\n\n[x]: y",
    ],
)
def test_images_never_become_img(text: str) -> None:
    html = render_markdown(text)
    assert "<img" not in html
    assert hrefs(html) == []
    assert "[image" in html


def test_image_alt_text_shown() -> None:
    assert "[image: a cat]" in render_markdown("![a *cat*](http://x/cat.png)")


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "file:///etc/passwd",
        "data:text/html;base64,PHNjcmlwdD4=",
        "data:image/png;base64,AAAA",
        "vbscript:msgbox",
        "qrc:/icons/x.png",
        "relative/path.html",
        "/abs/path",
        "//evil.example/x",
        "ftp://example.com/f",
        "copy:0",
    ],
)
def test_unsafe_links_render_as_text(url: str) -> None:
    for text in (f"[label]({url})", f"<{url}>", f"[label][r]\n\n[r]: {url}"):
        html = render_markdown(text)
        assert hrefs(html) == [], text
        assert "<a" not in html


@pytest.mark.parametrize(
    ("text", "href"),
    [
        ("[site](https://example.com/a?b=1&c=2)", "https://example.com/a?b=1&amp;c=2"),
        ("[site](HTTP://example.com)", "HTTP://example.com"),
        ("<http://127.0.0.1:8080/page>", "http://127.0.0.1:8080/page"),
        ("<someone@example.org>", "mailto:someone@example.org"),
        ('[x](http://e.com/"onmouseover="y)', "http://e.com/%22onmouseover=%22y"),
    ],
)
def test_safe_links_kept(text: str, href: str) -> None:
    assert hrefs(render_markdown(text)) == [href]


def test_unsafe_link_keeps_label_and_shows_target() -> None:
    html = render_markdown("[click me](file:///etc/passwd)")
    assert "click me" in html
    assert "(file:///etc/passwd)" in html


def test_table() -> None:
    html = render_markdown("| a | b |\n|:--|--:|\n| 1 | 2 |\n")
    assert "<table" in html
    assert '<th align="left">a</th>' in html
    assert '<td align="right">2</td>' in html


def test_code_blocks_get_copy_links_and_exact_source() -> None:
    text = (
        "Intro\n\n```python\nprint('<b>&amp;')\n  x = 1\n```\n\n"
        "    indented <tag>\n\n- item\n\n  ```\n  in list\n  ```\n"
    )
    rendered = render(text)
    assert rendered.code_blocks == ("print('<b>&amp;')\n  x = 1", "indented <tag>", "in list")
    assert code_blocks(text) == list(rendered.code_blocks)
    assert hrefs(rendered.html) == ["copy:0", "copy:1", "copy:2"]
    assert "python" in rendered.html
    assert "print('&lt;b&gt;&amp;amp;')" in rendered.html
    assert "<b>" not in rendered.html


@pytest.mark.parametrize(
    "text", ["```py\ndef f(", "```", "Text\n\n```\n", "~~~\nx\n", "```\n<script>", "`unclosed"]
)
def test_partial_markdown_while_streaming(text: str) -> None:
    rendered = render(text)
    assert "<script" not in rendered.html
    if text.startswith(("```", "~~~", "Text")):
        assert len(rendered.code_blocks) == 1
        assert "copy:0" in rendered.html


def test_every_prefix_of_a_message_renders() -> None:
    message = (
        "# T\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```py\nx = '<i>'\n```\n\n"
        "> q [l](https://e.com) ![i](http://e.com/i.png) **b** ~~s~~\n"
    )
    for end in range(len(message) + 1):
        html = render_markdown(message[:end])
        assert "<img" not in html and "<i>" not in html


@pytest.mark.parametrize(
    "text",
    [
        "\u200f\u202eRTL override\u202c and \u05e9\u05dc\u05d5\u05dd",
        "e\u0301\u0301\u0301 Z\u0351\u0352\u0353 combining",
        "emoji 😀👩‍👩‍👧 🇬🇧 family",
        "nul \x00 char and \x1b[31m escape",
        "lone \ud800 surrogate and \udfff another",
        b"bytes \xff\xfe".decode("utf-8", "surrogateescape"),
        "\ufeff BOM \uffff \U0010ffff",
        ">" * 500 + " deep",
        "*" * 2000,
        "[" * 1000 + "x" + "]" * 1000,
        "- " * 300 + "x",
        "",
    ],
)
def test_odd_text_never_raises(text: str) -> None:
    html = render_markdown(text)
    html.encode("utf-8")  # no lone surrogates left for Qt to choke on
    for block in code_blocks(text):
        block.encode("utf-8")


def test_palette_colours_used() -> None:
    palette = MarkdownPalette(link="#123456", code_background="#abcdef")
    html = render_markdown("[a](https://e.com) and\n\n```\nx\n```", palette)
    assert "#123456" in html
    assert "#abcdef" in html


def test_renders_four_kilobytes_quickly() -> None:
    chunk = (
        "Some **bold** text with `code` and a [link](https://example.com).\n\n"
        "1. one\n2. two\n\n```python\nfor i in range(3):\n    print(i)\n```\n\n"
    )
    text = (chunk * 40)[:4096]
    render(text)
    start = time.perf_counter()
    for _ in range(10):
        render(text)
    # ~2 ms on a laptop; the bound only catches accidental quadratic behaviour.
    assert (time.perf_counter() - start) / 10 < 0.05


def test_mailto_links_lose_their_query() -> None:
    html = render_markdown("[write](mailto:a@example.org?attach=/home/u/.ssh/id_rsa&subject=x)")
    assert 'href="mailto:a@example.org"' in html
    assert "attach" not in html.split(">write<")[0]
