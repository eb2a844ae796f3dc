"""What *Open file* on a reply's source may hand to the system (issue 39, finding 12).

A source names its collection and a path as the reply recorded them, and a reply can come from
an imported chat: its path is anyone's word. The system's handler runs what it is given (an
.exe on Windows, a .command on macOS, a .desktop file on Linux), so a path is opened only when
it is a document of that collection here, lies inside the collection's folders (once links are
resolved; unless the collection follows links out), and is a regular file. A document that
could run as a program (code, a script, an executable file) is never handed over: its folder is
shown instead.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from inglenook.knowledge.convert import kind_of
from inglenook.knowledge.fts import KnowledgeError, SqliteFtsIndex

# Suffixes some system runs rather than shows, beyond the code the index reads (kind "code").
RUNNABLE_SUFFIXES = frozenset({
    ".exe", ".com", ".bat", ".cmd", ".msi", ".msc", ".scr", ".pif", ".lnk", ".url", ".vbs",
    ".vbe", ".js", ".jse", ".wsf", ".wsh", ".hta", ".cpl", ".jar", ".ps1", ".psm1", ".reg",
    ".app", ".command", ".tool", ".terminal", ".workflow", ".desktop", ".appimage", ".run",
    ".sh", ".bash", ".zsh", ".py", ".pyw", ".pl", ".rb", ".php", ".applescript", ".scpt"})


@dataclass(frozen=True)
class Opening:
    """path: what to hand to the system (the file, or its folder), "" nothing; why: "" or
    one sentence on why the file itself is not opened."""

    path: str
    why: str = ""


def _inside(real: str, roots: list[str]) -> bool:
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def opening(index: SqliteFtsIndex, collection: str, path: str) -> Opening:
    try:
        found = index.collection(collection)
    except KnowledgeError:
        return Opening("", f"There is no collection named {collection!r} here: the file is "
                           "not opened.")
    if path not in index.documents(found.name):
        return Opening("", f"This file is not a document of the collection {found.name} "
                           "(the chat may come from elsewhere): it is not opened.")
    real = os.path.realpath(path)
    if not found.follow_links and not _inside(real, [os.path.realpath(r)
                                                     for r in found.roots]):
        return Opening("", f"This file lies outside the folders of {found.name} now: it is "
                           "not opened.")
    try:
        info = os.stat(real)
    except OSError:
        return Opening("", "The file is no longer there.")
    if not stat.S_ISREG(info.st_mode):
        return Opening("", "This is no longer a regular file: it is not opened.")
    name = Path(real).name
    if Path(name).suffix.lower() in RUNNABLE_SUFFIXES or kind_of(name) == "code" or (
            os.name != "nt" and info.st_mode & 0o111):
        return Opening(os.path.dirname(real), "This file could run as a program if opened: "
                                              "its folder is shown instead.")
    return Opening(real)
