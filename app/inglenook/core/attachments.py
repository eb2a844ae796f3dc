"""Files attached to a user's message: reading them as text, and how the model is shown them.

Qt-free. A message is its typed text plus attachments, each one part of the message: text
parts (text, code, Markdown, CSV, the text of a PDF) are inlined into what the model reads by
`inline()`, the one function that does so; the typed text stays apart, so the transcript shows
it as written, with the files as chips. Image parts are kept in the same form (bytes and a MIME
type) so that vision models can be given them later; today they are refused unless the caller
says the model can see.

Every file is anyone's writing: sizes are checked before reading, text must be UTF-8 (or carry
a UTF-16 byte-order mark), and PDFs are read in a child process (attachments_pdf.py) that is
killed when it runs past its time, because a hostile PDF can make a parser loop or eat memory.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from inglenook.core import files
from inglenook.core.units import describe_size

AttachmentKind = Literal["text", "code", "markdown", "csv", "pdf", "image"]
ATTACHMENT_KINDS: tuple[AttachmentKind, ...] = ("text", "code", "markdown", "csv", "pdf", "image")

MAX_TEXT_FILE_BYTES = 2_000_000  # ~500,000 tokens: beyond every local model's context
MAX_PDF_BYTES = 50_000_000  # PDFs carry fonts and pictures: big files hold little text
MAX_IMAGE_BYTES = 20_000_000
MAX_TEXT_CHARS = 1_000_000  # what one attachment may bring, as much as a typed prompt may hold
PDF_TIMEOUT_S = 30.0
PDF_FLAG = "--pdf-text"  # how a frozen bundle runs the PDF reader (see pdf_command)
IMAGE_TOKENS = 768  # a rough cost until a vision engine says: images are not inlined as text
FILE_TYPES = "text, code, Markdown, CSV or PDF files"

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd"})
CSV_SUFFIXES = {".csv": "csv", ".tsv": "tsv"}
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
               ".gif": "image/gif", ".webp": "image/webp", ".bmp": "image/bmp"}
# The fence's language for code, so the model (and a Markdown view) knows what it reads.
CODE_LANGUAGES = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript",
    ".jsx": "jsx", ".ts": "typescript", ".tsx": "tsx", ".rs": "rust", ".go": "go",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".hpp": "cpp", ".cs": "csharp",
    ".java": "java", ".kt": "kotlin", ".swift": "swift", ".rb": "ruby", ".php": "php",
    ".sh": "bash", ".bash": "bash", ".zsh": "zsh", ".ps1": "powershell", ".lua": "lua",
    ".r": "r", ".jl": "julia", ".scala": "scala", ".dart": "dart", ".sql": "sql",
    ".html": "html", ".htm": "html", ".css": "css", ".scss": "scss", ".xml": "xml",
    ".json": "json", ".jsonl": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml",
    ".ini": "ini", ".cfg": "ini", ".tex": "latex", ".vue": "vue", ".svelte": "svelte",
    ".zig": "zig", ".hs": "haskell", ".ml": "ocaml", ".ex": "elixir", ".erl": "erlang",
    ".clj": "clojure", ".pl": "perl", ".m": "objectivec", ".mm": "objectivec",
    ".gradle": "groovy", ".cmake": "cmake", ".diff": "diff", ".patch": "diff",
}
CODE_NAMES = {"makefile": "makefile", "dockerfile": "dockerfile", "cmakelists.txt": "cmake"}
_IMAGE_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
                (b"GIF87a", "image/gif"), (b"GIF89a", "image/gif"))
_BACKTICKS = re.compile(r"`{3,}")
_SURROGATE = re.compile("[\ud800-\udfff]")


class AttachmentError(Exception):
    """A file that cannot be attached; the message says which and why, for the user."""


def estimate_tokens(text: str) -> int:
    """About four characters a token in English prose: for the context meter until the
    engine has counted."""
    return (len(text) + 3) // 4 if text.strip() else 0


@dataclass(frozen=True)
class Attachment:
    """One file of a message, as it was read when attached (the file itself is not kept:
    what the model was shown must not change when the file does)."""

    name: str  # the file's name, without its folder
    kind: AttachmentKind
    size: int  # bytes of the file
    text: str = ""  # what the model reads; "" for images
    mime: str = ""  # images: "image/png", …
    data: bytes = b""  # images only: the file as it was
    # Images: the positions it takes as a projector counted them at its size (0: not counted;
    # kept with the message), that projector's file ("" once stored: the one loaded when it was
    # attached) and its size as the engine reads it ((0, 0): not known; the draft's only). What
    # it costs, not what it is: two reads of one file are the same attachment.
    image_tokens: int = field(default=0, compare=False)
    counted_by: str = field(default="", compare=False)
    pixels: tuple[int, int] = field(default=(0, 0), compare=False)

    @property
    def language(self) -> str:
        """The fence's info string: the code's language, "markdown", "csv"… or "text"."""
        if self.kind == "code":
            return language_of(self.name) or "text"
        if self.kind == "csv":
            return CSV_SUFFIXES.get(Path(self.name).suffix.lower(), "csv")
        return {"markdown": "markdown"}.get(self.kind, "text")

    @property
    def tokens(self) -> int:
        """What this file adds to the prompt, estimated like the rest of the draft (an image as
        counted, else IMAGE_TOKENS)."""
        if self.kind == "image":
            return self.image_tokens or IMAGE_TOKENS
        return estimate_tokens(inline_part(self))

    def describe(self) -> str:
        """"report.pdf · PDF · 214 KB": what the transcript's chips say."""
        kind = {"pdf": "PDF", "csv": "CSV", "markdown": "Markdown"}.get(self.kind,
                                                                        self.kind.title())
        return f"{self.name} · {kind} · {describe_size(self.size)}"


