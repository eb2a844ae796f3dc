"""Markdown rendering of untrusted model output: nothing active may survive into the HTML."""

from __future__ import annotations

import re

import pytest

from inglenook.ui.chat.code_highlight import highlight
from inglenook.ui.chat.markdown import (
    HEAD_CHARS,
    HEAD_LINES,
    HEAD_ROWS,
    ZWSP,
    MarkdownPalette,
    breakable,
    code_blocks,
    display_cut,
    render,
    render_markdown,
)
from inglenook.ui.chat.markdown_segments import (
    SEGMENT_LINES,
    WholeRender,
    all_code_blocks,
    plan_segments,
    render_part,
    source_slices,
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
    # Highlighted, the code is cut into spans; with the tags taken out it is escaped text.
    assert "print('&lt;b&gt;&amp;amp;')" in re.sub(r"<[^>]+>", "", rendered.html)
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


def test_mailto_links_lose_their_query() -> None:
    html = render_markdown("[write](mailto:a@example.org?attach=/home/u/.ssh/id_rsa&subject=x)")
    assert 'href="mailto:a@example.org"' in html
    assert "attach" not in html.split(">write<")[0]


# ---- hostile sizes and shapes -----------------------------------------------------------------


def test_long_runs_without_spaces_get_break_opportunities() -> None:
    assert breakable("short words stay as they are") == "short words stay as they are"
    word = "x" * 200
    broken = breakable(f"before {word} after")
    assert broken.replace(ZWSP, "") == f"before {word} after"
    assert max(len(run) for run in re.split(rf"[\s{ZWSP}]", broken)) <= 24
    assert ZWSP in render_markdown(word)
    # Code is not wrapped, so Qt never looks for a break in it: it needs none.
    assert ZWSP not in render(f"```\n{word}\n```").html
    assert render(f"```\n{word}\n```").code_blocks == (word,)  # Copy copies the real text


def test_code_is_unwrapped_and_its_copy_link_is_outside_the_code_table() -> None:
    html = render("```\ncode\n```").html
    header, code = html.split("</table>")[:2]
    assert 'href="copy:0"' in header and "code" not in header
    assert '<pre style="white-space:pre">code</pre>' in code  # scrolls sideways, never wraps


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("> " * 30 + "deep quote text", "deep quote text"),
        ("- " * 30 + "deep list text", "deep list text"),
        ("1. " * 40 + "deep numbers", "deep numbers"),
        ("> " * 12 + "too deep to indent", "too deep to indent"),
    ],
)
def test_content_nested_too_deeply_is_shown_as_plain_text(text: str, shown: str) -> None:
    # markdown-it drops what lies past its nesting limit (for a list, everything after it).
    html = render_markdown(text + "\n\nAnd a paragraph after it.")
    assert shown in html
    assert "white-space:pre-wrap" in html  # the block's source, as written
    assert "And a paragraph after it." in html


def test_ordinary_nesting_is_still_markdown() -> None:
    html = render_markdown("> quote\n> - item\n>   - sub item")
    assert '<td width="3"' in html and "<li>sub item</li>" in html  # a quote, with its rule
    assert "pre-wrap" not in html


def test_display_cut() -> None:
    assert display_cut("short") == 5
    table = "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * 10_000
    cut = display_cut(table)
    assert table[cut - 1] == "\n" and table[:cut].count("\n") == HEAD_ROWS
    code = "```\n" + "x = 1\n" * 10_000 + "```\n"
    cut = display_cut(code)
    assert code[cut - 1] == "\n" and code[:cut].count("\n") == HEAD_LINES
    prose = "word " * 100_000
    cut = display_cut(prose)
    assert cut <= HEAD_CHARS and prose[cut - 1] == " "
    line = "x" * 200_000
    assert display_cut(line) == HEAD_CHARS


def test_a_huge_table_is_cut_into_parts_that_each_repeat_the_header() -> None:
    rows = 1_000
    table = "| n | v |\n|---|--:|\n" + "".join(f"| {i} | {i * 3} |\n" for i in range(rows))
    plan = plan_segments(table)
    htmls = [render_part(plan, i) for i in range(len(plan.parts))]
    assert len(htmls) >= rows // SEGMENT_LINES
    for html in htmls:
        assert html.count("<tr>") <= SEGMENT_LINES + 1
        assert "<th>n</th>" in html
    cells = re.findall(r"<td>(\d+)</td>", "".join(htmls))
    assert cells == [str(i) for i in range(rows)]


