"""Ollama's model routes: the root check (`GET /`, `HEAD /`: "Ollama is running"), /api/tags,
/api/ps and /api/show for every model of the library (loaded or not: a client such as Zed
shows each one it lists), the load and unload idioms (a chat or generate request with no
prompt), and Ollama-shaped answers for what this server does not do (push, create, copy,
delete). A model pulled through the API is listed by the name it was pulled by.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from inglenook.core.load import ModelInfo
from inglenook.engine.client import EngineError
from inglenook.models import fingerprint
from inglenook.models.gguf import GGUFError, GGUFHeader, read_header
from inglenook.models.library import files_size, quantization, split_parts
from inglenook.server.engine_link import EngineLink
from inglenook.server.errors import ApiError
from inglenook.server.fields import obj, text
from inglenook.server.pulled_names import PulledNames

_FIM_KEYS = ("tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id")
NOT_HERE = ("This server does not {what} models through Ollama's API: {how}.")
_UNSUPPORTED = {
    "/api/push": ("upload", "models stay on this machine"),
    "/api/create": ("create", "put a GGUF file in the models folder (Models → Library → "
                    "Add…) and set its defaults there"),
    "/api/copy": ("copy", "copy the GGUF file in the models folder"),
    "/api/delete": ("delete", "use Models → Library, or `inglenook models rm NAME`"),
}


def untagged(name: str) -> str:
    """Ollama's clients name models `name:tag`; Open WebUI adds ":latest" to a name without
    one. Files here have no tags, so ":latest" means the file of that name."""
    return name[:-len(":latest")] if name.lower().endswith(":latest") else name


def _time(path: str) -> str:
    try:
        stamp = os.stat(path).st_mtime
    except OSError:
        stamp = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def digest_of(path: str) -> str:
    """The file's sha256 once the app has computed it (at load); until then a digest of its
    path, size and time, which changes when the file does (clients compare, never verify)."""
    known = fingerprint.known_sha256(path)
    if known:
        return known
    try:
        stat = os.stat(path)
    except OSError:
        return ""
    return hashlib.sha256(f"{path}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()


def _details(header: GGUFHeader | None, path: str) -> dict[str, Any]:
    architecture = header.architecture if header else ""
    return {"parent_model": "", "format": "gguf", "family": architecture,
            "families": [architecture] if architecture else [],
            "parameter_size": "", "quantization_level": quantization(header, path)}


def _header(path: str) -> GGUFHeader | None:
    try:
        return read_header(path)
    except (GGUFError, OSError):
        return None


def _entry(name: str, path: str) -> dict[str, Any]:
    header = _header(path)
    return {"name": name, "model": name, "modified_at": _time(path),
            "size": files_size(split_parts(Path(path))), "digest": digest_of(path),
            "details": _details(header, path)}


def _capabilities(header: GGUFHeader | None, info: ModelInfo | None) -> list[str]:
    if header is not None and header.metadata.get(f"{header.architecture}.pooling_type"):
        return ["embedding"]
    template = (header.chat_template if header else None) or ""
    tools = bool(info.tool_format) if info is not None else "tools" in template
    thinking = (info.traits.reasoning is not None if info is not None
                else "<think>" in template or "enable_thinking" in template)
    fim = header is not None and any(k in header.metadata for k in _FIM_KEYS)
    return (["completion"] + (["tools"] if tools else []) + (["insert"] if fim else [])
            + (["thinking"] if thinking else []) + (["vision"] if info and info.vision else []))


def _template(header: GGUFHeader | None) -> str:
    """What `show` gives as the template. Ollama's are Go templates; here the file's own
    (Jinja) chat template, and `{{ .Suffix }}` where the model fills in the middle, which is
    what clients look for before they send `suffix` (Continue's autocomplete)."""
    template = (header.chat_template if header else None) or ""
    if header is not None and any(k in header.metadata for k in _FIM_KEYS):
        template += "\n{{- if .Suffix }}{{ .Prompt }}{{ .Suffix }}{{ end }}"
    return template


def _parameters(n_ctx: int, stops: tuple[str, ...]) -> str:
    """Ollama's `parameters` text: one "name value" per line (Continue reads num_ctx and
    the stop words)."""
    lines = [f"num_ctx {n_ctx}"] if n_ctx else []
    lines += [f'stop "{s}"' for s in stops]
    return "\n".join(lines)


def show_model(name: str, path: str, info: ModelInfo | None) -> dict[str, Any]:
    header = _header(path)
    n_ctx = info.n_ctx if info is not None else (header.context_length if header else 0)
    trained = header.context_length if header else (info.n_ctx_train if info else 0)
    architecture = header.architecture if header else (info.architecture if info else "")
    return {"modelfile": f"# Inglenook: {Path(path).name}\nFROM {path}\n",
            "parameters": _parameters(n_ctx, ()), "template": _template(header),
            "details": _details(header, path), "capabilities": _capabilities(header, info),
            "modified_at": _time(path),
            "model_info": {"general.architecture": architecture,
                           "general.basename": name,
                           f"{architecture}.context_length": trained}}


def routes(link: EngineLink, body: Callable[[Request], Any], names: PulledNames
           ) -> list[Route]:
    def library() -> list[tuple[str, str]]:
        """The library with the window's model first (it may be a file opened from
        elsewhere); a model pulled through the API under the name it was pulled by."""
        model = link.client.model
        pulled = names.by_file()
        entries = [(pulled.get(Path(p).name.lower(), n), p) for n, p in link.client.library()]
        if model is None:
            return entries
        rest = [(n, p) for n, p in entries if p != model.path]
        return [(pulled.get(Path(model.path).name.lower(), model.name), model.path), *rest]

    def find(name: str) -> tuple[str, str] | None:
        wanted = name.strip().lower()
        model = link.client.model
        if not wanted:  # no name: the loaded model, as for a reply
            return (model.name, model.path) if model is not None else None
        for entry_name, path in library():
            if wanted in (entry_name.lower(), Path(path).name.lower(), Path(path).stem.lower()):
                return entry_name, path
        return None

    async def root(_request: Request) -> Response:
        return PlainTextResponse("Ollama is running")

    async def tags(_request: Request) -> JSONResponse:
        entries = await asyncio.to_thread(lambda: [_entry(n, p) for n, p in library()])
        return JSONResponse({"models": entries})

    async def ps(_request: Request) -> JSONResponse:
        loaded = {m.path: m for m in link.client.loaded_models()}
        entries = await asyncio.to_thread(
            lambda: [{**_entry(n, p), "expires_at": _time(p), "size_vram": 0,
                      "context_length": (link.model_info(link.client.group_of(p)) or
                                         _NO_INFO).n_ctx}
                     for n, p in library() if p in loaded])
        return JSONResponse({"models": entries})

    async def show(request: Request) -> JSONResponse:
        data = obj(await body(request))

        name = untagged(text(data, "model", 256) or text(data, "name", 256))
        found = find(names.file_of(name) or name)
        if found is None:
            raise ApiError(404, f"model '{name[:100]}' not found", param="model",
                           code="model_not_found")
        entry_name, path = found
        info = link.model_info(link.client.group_of(path))
        return JSONResponse(await asyncio.to_thread(show_model, entry_name, path, info))

    def unsupported(path: str) -> Callable[[Request], Any]:
        what, how = _UNSUPPORTED[path]

        async def answer(_request: Request) -> Response:
            raise ApiError(501, NOT_HERE.format(what=what, how=how))

        return answer

    return [Route("/", root, methods=["GET", "HEAD"]),
            Route("/api/tags", tags, methods=["GET"]),
            Route("/api/ps", ps, methods=["GET"]),
            Route("/api/show", show, methods=["POST"]),
            *(Route(path, unsupported(path), methods=["POST", "DELETE"])
              for path in _UNSUPPORTED)]


class _NoInfo:
    n_ctx = 0


_NO_INFO = _NoInfo()


async def load_or_unload(link: EngineLink, model: str, keep_alive: float | None,
                         done: Callable[[str], dict[str, Any]]) -> JSONResponse:
    """Ollama's idioms for a request without a prompt: load the model (keep_alive unset or
    positive), or unload it (keep_alive 0). The window's own model is the user's choice:
    it stays loaded, and the answer says so."""
    group = link.resolve(model)
    if keep_alive == 0:
        if group:
            await asyncio.to_thread(link.client.unload_model, group)
            return JSONResponse(done("unload"))
        response = JSONResponse(done("unload"))
        response.headers["X-Inglenook-Warning"] = (
            "The window's model stays loaded: unload it in the window.")
        return response
    if not group and link.client.model is None:
        raise ApiError(503, "No model is loaded.", code="model_not_loaded")
    try:
        await asyncio.to_thread(link.client.preload, group, keep_alive)
    except EngineError as exc:
        raise ApiError(500, f"The model {Path(group).stem} could not be loaded: {exc}",
                       code="model_load_failed") from exc
    return JSONResponse(done("load"))
