"""Finding the files of a collection without ever leaving its folders.

The walk is our own (os.scandir with lstat semantics), so that every entry is looked at before
anything follows it:
- a symbolic link is followed only when its target lies inside one of the collection's roots,
  or when the user asked for links to be followed; one pointing out is listed, not read;
- a folder already visited (a link loop, a bind mount seen twice) is not entered again;
- FIFOs, sockets and devices are listed and never opened (opening a FIFO blocks);
- a folder that cannot be listed (permission denied) is listed with the reason;
- version-control and dependency folders are skipped, and said so;
- a file or folder whose name is not valid UTF-8 (possible on Linux) is listed, never fatal.
Reading is not done here: indexer.py opens each file with O_NOFOLLOW | O_NONBLOCK and checks
that the descriptor is the regular file scanned (its device and inode), since the file or a folder
above it may have been swapped for a link out or a FIFO between the two.

A folder of 100,000 entries is listed with progress and cancel every ENTRIES_PER_REPORT entries,
not only between folders, so one huge folder neither freezes the count nor ignores Cancel.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from inglenook.knowledge.convert import kind_of

ENTRIES_PER_REPORT = 1000  # ~10 ms of lstat calls between two progress reports
SKIPPED_FOLDERS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv",
                             ".tox", ".mypy_cache", ".ruff_cache"})


@dataclass(frozen=True)
class FoundFile:
    path: str  # as found under the roots: what is indexed and cited
    size: int
    mtime_ns: int
    kind: str
    device: int = 0  # st_dev and st_ino of what was scanned: what the reader must open
    inode: int = 0
    source: str = ""  # where to open it: the path, or where a link followed pointed then

    @property
    def identity(self) -> tuple[int, int] | None:
        """None where the system gives no inode numbers (what is opened is checked alone)."""
        return (self.device, self.inode) if self.inode else None

    @property
    def opened(self) -> str:
        return self.source or self.path


@dataclass
class Scan:
    files: list[FoundFile] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    cancelled: bool = False


def _inside(real: str, roots: Sequence[str]) -> bool:
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _kind_of(entry_stat: os.stat_result) -> str:
    mode = entry_stat.st_mode
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO): not read"
    if stat.S_ISSOCK(mode):
        return "a socket: not read"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device: not read"
    return "not a regular file: not read"


def printable(path: str) -> str:
    """A path as text that can be stored and shown: the bytes of a name that is not valid UTF-8
    (decoded by Python as lone surrogates) written as \\xNN."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        try:
            return os.fsencode(path).decode("utf-8", "backslashreplace")
        except UnicodeError:
            return path.encode("utf-8", "backslashreplace").decode("ascii")


def scan(roots: Sequence[str], follow_links: bool = False,
         cancelled: Callable[[], bool] = lambda: False,
         found: Callable[[int], None] = lambda count: None) -> Scan:
    """The readable-looking files under roots (folders or files), and every entry that was not
    taken, with the reason (its path printable()). `found(count)` is called as files are found;
    `cancelled()` is asked between folders."""
    result = _scan(roots, follow_links, cancelled, found)
    result.problems = [(printable(path), printable(why)) for path, why in result.problems]
    return result


def _scan(roots: Sequence[str], follow_links: bool, cancelled: Callable[[], bool],
          found: Callable[[int], None]) -> Scan:
    real_roots = [os.path.realpath(r) for r in roots]
    result = Scan()
    visited: set[tuple[int, int]] = set()
    stack: list[str] = []
    for root in roots:
        _entry(root, real_roots, follow_links, visited, stack, result, is_root=True)
    while stack:
        if cancelled():
            result.cancelled = True
            break
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                names = sorted(entry.path for entry in entries)
        except PermissionError:
            result.problems.append((folder, "permission denied: the folder cannot be listed"))
            continue
        except OSError as exc:
            result.problems.append((folder, f"the folder cannot be listed: "
                                            f"{exc.strerror or exc}"))
            continue
        for n, path in enumerate(reversed(names), start=1):  # popped in name order
            _entry(path, real_roots, follow_links, visited, stack, result)
            if n % ENTRIES_PER_REPORT == 0:
                found(len(result.files))
                if cancelled():
                    result.cancelled = True
                    return result
        found(len(result.files))
    return result


def _entry(path: str, real_roots: Sequence[str], follow_links: bool,
           visited: set[tuple[int, int]], stack: list[str], result: Scan,
           is_root: bool = False) -> None:
    if printable(path) != path:  # SQLite (and any display) takes valid Unicode only
        result.problems.append((path, "its name is not valid UTF-8 (the bytes shown as \\x..):"
                                      " not indexed; rename it to index it"))
        return
    try:
        info = os.lstat(path)
    except OSError as exc:
        result.problems.append((path, f"cannot be looked at: {exc.strerror or exc}"))
        return
    source = ""
    if stat.S_ISLNK(info.st_mode):
        real = source = os.path.realpath(path)
        if not is_root and not follow_links and not _inside(real, real_roots):
            result.problems.append((path, f"a symbolic link out of the collection's folders "
                                          f"(to {real}): not followed"))
            return
        try:
            info = os.stat(path)
        except OSError:
            result.problems.append((path, "a symbolic link to nothing (or a loop of links)"))
            return
    if stat.S_ISDIR(info.st_mode):
        if not is_root and os.path.basename(path) in SKIPPED_FOLDERS:
            result.problems.append((path, "a version-control or dependency folder: skipped"))
            return
        key = (info.st_dev, info.st_ino)
        if key in visited:
            result.problems.append((path, "a folder already indexed (a loop of links?): "
                                          "not entered again"))
            return
        visited.add(key)
        stack.append(path)
    elif stat.S_ISREG(info.st_mode):
        kind = kind_of(Path(path).name)
        key = (info.st_dev, info.st_ino)
        if key in visited:  # a link to a file of the collection, or a hard link
            result.problems.append((path, "the same file as another one indexed: "
                                          "indexed once"))
        elif kind is None:
            result.problems.append((path, "not a kind of file the index reads (text, "
                                          "Markdown, code, CSV, HTML, PDF, DOCX)"))
        else:
            visited.add(key)
            result.files.append(FoundFile(path, info.st_size, info.st_mtime_ns, kind,
                                          info.st_dev, info.st_ino, source))
    else:
        result.problems.append((path, _kind_of(info)))
