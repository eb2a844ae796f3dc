"""The Hugging Face Hub: search GGUF repositories, list a repository's GGUF files grouped by
quantization, and read a file's download metadata (size, sha256, commit).

huggingface_hub provides the saved login, the repository id check and the response classes
(`ModelInfo`); the requests themselves go through a short-lived httpx2 client of our own, because
huggingface_hub 2.x
- reads HF_ENDPOINT and HF_HUB_OFFLINE once, at import time; we read them at every call;
- sends through one process-wide client with no timeout, so a silent server hangs a search forever;
- retries with backoff inside `list_models` and sleeps for whatever Retry-After says;
- builds its user agent (`build_hf_headers`) by fetching `/api/agent-harnesses` once a day from
  the import-time endpoint: a request to huggingface.co even when HF_ENDPOINT points elsewhere.
Here every exchange has a deadline that holds in every phase (connecting, the headers, the body:
a read timeout is per read, and a server that sent a header line every 2 s held a listing for
ever; core/socket_watchdog.py), nothing is retried behind the caller's back (a search is
interactive: the user retries), and offline mode refuses before any connection is attempted.
Proxies come from the environment (httpx2's trust_env).
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import httpx2
import huggingface_hub
from huggingface_hub import hf_api
from huggingface_hub.utils import HFValidationError, validate_repo_id

from inglenook import __version__
from inglenook.core.jsonload import JsonLoadError, loads
from inglenook.core.socket_watchdog import SocketWatchdog
from inglenook.models.filenames import (
    is_safe,
    looks_like_projector,
    parse_quant,
    precision_rank,
    split_name,
)
from inglenook.models.transfer import SMALL_ANSWER_HEADERS, BodyRefused, read_bounded

DEFAULT_ENDPOINT = "https://huggingface.co"
TIMEOUT = httpx2.Timeout(30.0, connect=10.0)
SORTS = {"downloads": "downloads", "likes": "likes", "recent": "lastModified"}
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_GIT_BLOB = re.compile(r"^[0-9a-f]{40}$")
_MAX_REDIRECTS = 5
# An answer is read up to these bounds and no further: a repository with thousands of files is a
# few MB of JSON; an endless list or error page would otherwise fill the memory.
MAX_JSON_BYTES = 32_000_000
# Deadlines for a whole exchange, from the request to the last byte of the answer (redirects
# included); each read has its timeout besides (TIMEOUT).
MAX_JSON_SECONDS = 120.0
HEAD_SECONDS = 30.0
MAX_JSON_DEPTH = 200  # model cards nest a few levels; json.loads recurses once per level
MAX_ERROR_BYTES = 2000


class HubError(Exception):
    """A message for the user, plus what a caller needs to decide whether to retry."""

    def __init__(self, message: str, *, status: int | None = None,
                 retry_after: float | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.retryable = retryable


class HubTooSlow(HubError):
    """The Hub (or a server it sent us to) did not finish answering within the deadline: it
    answered, slowly, so this is not a network failure."""


class HubOffline(HubError):
    """Offline mode (HF_HUB_OFFLINE=1): nothing was sent."""


class HubNotFound(HubError):
    pass


class HubAccessDenied(HubError):
    pass


# -- environment, read at every call --------------------------------------------------------------
def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def is_offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE), read now rather than at import like
    huggingface_hub.constants does, so that a change of setting takes effect."""
    return _env_true("HF_HUB_OFFLINE") or _env_true("TRANSFORMERS_OFFLINE")


def ensure_online() -> None:
    if is_offline():
        raise HubOffline("Offline mode is on (HF_HUB_OFFLINE=1): the Hugging Face Hub is not "
                         "contacted. Unset HF_HUB_OFFLINE to search and download.")


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


class HubClient(httpx2.Client):
    """An httpx2 client whose sockets its `watchdog` sees (every request, redirects too, carries
    its trace), so that `deadline` can end an exchange in any phase."""

    def __init__(self, **kwargs: object) -> None:
        self.watchdog = SocketWatchdog()
        super().__init__(event_hooks={"request": [self._watched]}, **kwargs)  # type: ignore[arg-type]

    def _watched(self, request: httpx2.Request) -> None:
        request.extensions["trace"] = self.watchdog.trace

    @contextmanager
    def deadline(self, seconds: float) -> Iterator[SocketWatchdog]:
        """The exchanges within end when `seconds` have passed: their sockets are shut down
        (they then fail with an httpx2 error, or a body without a length ends early), and
        `watchdog.fired` says so; turn it into `too_slow`."""
        with self.watchdog.deadline(seconds) as watchdog:
            yield watchdog