# ---- what the model reads ------------------------------------------------------------------

def fence(text: str, info: str) -> str:
    """`text` in a Markdown code fence longer than any run of backticks inside it, so that a
    file holding fences of its own (a README) cannot close ours early."""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=2)
    bar = "`" * max(3, longest + 1)
    return f"{bar}{info}\n{text}\n{bar}"


def inline_part(attachment: Attachment) -> str:
    """One attachment as the model reads it: its name on a line, then its text fenced."""
    if attachment.kind == "image":
        return f"[Image: {attachment.name}]"  # a text-only request can only name it
    return f"File: {attachment.name}\n{fence(attachment.text, attachment.language)}"


def inline(text: str, attachments: Sequence[Attachment]) -> str:
    """The user's message as the model reads it: the files first, then what was typed, so the
    question comes after what it is about (as models are trained to read documents)."""
    parts = [inline_part(a) for a in attachments]
    if text.strip():
        parts.append(text)
    return "\n\n".join(parts)


def tokens_of(attachment: Attachment, image_tokens: int = 0) -> int:
    """What a file adds to the prompt: an image what a projector counted at its size, else what
    the loaded model's projector takes for a 512 × 512 one (`image_tokens`,
    ModelInfo.image_tokens; 0: not known, estimated); text as estimated."""
    if attachment.kind != "image":
        return attachment.tokens
    return attachment.image_tokens or image_tokens or IMAGE_TOKENS


def message_tokens(text: str, attachments: Sequence[Attachment], image_tokens: int = 0) -> int:
    """The estimated cost of a message: its text and text files inlined, plus its images."""
    texts = [a for a in attachments if a.kind != "image"]
    return estimate_tokens(inline(text, texts)) + sum(
        tokens_of(a, image_tokens) for a in attachments if a.kind == "image")


def will_not_fit(attachment: Attachment, draft_tokens: int, n_ctx: int,
                 image_tokens: int = 0) -> str:
    """Why this file should not be attached to a draft already this many tokens long ("" when
    it may). The same rule as sending: the message may take up to three quarters of the
    context, the reply needs the rest. n_ctx 0: not known yet, checked again when sending."""
    if n_ctx <= 0:
        return ""
    room = n_ctx * 3 // 4
    cost = tokens_of(attachment, image_tokens)
    if cost > room:
        return (f"{attachment.name} was not attached: it is about {cost:,} tokens, "
                f"and the model's context holds {n_ctx:,} for the message and the reply "
                "together. Load the model with a longer context, or attach a part of it.")
    if draft_tokens + cost > room:
        return (f"{attachment.name} was not attached: it is about {cost:,} tokens, "
                f"and with what is already in the message (about {draft_tokens:,}) that is "
                f"more than the {n_ctx:,}-token context can take with room for a reply.")
    return ""


# ---- reading files -------------------------------------------------------------------------

def language_of(name: str) -> str:
    """The code language a file name says, or "" when it names none."""
    lower = name.lower()
    return CODE_NAMES.get(lower, CODE_LANGUAGES.get(Path(lower).suffix, ""))


def _image_type(path: Path, head: bytes) -> str:
    for magic, mime in _IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return IMAGE_TYPES.get(path.suffix.lower(), "")


def read_attachment(path: str | Path, *, vision: bool = False,
                    pdf_timeout_s: float = PDF_TIMEOUT_S) -> Attachment:
    """Read a file to attach (AttachmentError with the reason when it cannot be). May take
    seconds for a PDF: call it off the GUI thread."""
    path = Path(path)
    name = path.name or str(path)
    try:
        if not path.is_file():
            raise AttachmentError(f"{name} was not attached: it is not a file."
                                  if path.exists() else f"{name} was not found.")
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise AttachmentError(f"{name} could not be read: {exc.strerror or exc}.") from exc
    mime = _image_type(path, head)
    if mime:
        return _read_image(path, name, size, mime, vision)
    if head.startswith(b"%PDF-") or path.suffix.lower() == ".pdf":
        _check_size(name, size, MAX_PDF_BYTES, "a PDF")
        return Attachment(name, "pdf", size, pdf_text(path, pdf_timeout_s))
    _check_size(name, size, MAX_TEXT_FILE_BYTES, "a text file")
    text = _decode(name, _read_bounded(path, name, MAX_TEXT_FILE_BYTES))
    suffix = path.suffix.lower()
    kind: AttachmentKind = ("markdown" if suffix in MARKDOWN_SUFFIXES
                            else "csv" if suffix in CSV_SUFFIXES
                            else "code" if language_of(name) else "text")
    return Attachment(name, kind, size, _checked_text(name, text))


