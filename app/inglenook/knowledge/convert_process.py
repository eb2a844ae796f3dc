"""The converter's child process: Word documents and HTML become text away from the window.

A converter is a parser of files anyone can drop into a watched folder. Bounds in the
converters (docx_reader.py) refuse what they can see coming; what they miss (a parser's
blow-up, a loop) costs this child, which is capped in address space and CPU seconds like the
PDF reader (core/attachments_pdf.py) and killed by the indexer after CONVERT_TIMEOUT_S or as
soon as the run is cancelled. PDFs go to the PDF reader's child the same way (convert.py).

Run as `python -m inglenook.knowledge.convert_process --memory-mb N KIND` (a frozen bundle:
`inglenook --knowledge-convert …`): the file's bytes on stdin, one JSON object on stdout,
{"pages": [[text, page number or null], ...]} or {"error": str}.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence

MEMORY_LIMIT_MB = 1536  # python-docx holds a document's XML several times over
CPU_LIMIT_S = 120  # the parent kills it sooner; this is for a parent that quit mid-file
MAX_STDIN_BYTES = 1 << 27
FLAG = "--knowledge-convert"  # how a frozen bundle runs this module (inglenook/__main__.py)
POLL_S = 0.1  # how often a conversion in progress looks at Cancel


class ChildCancelled(Exception):
    """The run was cancelled while a child was converting: it has been killed."""


class ChildTimedOut(Exception):
    pass


def command(memory_mb: int | None = None) -> list[str]:
    """This Python running this module; in a frozen bundle the app itself, given FLAG."""
    args = ["--memory-mb", str(memory_mb or MEMORY_LIMIT_MB)]
    if getattr(sys, "frozen", False):
        return [sys.executable, FLAG, *args]
    return [sys.executable, "-m", "inglenook.knowledge.convert_process", *args]


def run_child(argv: Sequence[str], data: bytes, timeout_s: float,
              cancelled: Callable[[], bool] = lambda: False) -> tuple[bytes, int]:
    """(stdout, exit code) of argv given data on stdin; killed (and reaped) after timeout_s
    (ChildTimedOut) or once cancelled() (ChildCancelled). OSError: it could not start."""
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL,
                             creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
    # communicate() on a thread of its own: it feeds stdin and drains stdout together, while
    # this thread looks at Cancel and the clock (communicate(timeout=…) cannot be resumed
    # with the rest of its input, and a child slow to start would wait for it for ever).
    output: list[bytes] = []
    talk = threading.Thread(target=lambda: output.append(child.communicate(data)[0]),
                            name="converter-io", daemon=True)
    talk.start()
    deadline = time.monotonic() + timeout_s
    try:
        while talk.is_alive():
            talk.join(POLL_S)
            if not talk.is_alive():
                break
            if cancelled():
                raise ChildCancelled
            if time.monotonic() >= deadline:
                raise ChildTimedOut
        return (output[0] if output else b""), child.wait()
    finally:
        if child.poll() is None:
            child.kill()
        talk.join()


# ---- in the child -------------------------------------------------------------------------
_MEMORY = ("reading it needed more memory than a document may use (the file may be damaged, "
           "or built to do that)")


def _convert(kind: str, data: bytes) -> dict:
    try:
        from inglenook.knowledge.docx_reader import DocxError, docx_text
    except MemoryError:
        return {"error": _MEMORY}
    try:
        if kind == "docx":
            return {"pages": [[docx_text(data), None]]}
        if kind == "html":
            from inglenook.knowledge.text_decode import ConvertError, decode, html_text

            try:
                return {"pages": [[html_text(decode(data)), None]]}
            except ConvertError as exc:
                return {"error": str(exc)}
        return {"error": f"no converter for {kind!r}"}
    except DocxError as exc:
        return {"error": str(exc)}
    except (MemoryError, RecursionError):
        return {"error": _MEMORY}
    except Exception as exc:  # a damaged file shows any symptom: this file's, in words
        return {"error": f"it could not be read ({type(exc).__name__}: "
                         f"{(str(exc).splitlines() or [''])[0][:200]})"}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    memory_mb = MEMORY_LIMIT_MB
    if len(args) == 3 and args[0] == "--memory-mb" and args[1].isdigit():
        memory_mb, args = int(args[1]), args[2:]
    if len(args) != 1:
        print("usage: python -m inglenook.knowledge.convert_process [--memory-mb N] KIND",
              file=sys.stderr)
        return 2
    from inglenook.core.attachments_pdf import limit_resources

    limit_resources(memory_mb << 20, CPU_LIMIT_S)
    received = bytearray()  # in blocks: read(MAX + 1) would reserve all of it at once
    while len(received) <= MAX_STDIN_BYTES and (block := sys.stdin.buffer.read(1 << 20)):
        received += block
    data = bytes(received)
    del received
    result = ({"error": "it is larger than a document given to the converter may be"}
              if len(data) > MAX_STDIN_BYTES else _convert(args[0], data))
    # ASCII JSON: a document's lone surrogates cannot travel as UTF-8.
    sys.stdout.buffer.write(json.dumps(result).encode("ascii"))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
