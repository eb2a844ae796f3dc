"""A Hub file's GGUF header over HTTP Range requests of its first megabytes, never the whole
file: what models/fit.py sizes a model by before it is downloaded. Kept apart from fit.py so
that the engine host, which imports fit, does not import the HTTP client. Qt-free."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from typing import BinaryIO

import httpx2

from inglenook.models import hub
from inglenook.models.filenames import UnsafeFileName, local_name
from inglenook.models.gguf import GGUFError, GGUFHeader, read_header
from inglenook.models.transfer import CONTENT_RANGE, UNSATISFIED_RANGE

FIRST_BYTES = 8 * 2**20  # enough for most headers, tokenizer included
MAX_HEADER_BYTES = 64 * 2**20  # never more than this of a file, whatever its header says
RANGE_SECONDS = 120.0  # for one Range request, from asking to the last byte


def remote_header(repo: str, filename: str, revision: str = "main", *,
                  first_bytes: int = FIRST_BYTES,
                  max_bytes: int = MAX_HEADER_BYTES) -> GGUFHeader:
    """The GGUF header of a file on the Hub, from its first megabytes: a Range request of
    `first_bytes`, then more, doubling, while the header runs past what was fetched, up to
    `max_bytes`; never the whole file. Honours HF_ENDPOINT and HF_TOKEN; with HF_HUB_OFFLINE
    raises hub.HubOffline before connecting. Raises hub.HubError (network, HTTP) or GGUFError
    (not a GGUF header, or a corrupt one).

    The header's `path` is the file's URL and `file_size` the whole file's size (as the server
    reported it); its tensors are described but their data was not fetched."""
    hub.check_repo_id(repo)
    try:
        local_name(filename)
    except UnsafeFileName as e:
        raise hub.HubError(str(e)) from None
    if first_bytes < 1 or max_bytes < first_bytes:
        raise ValueError("need 1 <= first_bytes <= max_bytes")
    url = hub.file_url(repo, filename, revision)
    what = f"{filename} in {repo}"
    fd, tmp = tempfile.mkstemp(prefix="inglenook-header-", suffix=".gguf")
    try:
        with os.fdopen(fd, "r+b") as f, hub.client() as c:
            want = first_bytes
            total: int | None = None
            while True:
                total = _fetch_range(c, url, repo, what, f, want) or total
                f.flush()
                have = f.tell()
                if total is not None and have < min(want, total):
                    raise hub.HubError(f"The connection ended early while reading {what}.",
                                       retryable=True)
                try:
                    header = read_header(tmp, check_tensor_data=False)
                    break
                except GGUFError as e:
                    # A header that runs past the bytes fetched reads as truncated (gguf.py's
                    # _Reader.need); test_remote_header covers this reading of its message.
                    more = "truncated" in str(e) and have >= want and (total is None
                                                                        or have < total)
                    if not more:
                        raise
                    if want >= max_bytes:
                        raise GGUFError(
                            f"The header of {what} is larger than {max_bytes / 2**20:g} MiB; "
                            "it was not read further.") from None
                    want = min(want * 2, max_bytes)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    size = total if total is not None else header.file_size
    if header.tensors:
        last = header.tensors[-1]
        end = header.data_offset + last.offset + last.nbytes
        if end > size:
            raise GGUFError(f"{what} is truncated on the Hub: its tensor data ends at {end:,} "
                            f"bytes but the file has {size:,}.")
    return dataclasses.replace(header, path=url, file_size=size)


def _fetch_range(c: hub.HubClient, url: str, repo: str, what: str, f: BinaryIO,
                 end: int) -> int | None:
    """Append bytes [f.tell(), end) of the file to f; return the file's total size if the server
    said. A server that ignores Range (200) is read from the start, and only up to `end`.
    Within RANGE_SECONDS, however slowly the answer comes (one deadline for the exchange)."""
    with c.deadline(RANGE_SECONDS) as watchdog:
        try:
            total = _read_range(c, url, repo, what, f, end)
        except httpx2.RequestError as exc:
            raise (hub.too_slow(url, RANGE_SECONDS) if watchdog.fired
                   else hub.request_error(exc, url)) from None
    if watchdog.fired:  # a body without a length ends where the watchdog cut it
        raise hub.too_slow(url, RANGE_SECONDS)
    return total


def _read_range(c: hub.HubClient, url: str, repo: str, what: str, f: BinaryIO,
                end: int) -> int | None:
    start = f.tell()
    headers = {"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"}
    with c.stream("GET", url, headers=headers) as response:
        code = response.status_code
        if code == 416:  # nothing at `start`: the file ends there
            m = UNSATISFIED_RANGE.match(response.headers.get("Content-Range", ""))
            return int(m[1]) if m else None
        if code >= 400:
            raise hub.status_error(response, what, repo)
        total: int | None = None
        if code == 206:
            m = CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
            if m is None or int(m[1]) != start:
                raise hub.HubError(f"The server sent a different part of {what} than asked.")
            total = int(m[3]) if m[3] != "*" else None
        elif code == 200:
            length = response.headers.get("Content-Length", "")
            total = int(length) if length.isdigit() else None
            f.seek(0)
            f.truncate()
            start = 0
        else:
            raise hub.HubError(f"The Hub answered HTTP {code} for {what}.", status=code)
        pos = start
        for chunk in response.iter_raw():
            chunk = chunk[:end - pos]
            f.write(chunk)
            pos += len(chunk)
            if pos >= end:
                break  # leaving the block closes the connection: the rest is never read
        return total