def client(timeout: httpx2.Timeout = TIMEOUT) -> HubClient:
    """A client for the Hub: token and user agent, proxies from the environment, redirects
    followed (httpx2 drops the token when a redirect leaves the Hub's origin). Close it."""
    ensure_online()
    return HubClient(headers=_headers(), timeout=timeout, trust_env=True, follow_redirects=True)


def _headers() -> dict[str, str]:
    headers = {"user-agent": f"inglenook/{__version__}; hf_hub/{huggingface_hub.__version__}; "
                             f"python/{platform.python_version()}"}
    token = (os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or "").strip()
    if not token and not _env_true("HF_HUB_DISABLE_IMPLICIT_TOKEN"):
        token = huggingface_hub.get_token() or ""  # the saved `hf auth login`
    if token:
        headers["authorization"] = f"Bearer {token}"
    return headers


def check_repo_id(repo: str) -> None:
    try:
        validate_repo_id(repo)
    except HFValidationError:
        raise HubError(f"{repo!r} is not a repository id like 'owner/name'.") from None
    if repo.count("/") != 1:
        raise HubError(f"{repo!r} is not a repository id like 'owner/name'.")


# -- requests -------------------------------------------------------------------------------------
def request_error(exc: httpx2.RequestError, url: str) -> HubError:
    """A readable HubError for a network failure."""
    host = urlsplit(url).netloc or url
    if isinstance(exc, httpx2.TimeoutException):
        return HubError(f"{host} did not answer in time.", retryable=True)
    if isinstance(exc, httpx2.ConnectError):
        return HubError(f"Cannot connect to {host} ({_reason(exc)}). Check the network, or set "
                        "HF_HUB_OFFLINE=1 to work offline.", retryable=True)
    return HubError(f"The connection to {host} failed ({_reason(exc)}).", retryable=True)


def too_slow(url: str, seconds: float) -> HubTooSlow:
    host = urlsplit(url).netloc or url
    return HubTooSlow(f"{host} did not finish answering within {seconds:g} s; try again later.",
                      retryable=True)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]


def retry_after(response: httpx2.Response) -> float | None:
    value = response.headers.get("Retry-After", "").strip()
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:  # an HTTP date: rare; the caller's backoff applies
        return None


def status_error(response: httpx2.Response, what: str, repo: str | None = None) -> HubError:
    """The HubError for an HTTP error answer about `what` (a repository or a file in `repo`)."""
    code = response.status_code
    error_code = response.headers.get("X-Error-Code", "")
    if error_code == "GatedRepo" or (code == 403 and "gated" in _body(response).lower()):
        return HubAccessDenied(f"{repo or what} is gated: accept its terms on huggingface.co and "
                               "set HF_TOKEN to a token of that account.", status=code)
    if error_code == "RepoNotFound":  # the Hub says 401 rather than reveal a private repository
        return HubNotFound(f"The repository {repo or what} was not found on the Hub (if it is "
                           "private, set HF_TOKEN).", status=code)
    if error_code == "RevisionNotFound":
        return HubNotFound(f"{what}: no such branch, tag or commit on the Hub.", status=code)
    if code == 404 or error_code == "EntryNotFound":
        return HubNotFound(f"{what} was not found on the Hub.", status=code)
    if code in (401, 403):
        return HubAccessDenied(f"The Hub refused access to {what} (HTTP {code}); if it is "
                               "private, set HF_TOKEN.", status=code)
    if code == 429:
        return HubError("The Hub is limiting requests (HTTP 429); try again shortly.",
                        status=code, retry_after=retry_after(response), retryable=True)
    if code >= 500 or code == 408:
        return HubError(f"The Hub had a problem (HTTP {code}); try again shortly.", status=code,
                        retry_after=retry_after(response), retryable=True)
    return HubError(f"The Hub answered HTTP {code} for {what}.", status=code)


def _body(response: httpx2.Response) -> str:
    """The start of an error page (of a streamed response: the rest is never read)."""
    if response.is_stream_consumed:
        return response.text[:MAX_ERROR_BYTES]
    try:
        raw = read_bounded(response, MAX_ERROR_BYTES, seconds=10.0, truncate=True)
    except (httpx2.HTTPError, BodyRefused):
        return ""
    return raw.decode("utf-8", "replace")