def test_parts_of_a_long_list_keep_its_numbering() -> None:
    items = "".join(f"{i + 1}. item {i}\n" for i in range(500))
    plan = plan_segments(items)
    assert len(plan.parts) > 1
    second = render_part(plan, 1)
    first_item = int(re.search(r"<li>item (\d+)</li>", second)[1])  # type: ignore[index]
    assert f'<ol start="{first_item + 1}">' in second


def test_whole_render_slices_long_text_and_keeps_code_blocks_exact() -> None:
    code = "".join(f"line = {i}\n" for i in range(20_000))
    text = f"Intro\n\n```py\n{code}```\n\n" + "A paragraph. " * 20_000 + "\n\n```\nlast\n```\n"
    slices = list(source_slices(text))
    assert len(slices) > 3 and any(continued for _piece, continued, _end in slices)
    assert slices[-1][2] == len(text)
    whole = WholeRender(text)
    htmls = [html for html, _done in whole.parts()]
    assert tuple(whole.code_blocks) == all_code_blocks(text) == render(text).code_blocks
    joined = "".join(htmls)
    assert joined.count('href="copy:0"') == 1 and joined.count('href="copy:1"') == 1
    assert "line = 19999" in re.sub(r"<[^>]+>", "", joined) and "last" in htmls[-1]


def test_plain_slices_of_ordinary_text_join_back_to_it() -> None:
    text = "".join(f"Paragraph {i}. " + "Some words here. " * 30 + "\n\n" for i in range(600))
    slices = list(source_slices(text))
    assert len(slices) > 1
    assert "".join(piece for piece, _continued, _end in slices) == text


# ---- syntax highlighting ------------------------------------------------------------------------


def code_html(html: str, n: int) -> str:
    """The HTML inside the n-th code block's <pre>."""
    return re.findall(r"<pre[^>]*>(.*?)</pre>", html, re.DOTALL)[n]


def test_a_fence_is_highlighted_once_closed_and_only_in_a_known_language() -> None:
    streaming = render("```python\ndef f():\n    return 1\n")
    assert "<span" not in code_html(streaming.html, 0)  # the block still being written
    done = render("```python\ndef f():\n    return 1\n```\n\n```\ndef g(): pass\n```\n\n"
                  "```klingon\ndef h(): pass\n```\n\n    def i(): pass\n")
    assert '<span style="color:' in code_html(done.html, 0)
    for plain in (1, 2, 3):  # no language, an unknown one, an indented block
        assert "<span" not in code_html(done.html, plain)
    assert done.code_blocks[0] == "def f():\n    return 1"  # Copy gets the source, not HTML


def test_a_fence_closed_inside_a_list_or_quote_is_highlighted() -> None:
    for text in ("- item\n\n  ```python\n  x = 1\n  ```\n", "> ```python\n> x = 1\n> ```\n"):
        assert "<span" in code_html(render(text).html, 0)


def test_highlighting_is_done_once_per_block_while_a_reply_streams() -> None:
    block = "```python\nvalue = 42  # the answer\n```\n\n"
    render(block + "Streaming")
    before = highlight.cache_info()
    for more in (" text", " text and", " text and more"):
        render(block + "Streaming" + more)
    after = highlight.cache_info()
    assert after.misses == before.misses and after.hits == before.hits + 3


def test_the_palette_picks_the_code_style() -> None:
    text = "```python\ndef f(): pass\n```"
    light = render(text, MarkdownPalette(code_style="default")).html
    dark = render(text, MarkdownPalette(code_style="github-dark", code_background="#1b1917")).html
    assert light != dark and "#1b1917" in dark


def test_a_block_with_a_giant_line_wraps_as_plain_text() -> None:
    data = "ab" * 600  # 1,200 characters on one line: a blob, not code to scroll through
    html = code_html(render(f"```python\nx = '{data}'\n```").html, 0)
    assert "<span" not in html and ZWSP in html
    assert '<pre style="white-space:pre-wrap">' in render(f"```\n{data}\n```").html
    assert render(f"```\n{data}\n```").code_blocks == (data,)
