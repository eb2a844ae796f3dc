"""What Ollama's `pull` names and what it brings: `hf.co/owner/repo:Q4_K_M` (Ollama's own
naming for the Hugging Face Hub; `huggingface.co/…` and a plain `owner/repo:TAG` too) read as a
repository and a quantization; which of the repository's files that is (its split parts and a
vision model's projector with it); and the names models were pulled by, kept in the profile so
that the client finds the model by the name it pulled (`/api/tags`, `/api/chat`).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

from inglenook import paths
from inglenook.core.files import write_atomic
from inglenook.models import hub
from inglenook.models.hub import GGUFModel, HubFile, RepoListing
from inglenook.server.errors import ApiError

HOSTS = ("hf.co/", "huggingface.co/", "https://hf.co/", "https://huggingface.co/")
# Without a tag (or with :latest) the Hub's Ollama integration takes Q4_K_M; where a repository
# has none, the first of these it has, else its smallest file.
DEFAULT_QUANTS = ("Q4_K_M", "Q4_K_S", "Q4_0", "IQ4_XS", "Q5_K_M", "Q5_K_S", "Q6_K", "Q8_0")
MAX_NAMES = 1000


@dataclass(frozen=True)
class PullName:
    name: str  # as the client will name the model: what it sent, ":latest" added if untagged
    repo: str
    tag: str  # "" for the default quantization


def parse_name(raw: str) -> PullName:
    """The repository and tag a pull names; 400 for what is no name, 404 for Ollama's own
    library (`llama3.2`), which is not the Hub."""
    name = raw.strip()
    bare = name
    for host in HOSTS:
        if bare.lower().startswith(host):
            bare = bare[len(host):]
            break
    repo, _, tag = bare.partition(":")
    if tag.lower() == "latest":
        tag = ""
    if "/" not in repo:
        raise ApiError(404, f"pull model manifest: '{name[:100]}' is a name in Ollama's own "
                       "library, which this server does not reach; pull a GGUF repository of "
                       "the Hugging Face Hub instead, as hf.co/owner/repo:QUANT (e.g. "
                       "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M).",
                       param="model", code="model_not_found")
    try:
        hub.check_repo_id(repo)
    except hub.HubError as exc:
        raise ApiError(400, f"'{name[:100]}' does not name a Hub repository: {exc}",
                       param="model") from None
    shown = name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"
    return PullName(shown, repo, tag)


def choose(listing: RepoListing, wanted: PullName) -> tuple[GGUFModel, tuple[HubFile, ...]]:
    """The model a tag names in the repository and the files to fetch for it (its parts,
    then the projector of a vision repository); 404 naming the tags there are."""
    models = [m for m in listing.models if m.complete]
    if not models:
        raise ApiError(404, f"pull model manifest: {wanted.repo} has no complete GGUF model "
                       "to download.", param="model", code="model_not_found")
    tag = wanted.tag.upper()
    if tag:
        found = [m for m in models if tag in (m.quant, m.name.upper(),
                                              m.name.upper().removesuffix(".GGUF"))]
    else:
        found = next(([m for m in models if m.quant == q] for q in DEFAULT_QUANTS
                      if any(m.quant == q for m in models)), models)
    if not found:
        tags = ", ".join(dict.fromkeys(m.quant for m in models if m.quant)) or "none"
        raise ApiError(404, f"pull model manifest: {wanted.repo} has no {wanted.tag} file; "
                       f"its tags: {tags}.", param="model", code="model_not_found")
    model = found[0]
    projector = listing.projector
    return model, (*model.parts, *((projector,) if projector is not None else ()))


class PulledNames:
    """Names models were pulled by and their files' names in the models folder, in the
    profile (one small JSON file, rewritten whole). A name whose file is gone names nothing."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.pulled_names_file()
        self._lock = threading.Lock()

    def _read(self) -> list[tuple[str, str]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return [(str(e["name"]), str(e["file"])) for e in data if isinstance(e, dict)
                and isinstance(e.get("name"), str) and isinstance(e.get("file"), str)] \
            if isinstance(data, list) else []

    def add(self, name: str, filename: str) -> None:
        with self._lock:
            kept = [(n, f) for n, f in self._read() if _key(n) != _key(name)]
            kept = [*kept, (name, filename)][-MAX_NAMES:]  # the oldest go first
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps([{"name": n, "file": f} for n, f in kept],
                                               indent=1).encode())

    def by_file(self) -> dict[str, str]:
        """File name (lower case) → the name it was last pulled by."""
        return {f.lower(): n for n, f in self._read()}

    def file_of(self, name: str) -> str | None:
        """The file a pulled name stands for (with or without ":latest"), or None."""
        wanted = _key(name)
        return next((f for n, f in reversed(self._read()) if _key(n) == wanted), None)


def _key(name: str) -> str:
    """Names compare without case and with or without ":latest" (Open WebUI adds it)."""
    key = name.strip().lower()
    return key if ":" in key.rsplit("/", 1)[-1] else f"{key}:latest"