def _get_json(c: HubClient, url: str, what: str, params: Any = None,
              repo: str | None = None) -> Any:
    seconds = MAX_JSON_SECONDS
    with c.deadline(seconds) as watchdog:
        try:
            with c.stream("GET", url, params=params, headers=SMALL_ANSWER_HEADERS) as response:
                if response.status_code >= 400:
                    raise status_error(response, what, repo)
                raw = read_bounded(response, MAX_JSON_BYTES)
        except httpx2.RequestError as exc:
            raise (too_slow(url, seconds) if watchdog.fired else request_error(exc, url)
                   ) from None
        except BodyRefused as exc:
            raise HubError(f"{what}: the Hub's answer {exc}; it was not read further.") from None
    if watchdog.fired:  # a body without a length ends where the watchdog cut it
        raise too_slow(url, seconds)
    try:
        return loads(raw.decode("utf-8"), MAX_JSON_DEPTH)
    except (UnicodeDecodeError, JsonLoadError):
        raise HubError(f"{what}: the Hub's answer is not JSON.") from None


# -- search ---------------------------------------------------------------------------------------
VISION_TAGS = frozenset({"image-text-to-text", "image-to-text", "visual-question-answering",
                         "vision", "multimodal", "llava"})


@dataclass(frozen=True)
class RepoSummary:
    id: str
    author: str
    downloads: int
    likes: int
    last_modified: datetime | None
    gated: bool
    tags: tuple[str, ...]

    @property
    def vision(self) -> bool:
        """Tagged as reading images (its files then include a projector, checked on opening)."""
        return any(t.lower() in VISION_TAGS for t in self.tags)


def search_models(query: str, *, sort: str = "downloads", limit: int = 30) -> list[RepoSummary]:
    """GGUF repositories matching `query`, most first by "downloads", "likes" or "recent"."""
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}")
    params = {"search": query, "filter": "gguf", "sort": SORTS[sort], "limit": limit,
              "expand": ["downloads", "likes", "lastModified", "gated", "tags", "author"]}
    with client() as c:
        items = _get_json(c, f"{endpoint()}/api/models", "The model search", params)
    if not isinstance(items, list):
        raise HubError("The Hub sent a malformed search answer.")
    results = []
    for item in items[:limit]:
        try:
            info = hf_api.ModelInfo(**item)
        except (TypeError, KeyError, ValueError):  # one odd entry does not spoil the search
            continue
        results.append(RepoSummary(
            id=info.id, author=info.author or info.id.split("/")[0],
            downloads=info.downloads or 0, likes=info.likes or 0,
            last_modified=info.last_modified, gated=bool(info.gated),
            tags=tuple(info.tags or ())))
    return results


# -- a repository's GGUF files --------------------------------------------------------------------
@dataclass(frozen=True)
class HubFile:
    path: str  # in the repository
    size: int
    sha256: str | None  # the LFS hash; None for a file not in LFS
    blob_id: str | None = None  # git's sha1 of a file not in LFS (a speech model's config)


@dataclass(frozen=True)
class GGUFModel:
    """One loadable model: a single .gguf, or all the parts of a split one (load the first)."""

    name: str
    quant: str
    parts: tuple[HubFile, ...]
    parts_expected: int = 1

    @property
    def size(self) -> int:
        return sum(p.size for p in self.parts)

    @property
    def is_split(self) -> bool:
        return self.parts_expected > 1

    @property
    def complete(self) -> bool:
        return len(self.parts) == self.parts_expected


@dataclass(frozen=True)
class RepoListing:
    repo: str
    commit: str | None
    models: tuple[GGUFModel, ...]  # smallest first
    projectors: tuple[HubFile, ...] = ()  # vision projectors (mmproj GGUFs), not models

    @property
    def projector(self) -> HubFile | None:
        """The projector downloaded with each model of a vision repository: f16 first, as the
        Hub's vision repositories recommend (a projector is small beside its model)."""
        ranked = sorted(self.projectors, key=lambda f: (precision_rank(f.path), f.path))
        return ranked[0] if ranked else None

    def by_quant(self) -> dict[str, list[GGUFModel]]:
        """Quantization ("" for unknown) → its models, smallest quantization first."""
        groups: dict[str, list[GGUFModel]] = {}
        for model in self.models:
            groups.setdefault(model.quant, []).append(model)
        return groups


def group_gguf_files(files: Iterable[HubFile]) -> list[GGUFModel]:
    """GGUF files as models: unsafe names and projectors dropped, split parts gathered,
    smallest first."""
    singles: list[GGUFModel] = []
    sets: dict[tuple[str, int], list[tuple[int, HubFile]]] = {}
    for f in files:
        if (not f.path.lower().endswith(".gguf") or not is_safe(f.path)
                or looks_like_projector(f.path)):
            continue
        split = split_name(f.path)
        if split is None:
            singles.append(GGUFModel(f.path.rsplit("/", 1)[-1], parse_quant(f.path), (f,)))
        else:
            sets.setdefault((split.base, split.count), []).append((split.index, f))
    for (base, count), parts in sets.items():
        parts.sort(key=lambda p: p[0])
        unique = tuple(dict((i, f) for i, f in parts).values())
        first = split_name(unique[0].path)
        assert first is not None
        quant = parse_quant(base.rsplit("/", 1)[-1]) or parse_quant(unique[0].path)
        singles.append(GGUFModel(first.model_name, quant, unique, count))
    return sorted(singles, key=lambda m: (m.size, m.name))