def _check_size(name: str, size: int, limit: int, what: str) -> None:
    if size > limit:
        raise AttachmentError(f"{name} was not attached: it is {describe_size(size)}, and "
                              f"{what} can be at most {describe_size(limit)}.")


def _read_bounded(path: Path, name: str, limit: int) -> bytes:
    """The file, refused if it grew past the limit since its size was checked, or if it is
    no longer a regular file (one open, no wait on a FIFO swapped in since)."""
    try:
        return files.read_bounded(path, limit, follow_links=True)[0]
    except files.ReadRefused as refused:
        if refused.why in ("too large", "grew"):
            _check_size(name, refused.size, limit, "a file of this kind")
        reason = {"missing": "it was not found", "denied": "permission denied",
                  "not regular": "it is not a file",
                  "changing": "it kept changing while it was read"}.get(refused.why,
                                                                        refused.detail)
        raise AttachmentError(f"{name} could not be read: {reason}.") from None


def _read_image(path: Path, name: str, size: int, mime: str, vision: bool) -> Attachment:
    if not vision:
        raise AttachmentError(f"{name} is an image, and the loaded model cannot see images. "
                              f"Attach {FILE_TYPES}.")
    _check_size(name, size, MAX_IMAGE_BYTES, "an image")
    return Attachment(name, "image", size, mime=mime,
                      data=_read_bounded(path, name, MAX_IMAGE_BYTES))


def _decode(name: str, data: bytes) -> str:
    """UTF-8 (a byte-order mark is dropped), or UTF-16 when it says so with its mark: what
    Windows tools write. Anything else is refused rather than guessed."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            pass
    elif b"\x00" not in data[:8192]:
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise AttachmentError(
                f"{name} was not attached: it is not UTF-8 text (byte {exc.start:,} is not). "
                "Save it as UTF-8 and attach it again.") from exc
    raise AttachmentError(f"{name} was not attached: it looks like binary data, not text. "
                          f"Attach {FILE_TYPES}.")


def _checked_text(name: str, text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").rstrip()
    if not text.strip():
        raise AttachmentError(f"{name} was not attached: it has no text.")
    if len(text) > MAX_TEXT_CHARS:
        raise AttachmentError(f"{name} was not attached: it has {len(text):,} characters of "
                              f"text, and an attachment can have at most {MAX_TEXT_CHARS:,}.")
    return text


# ---- PDFs, in a process of their own --------------------------------------------------------

def pdf_command() -> list[str]:
    """This Python running the reader module; in a frozen bundle sys.executable is the app
    itself, which runs the reader when given PDF_FLAG (inglenook/__main__.py)."""
    if getattr(sys, "frozen", False):
        return [sys.executable, PDF_FLAG]
    return [sys.executable, "-m", "inglenook.core.attachments_pdf"]


def pdf_text(path: Path, timeout_s: float = PDF_TIMEOUT_S,
             command: Sequence[str] | None = None) -> str:
    """The text of a PDF, read by a child process that is killed after timeout_s."""
    name = path.name
    try:
        done = subprocess.run(
            [*(command or pdf_command()), str(path)], stdin=subprocess.DEVNULL,
            capture_output=True, timeout=timeout_s, check=False,
            creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
    except subprocess.TimeoutExpired as exc:  # run() has killed and reaped it
        raise AttachmentError(f"{name} was not attached: reading its text took more than "
                              f"{timeout_s:.0f} s. The PDF may be damaged.") from exc
    except OSError as exc:
        raise AttachmentError(f"{name} could not be read: {exc.strerror or exc}.") from exc
    try:
        result = json.loads(done.stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        result = None
    if not isinstance(result, dict) or not isinstance(result.get("text", result.get("error")),
                                                      str):
        raise AttachmentError(f"{name} was not attached: the PDF reader stopped "
                              f"(exit code {done.returncode}). The PDF may be damaged.")
    if "error" in result:
        raise AttachmentError(f"{name} was not attached: {result['error']}")
    if not result["text"].strip():
        raise AttachmentError(f"{name} was not attached: it has no text to read (a scanned "
                              "document is pictures of pages).")
    # A broken font map can give lone surrogates, which SQLite (UTF-8) cannot store.
    return _checked_text(name, _SURROGATE.sub("\ufffd", result["text"]))
