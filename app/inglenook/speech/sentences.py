"""What of a reply is read aloud, and in which pieces: sentences of its prose, never its code
blocks, never its reasoning, without Markdown's marks. Qt-free.

    speakable(markdown)        the whole reply → the sentences to say
    SentenceStream()           the same while the reply streams: feed(delta) returns the
                               sentences now complete, finish() the rest; speaking starts with
                               the first sentence, while the model is still writing
"""

from __future__ import annotations

import re

# Reasoning as models write it in their text (the engine also sends it apart; this catches
# what arrives inline). An open block hides everything after it until it closes.
_THINK_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(`{3,}[^`]*|~{3,}.*)$")  # "```x``` more" is inline code
_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])[\"'”’)\]]*\s+")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"https?://\S+")
_INLINE_CODE = re.compile(r"`([^`]*)`")
_MARKS = re.compile(r"(\*\*|__|\*|~~|^#{1,6}\s+|^\s*>\s?|^\s*[-*+]\s+|^\s*\d+[.)]\s+)",
                    re.MULTILINE)
MAX_SENTENCE = 400  # characters: a run-on "sentence" is cut, so speech never waits for a wall


def clean(text: str) -> str:
    """Prose as it should sound: links by their words, URLs and Markdown marks gone."""
    text = _LINK.sub(r"\1", text)
    text = _URL.sub("", text)
    text = _INLINE_CODE.sub(r"\1", text)
    text = _MARKS.sub("", text)
    text = text.replace("|", " ")
    return re.sub(r"\s+", " ", text).strip()


def split(text: str) -> list[str]:
    """Sentences of plain text; a very long one in pieces at a comma or a space."""
    out: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        sentence = sentence.strip()
        while len(sentence) > MAX_SENTENCE:
            cut = max(sentence.rfind(", ", 0, MAX_SENTENCE), sentence.rfind(" ", 0, MAX_SENTENCE))
            cut = cut if cut > 0 else MAX_SENTENCE
            out.append(sentence[:cut + 1].strip())
            sentence = sentence[cut + 1:].strip()
        if any(ch.isalnum() for ch in sentence):
            out.append(sentence)
    return out


# Words a phrase often starts with: a first piece cut before one sounds least cut off.
_PHRASE_STARTS = frozenset({"and", "but", "or", "so", "because", "while", "when", "if", "that",
                            "which", "who", "whether", "to", "of", "in", "on", "at", "for",
                            "with", "from", "over", "into", "about", "after", "before"})


def lead_in(sentence: str, longer_than: int = 24, clause_within: int = 40,
            words: int = 3) -> list[str]:
    """A reply's first sentence as a short first piece and the rest: a voice synthesizes a
    whole piece before any of it sounds (Piper: ~0.3 s per second of speech on a laptop's
    core), so the first sound comes after the first few words are made, not the sentence.
    The cut is at a clause's end when one comes early, else before a word a phrase starts
    with (2 to `words` + 1 words in), else after `words` words."""
    if len(sentence) <= longer_than:
        return [sentence]
    for mark in (", ", "; ", ": ", " – ", " — "):
        cut = sentence.find(mark, 8, clause_within)
        if cut > 0:
            return [sentence[:cut + 1].strip(), sentence[cut + 1:].strip()]
    parts = sentence.split()
    if len(parts) < words + 2:
        return [sentence]
    cut = next((i for i in range(2, words + 2) if parts[i].lower() in _PHRASE_STARTS), words)
    return [" ".join(parts[:cut]), " ".join(parts[cut:])]


def speakable(markdown: str) -> list[str]:
    stream = SentenceStream()
    return stream.feed(markdown) + stream.finish()


_BLOCK_LINE = re.compile(r"\s*(#|[-*+]\s|\d+[.)]\s)")
_COMPLETE = re.compile(r"[.!?…。！？][\"'”’)\]]*\s+$")
_LAST_END = re.compile(r".*[.!?…。！？][\"'”’)\]]*\s+", re.DOTALL)


class SentenceStream:
    """Sentences out of a reply arriving in pieces. A fence or a <think> opening is judged on a
    whole line (it may be split across deltas); prose is taken as soon as a sentence in it has
    ended, so the first sentence is spoken while the model is still writing the second."""

    def __init__(self) -> None:
        self._line = ""  # the unfinished last line
        self._prose = ""  # clean prose not yet given out as sentences
        self._in_code = False
        self._thinking: str | None = None  # the closing tag awaited

    def feed(self, delta: str) -> list[str]:
        self._line += delta
        *lines, self._line = self._line.split("\n")
        for line in lines:
            self._take_line(line)
        head = self._line.lstrip()
        if (self._thinking is None and not self._in_code and "<" not in self._line
                and head[:1] not in ("`", "~", "")):
            found = _LAST_END.match(self._line)
            if found:  # the finished sentences of a line still being written
                self._prose += " " + clean(found.group(0)) + " "
                self._line = self._line[found.end():]
        return self._ready(final=False)

    def finish(self) -> list[str]:
        if self._line:
            self._take_line(self._line)
            self._line = ""
        return self._ready(final=True)

    def _end_paragraph(self) -> None:
        self._prose = self._prose.rstrip()
        if self._prose and self._prose[-1] in ":;,":
            self._prose = self._prose[:-1]
        if self._prose and self._prose[-1] not in ".!?…。！？":
            self._prose += "."
        self._prose += " "

    def _take_line(self, line: str) -> None:
        while line:
            if self._thinking is not None:
                end = line.lower().find(self._thinking)
                if end < 0:
                    return
                line, self._thinking = line[end + len(self._thinking):], None
                continue
            if _FENCE.match(line):
                self._in_code = not self._in_code
                self._end_paragraph()  # the code ends a sentence for the ear
                return
            if self._in_code:
                return
            found = _THINK_OPEN.search(line)
            if found:
                self._prose += " " + clean(line[:found.start()])
                self._thinking = f"</{found.group(1).lower()}>"
                line = line[found.end():]
                continue
            heading = _BLOCK_LINE.match(line)  # a heading or list item is a sentence
            self._prose += " " + clean(line) + " "
            if heading:
                self._end_paragraph()
            return
        self._end_paragraph()  # a blank line ends a paragraph, with or without a full stop

    def _ready(self, final: bool) -> list[str]:
        sentences = split(self._prose)
        if final or _COMPLETE.search(self._prose):
            self._prose = ""
            return sentences
        if not sentences:
            return []
        self._prose = sentences[-1]  # still growing
        return sentences[:-1]
