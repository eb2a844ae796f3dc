"""Ollama's POST /api/pull, from the Hugging Face Hub, where the user allows it (off unless
`inglenook serve --allow-pull` or the API server settings say so: the server otherwise never
reaches the network on a client's behalf).

The files go through the app's own download queue (models/download_queue.py: resumable,
sha256-checked, installed whole or not at all), the window's when the server runs in the
window, so a pull shows among its downloads. Progress is Ollama's NDJSON: "pulling manifest",
"pulling <digest>" with `total` and `completed` per file, "verifying sha256 digest", "writing
manifest" (the name it was pulled by, kept in the profile: pulled_names.py), "success";
`stream: false` answers the last of them alone. A client that leaves pauses the downloads its
pull started: the partial files stay (never in the Library: they do not end in .gguf) and the
next pull of that model, or Resume in the window, goes on from them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from inglenook.models import fingerprint, hub
from inglenook.models.download_queue import DownloadManager, DownloadState, DownloadStatus
from inglenook.models.hub import HubFile
from inglenook.server.config import ServerConfig
from inglenook.server.errors import ApiError
from inglenook.server.fields import boolean, obj, only_known, text
from inglenook.server.pulled_names import PulledNames, PullName, choose, parse_name
from inglenook.server.request_log import note_usage

PULL_FIELDS = {"model", "name", "insecure", "stream"}
NOT_ALLOWED = ("Downloads through the API are off: turn on 'Let clients download models "
               "(Ollama's pull)' in the window's API server settings, or start the server "
               "with `inglenook serve --allow-pull`.")
CLOSE_TIMEOUT_S = 3.0  # a download stops at its next chunk (its partial kept)


class Puller:
    """The downloads pulls started, over a DownloadManager: the window's, or one of the
    server's own made at the first pull (and paused when the server stops)."""

    def __init__(self, downloads: DownloadManager | None, names: PulledNames | None = None
                 ) -> None:
        self._given = downloads
        self._own: DownloadManager | None = None
        self.names = names or PulledNames()
        self._holders: dict[int, int] = {}  # job → pulls following it now
        self._ours: set[int] = set()  # jobs a pull started or resumed: a pull's to pause

    @property
    def downloads(self) -> DownloadManager:
        if self._given is not None:
            return self._given
        if self._own is None:
            self._own = DownloadManager()
        return self._own

    def start(self, repo: str, files: tuple[HubFile, ...], jobs: list[int]) -> None:
        """Queue the files, their jobs added to `jobs` as they come (a download of one
        already under way is followed, not doubled; a paused one is resumed from its partial
        file). Event loop only."""
        manager = self.downloads
        for f in files:
            before = {s.id for s in manager.statuses()}
            job = manager.add(repo, f.path)
            if job not in before:
                self._ours.add(job)
            elif manager.status(job).state in (DownloadState.PAUSED, DownloadState.FAILED):
                manager.resume(job)
                self._ours.add(job)
            self._holders[job] = self._holders.get(job, 0) + 1
            jobs.append(job)

    def release(self, jobs: list[int], finished: bool) -> None:
        """A pull is over: when it ended early (its client left) and no other pull follows
        them, the downloads it started are paused."""
        for job in jobs:
            self._holders[job] -= 1
            if self._holders[job] > 0:
                continue
            del self._holders[job]
            if job in self._ours:
                self._ours.discard(job)
                if not finished and self.downloads.status(job).state in (
                        DownloadState.QUEUED, DownloadState.RUNNING):
                    self.downloads.pause(job)

    def close(self) -> None:
        if self._own is not None:
            self._own.close(CLOSE_TIMEOUT_S)


def parse_pull(data: Any) -> tuple[PullName, bool]:
    body = obj(data)
    only_known(body, PULL_FIELDS)
    boolean(body, "insecure")  # a registry's TLS: the Hub's address is HF_ENDPOINT's
    name = text(body, "model", 512) or text(body, "name", 512)
    if not name:
        raise ApiError(400, "'model' must name what to pull, as hf.co/owner/repo:QUANT.",
                       param="model")
    return parse_name(name), boolean(body, "stream", default=True)


async def manifest(wanted: PullName) -> tuple[str, tuple[HubFile, ...]]:
    """The files of the model a pull names (the repository read from the Hub), as the
    model's first file's name and the list; Hub failures as Ollama-shaped errors."""
    try:
        listing = await asyncio.to_thread(hub.list_gguf_files, wanted.repo)
    except hub.HubNotFound as exc:
        raise ApiError(404, f"pull model manifest: {exc}", param="model",
                       code="model_not_found") from None
    except (hub.HubAccessDenied, hub.HubOffline) as exc:
        raise ApiError(403, f"pull model manifest: {exc}", param="model") from None
    except hub.HubError as exc:
        raise ApiError(502, f"pull model manifest: {exc}") from None
    model, files = choose(listing, wanted)
    return model.parts[0].path, files