def list_gguf_files(repo: str, revision: str = "main") -> RepoListing:
    """The repository's GGUF models with sizes and LFS sha256 (model_info with blobs=true)."""
    check_repo_id(repo)
    url = f"{endpoint()}/api/models/{repo}"
    if revision != "main":
        url += f"/revision/{quote(revision, safe='')}"
    with client() as c:
        data = _get_json(c, url, f"The repository {repo}", {"blobs": "true"}, repo)
    try:
        info = hf_api.ModelInfo(**data)
    except (TypeError, KeyError, ValueError):
        raise HubError(f"The Hub sent a malformed description of {repo}.") from None
    files = [HubFile(s.rfilename, s.size or 0, s.lfs.sha256 if s.lfs else None)
             for s in info.siblings or ()]
    projectors = tuple(f for f in files if looks_like_projector(f.path) and is_safe(f.path))
    return RepoListing(repo, info.sha, tuple(group_gguf_files(files)), projectors)


# -- one file's download metadata -----------------------------------------------------------------
@dataclass(frozen=True)
class FileMetadata:
    url: str  # where to GET the bytes: pinned to the commit when the Hub names one
    commit: str | None
    sha256: str | None  # the LFS sha256 from the ETag, when it is one
    size: int | None


def file_url(repo: str, filename: str, revision: str) -> str:
    return (f"{endpoint()}/{repo}/resolve/{quote(revision, safe='')}/"
            f"{quote(filename, safe='/')}")


def file_metadata(c: HubClient, repo: str, filename: str,
                  revision: str = "main") -> FileMetadata:
    """HEAD the file's resolve URL, as huggingface_hub does: follow redirects only while they stay
    on the Hub; a redirect to the CDN carries the metadata itself (X-Linked-Size, X-Linked-Etag).
    All the hops within HEAD_SECONDS."""
    url = file_url(repo, filename, revision)
    what = f"{filename} in {repo} ({revision})"
    headers = {"Accept-Encoding": "identity"}
    with c.deadline(HEAD_SECONDS) as watchdog:
        for _ in range(_MAX_REDIRECTS):
            try:
                response = c.head(url, headers=headers, follow_redirects=False)
            except httpx2.RequestError as exc:
                raise (too_slow(url, HEAD_SECONDS) if watchdog.fired
                       else request_error(exc, url)) from None
            if response.status_code >= 400:
                raise status_error(response, what, repo)
            if not response.has_redirect_location:
                break
            target = urljoin(url, response.headers["Location"])
            if httpx2.URL(target).origin != httpx2.URL(url).origin:
                break
            url = target
        else:
            raise HubError(f"Too many redirects for {what}.")
    h = response.headers
    etag = (h.get("X-Linked-Etag") or h.get("ETag") or "").removeprefix("W/").strip('"')
    size_text = h.get("X-Linked-Size") or ("" if response.is_redirect else h.get("Content-Length"))
    commit = h.get("X-Repo-Commit") or None
    return FileMetadata(
        url=file_url(repo, filename, commit or revision), commit=commit,
        sha256=etag.lower() if _SHA256.match(etag.lower()) else None,
        size=int(size_text) if size_text and size_text.isdigit() else None)


def lfs_sha256(c: HubClient, repo: str, filename: str, revision: str) -> HubFile | None:
    """The file's size and LFS sha256 from the repository description, when HEAD gave none."""
    url = f"{endpoint()}/api/models/{repo}/revision/{quote(revision, safe='')}"
    data = _get_json(c, url, f"The repository {repo}", {"blobs": "true"}, repo)
    siblings = data.get("siblings") if isinstance(data, dict) else None
    for sibling in siblings or ():
        if isinstance(sibling, dict) and sibling.get("rfilename") == filename:
            lfs = sibling.get("lfs") or {}
            sha = str(lfs.get("sha256") or "").lower()
            blob = str(sibling.get("blobId") or "").lower()
            return HubFile(filename, int(sibling.get("size") or lfs.get("size") or 0),
                           sha if _SHA256.match(sha) else None,
                           blob if _GIT_BLOB.match(blob) and not lfs else None)
    return None
