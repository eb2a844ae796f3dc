"""Bytes to text for the knowledge converter: a text file's encoding, an HTML page's words.
Used in this process (knowledge/convert.py) and in the converter's child
(knowledge/convert_process.py), which therefore need not import each other. Qt-free."""

from __future__ import annotations

from html.parser import HTMLParser


class ConvertError(Exception):
    """str() says why, as the end of "<file> was not indexed: …". `lasting`: the same bytes
    would fail again (False where the converter could not even start)."""

    def __init__(self, message: str, lasting: bool = True) -> None:
        super().__init__(message)
        self.lasting = lasting


def decode(data: bytes) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return newlines(data.decode("utf-16"))
        except UnicodeDecodeError as exc:
            raise ConvertError("it is not UTF-16 text, though it starts as such") from exc
    if b"\x00" in data[:65536]:
        raise ConvertError("it holds binary data, not text (whatever its name says)")
    try:
        return newlines(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ConvertError(f"it is not UTF-8 text (byte {exc.start:,} is not)") from exc


def newlines(text: str) -> str:
    """Windows' and old Macs' line ends as \\n."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


class _HtmlText(HTMLParser):
    SKIP = frozenset({"script", "style", "template", "noscript", "head"})
    BLOCKS = frozenset({"p", "div", "li", "tr", "br", "section", "article", "pre", "table",
                        "ul", "ol", "blockquote", "hr", "dd", "dt"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIP:
            self.skipping += 1
        elif len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
            self.parts.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif (len(tag) == 2 and tag[0] == "h") or tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def html_text(markup: str) -> str:
    parser = _HtmlText()
    parser.feed(markup)
    parser.close()
    lines = [" ".join(line.split()) for line in "".join(parser.parts).split("\n")]
    text, blank = [], False
    for line in lines:  # runs of blank lines become one
        if line or not blank:
            text.append(line)
        blank = not line
    return "\n".join(text).strip()