def route(config: ServerConfig, puller: Puller, body: Callable[[Request], Any]
          ) -> Callable[[Request], Any]:
    async def pull(request: Request) -> Any:
        data = await body(request)
        if not config.allow_pull:
            raise ApiError(403, NOT_ALLOWED, code="downloads_off")
        wanted, stream = parse_pull(data)
        if hub.is_offline():
            raise ApiError(403, "Offline mode is on (HF_HUB_OFFLINE=1): nothing is "
                           "downloaded.", code="offline")
        first, files = await manifest(wanted)
        return PullResponse(puller, wanted, first, files, stream)

    return pull


def _line(data: dict[str, Any]) -> bytes:
    return (json.dumps(data) + "\n").encode()


@dataclass
class _Layer:
    file: HubFile
    job: int
    shown: int = -1  # the `completed` last sent (-1: none yet)

    @property
    def digest(self) -> str:
        return f"sha256:{self.file.sha256}" if self.file.sha256 else ""

    def status(self) -> str:
        short = self.file.sha256[:12] if self.file.sha256 else Path(self.file.path).name
        return f"pulling {short}"


class PullResponse:
    """The ASGI response of one pull: NDJSON progress, or (stream false) its last object.
    While it runs it listens for the client leaving, as a reply does (streaming.py)."""

    def __init__(self, puller: Puller, wanted: PullName, first: str,
                 files: tuple[HubFile, ...], stream: bool) -> None:
        self.puller, self.wanted, self.first, self.files = puller, wanted, first, files
        self.stream = stream
        self.jobs: list[int] = []
        self.finished = False
        self.outcome = "client left"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._watch, receive, tasks.cancel_scope)
                try:
                    await (self._send_stream(send) if self.stream else self._send_whole(send))
                finally:
                    self.puller.release(self.jobs, self.finished)
                    tasks.cancel_scope.cancel()
        finally:
            note_usage(scope, self.wanted.name, None, self.outcome)

    async def _watch(self, receive: Receive, scope: anyio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        scope.cancel()

    async def _send_stream(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/x-ndjson")]})
        try:
            async with contextlib.aclosing(self._progress()) as progress:
                async for part in progress:
                    await send({"type": "http.response.body", "body": _line(part),
                                "more_body": True})
        except ApiError as exc:
            self.outcome = exc.message
            await send({"type": "http.response.body", "body": _line({"error": exc.message}),
                        "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _send_whole(self, send: Send) -> None:
        last: dict[str, Any] = {}
        status = 200
        try:
            async with contextlib.aclosing(self._progress()) as progress:
                async for part in progress:
                    last = part
        except ApiError as exc:
            self.outcome = exc.message
            last, status = {"error": exc.message}, exc.status
        body = json.dumps(last).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def _progress(self) -> AsyncGenerator[dict[str, Any], None]:
        yield {"status": "pulling manifest"}
        manager = self.puller.downloads
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()

        def woken(_status: DownloadStatus) -> None:  # on a download thread
            with contextlib.suppress(RuntimeError):  # the server's loop has ended
                loop.call_soon_threadsafe(wake.set)

        unwatch = manager.watch(woken)
        try:
            self.puller.start(self.wanted.repo, self.files, self.jobs)
            layers = [_Layer(f, job) for f, job in zip(self.files, self.jobs, strict=True)]
            while True:
                wake.clear()
                statuses = [manager.status(layer.job) for layer in layers]
                for layer, status in zip(layers, statuses, strict=True):
                    shown = _shown(layer, status)
                    if shown is not None:
                        yield shown
                if all(s.state is DownloadState.DONE for s in statuses):
                    break
                await wake.wait()
        finally:
            unwatch()
        yield {"status": "verifying sha256 digest"}  # each file was, as it arrived
        paths = [s.path for s in statuses]
        for layer, path in zip(layers, paths, strict=True):
            if path is not None and layer.file.sha256:
                fingerprint.remember(str(path), layer.file.sha256)  # /api/tags' digest
        yield {"status": "writing manifest"}
        first = next(p for layer, p in zip(layers, paths, strict=True)
                     if layer.file.path == self.first)
        assert first is not None
        await asyncio.to_thread(self.puller.names.add, self.wanted.name, first.name)
        self.finished, self.outcome = True, ""
        yield {"status": "success"}


def _shown(layer: _Layer, status: DownloadStatus) -> dict[str, Any] | None:
    """The progress line a file's status calls for (None: nothing new); an error for a
    download that failed or was stopped in the window."""
    name = Path(layer.file.path).name
    if status.state is DownloadState.FAILED:
        raise ApiError(500, status.message or f"The download of {name} failed.")
    if status.state is DownloadState.CANCELLED:
        raise ApiError(500, f"The download of {name} was cancelled in the window.")
    if status.state is DownloadState.PAUSED:
        raise ApiError(500, f"The download of {name} was paused in the window; pull again "
                       "to resume it.")
    if status.state is DownloadState.QUEUED:
        return None  # waiting behind another download: nothing to show yet
    total = layer.file.size or status.total_bytes
    done = total if status.state is DownloadState.DONE else status.done_bytes
    completed = max(layer.shown, min(done, total))  # a restart from zero is not shown
    if completed == layer.shown:
        return None
    layer.shown = completed
    return {"status": layer.status(), "digest": layer.digest, "total": total,
            "completed": completed}
