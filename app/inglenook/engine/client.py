"""Qt-free client of one engine host process (used by the CLI, the router and the tests).

Replies stream on as many threads as the host has slots; `cancel()` may be called from any
thread.
If the host dies, the client raises EngineCrashed with a readable reason and starts a fresh host
on the next load(); it never reloads on its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import inglenook
from inglenook import paths
from inglenook.core.load import LoadParams, LoadRefusal, ModelInfo
from inglenook.core.messages import WINDOW, GenerationRequest
from inglenook.core.replies import Finish
from inglenook.engine import protocol as p
from inglenook.engine.kv_states import forget_kept_states

START_TIMEOUT_S = 60.0
# A stop that the host has not honoured within max(this, 3 × the slowest step seen in the
# request) is forced by restarting the host. llama.cpp stops within a token or a batch; only a
# stuck host (or a step it cannot interrupt) gets here.
CANCEL_GRACE_S = 5.0
# Texts per Embed request (one batch of the host's, when short): the host pauses the replies
# while it reads them, and steps them again between two requests.
EMBED_PART = 16
# Embed and CountImages requests count down from -1: no reply, tune or inspect (all counted up
# from 1) has one.
_embed_ids = itertools.count(-1, -1)


class EngineError(Exception):
    """A failure the user should read (bad model file, engine gone)."""


class EngineCrashed(EngineError):
    pass


class LoadRefused(EngineError):
    """A load that was not tried: `refusal` says why and what would make it load (a smaller
    context, fewer replies at once, an explicit choice of a longer context)."""

    def __init__(self, refusal: LoadRefusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


class EmbedRefused(EngineError):
    """The texts of an embed() were refused (too long, empty): the caller's to fix."""


class _Ended:
    """Put on every queue of a host whose output closed."""


_ENDED = _Ended()


def default_host_command() -> list[str]:
    """This Python running the host module; in a frozen bundle (PyInstaller) sys.executable is
    the app itself, which runs the host when given --engine-host (see inglenook/__main__.py)."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "--engine-host"]
    return [sys.executable, "-m", "inglenook.engine.host"]


class _Channel:
    """One host process and where its events go: each request's own queue (by request id),
    and one queue for the rest (loads, reports, quantizing)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.control: queue.Queue[Any] = queue.Queue()
        self._streams: dict[int, queue.Queue[Any]] = {}
        self._lock = threading.Lock()
        self.ended = False
        self.crash: str | None = None  # why the process ended, once read

    def route(self, event: Any) -> None:
        rid = getattr(event, "request_id", None)
        with self._lock:
            target = self.control if rid is None else self._streams.get(rid)
        if target is not None:  # else a late event of a request nobody waits for
            target.put(event)

    def end(self) -> None:
        with self._lock:
            self.ended = True
            queues = [self.control, *self._streams.values()]
        for q in queues:
            q.put(_ENDED)

    def open(self, rid: int) -> queue.Queue[Any]:
        q: queue.Queue[Any] = queue.Queue()
        with self._lock:
            if self.ended:
                q.put(_ENDED)
            self._streams[rid] = q
        return q

    def close(self, rid: int) -> None:
        with self._lock:
            self._streams.pop(rid, None)


# How long a host may take to exit: it writes the KV states of its chats to disk first
# (engine/kv_states.py), for the next engine.
SHUTDOWN_S = 10.0


class EngineClient:
    """`command` runs the host (default: this Python running inglenook.engine.host); tests give
    a fake host that speaks the same protocol (tests/helpers/fake_host.py).

    Several threads may stream replies at once (the host decodes them together, one per
    slot); loads, unloads and reports are one at a time. `cancel()` may be called from any
    thread."""

    can_tune = True  # engine.interface.Engine's capabilities
    keeps_states = True
    can_inspect = True
    can_embed = True
    accepted_sampling: frozenset[str] | None = None  # every sampling setting

    def __init__(self, log_path: Path | None = None,
                 command: Sequence[str] | None = None) -> None:
        self._log_path = log_path or paths.engine_log_file()
        self._command = list(command or default_host_command())
        self._channel: _Channel | None = None
        self._write_lock = threading.Lock()
        self._control_lock = threading.RLock()  # one load, report or quantize at a time
        self._cancel_at: dict[int, float] = {}
        self.ready: p.Ready | None = None
        self.model: ModelInfo | None = None
        # Called from a reader thread the moment a host process ends (crash or shutdown), so
        # a host that dies while idle is noticed at once, not at the next request.
        self.on_exit: Callable[[], None] | None = None

    # ---- process -------------------------------------------------------------------------
    @property
    def command(self) -> list[str]:
        """What runs the host (the router starts the hosts of other models the same way)."""
        return list(self._command)

    @property
    def _proc(self) -> subprocess.Popen[bytes] | None:
        return self._channel.proc if self._channel is not None else None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def lanes(self) -> int:
        """Replies the engine decodes at once (its slots; 1 before a model is loaded)."""
        return self.model.n_slots if self.model is not None else 1

    def start(self) -> p.Ready:
        with self._control_lock:
            if self.alive and self.ready:
                return self.ready
            self._stop_process()
            env = dict(os.environ)
            source_root = str(Path(inglenook.__file__).resolve().parents[1])
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [source_root,
                                                              env.get("PYTHONPATH")]))
            log: IO[bytes] = open(self._log_path, "ab")  # noqa: SIM115 - handed to the child
            try:
                proc = subprocess.Popen(
                    self._command,
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env)
            finally:
                log.close()
            channel = self._channel = _Channel(proc)
            threading.Thread(target=self._read_events, args=(channel, self._exited),
                             daemon=True, name="engine-events").start()
            event = self._next(channel, channel.control, START_TIMEOUT_S)
            if not isinstance(event, p.Ready):
                raise EngineCrashed(f"The engine did not start ({event!r}).")
            self.ready = event
            return event

    @staticmethod
    def _read_events(channel: _Channel, on_exit: Callable[[], None] | None) -> None:
        stdout = channel.proc.stdout
        assert stdout is not None
        try:
            while (event := p.read_frame(stdout)) is not None:
                channel.route(event)
        except (p.ProtocolError, OSError, ValueError):
            pass
        channel.end()
        if on_exit is not None:
            on_exit()

    def _next(self, channel: _Channel, q: queue.Queue[Any], timeout: float | None = None) -> Any:
        try:
            event = q.get(timeout=timeout)
        except queue.Empty:
            return None
        if event is _ENDED:
            q.put(event)  # every later read sees the end too
            raise EngineCrashed(self._crash_reason(channel))
        return event

    def _crash_reason(self, channel: _Channel) -> str:
        with self._control_lock:
            if channel.crash is not None:
                return channel.crash
            proc = channel.proc
            try:
                code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            if channel is self._channel:
                self.model = None
            if code < 0:
                try:
                    how = f"killed by {signal.Signals(-code).name}"
                except ValueError:
                    how = f"killed by signal {-code}"
            else:
                how = f"exit status {code}"
            detail = _last_line(self._log_path)
            detail = f" Last message: {detail}" if detail else ""
            channel.crash = f"The engine stopped unexpectedly ({how}).{detail}"
            return channel.crash

    def _send(self, message: Any) -> None:
        proc = self._proc  # cancel() may run on another thread while the process changes
        if proc is None or proc.poll() is not None or proc.stdin is None:
            raise EngineCrashed("The engine is not running.")
        try:
            with self._write_lock:
                p.write_frame(proc.stdin, message)
        except (OSError, ValueError) as exc:  # ValueError: stdin closed meanwhile
            raise EngineCrashed(f"The engine stopped unexpectedly ({exc}).") from exc

    def _exited(self) -> None:
        if self.on_exit is not None:
            self.on_exit()

    def _control(self) -> _Channel:
        channel = self._channel
        if channel is None:
            raise EngineCrashed("The engine is not running.")
        return channel

    def check(self) -> None:
        """Raise EngineCrashed if the host died while a model was loaded (the reason is read
        from its exit status and log). Call from the thread that drives the client."""
        channel = self._channel
        if channel is not None and channel.crash is not None:
            # Another thread's request (a memory report) met the death first and forgot the
            # model: the death is still news to the thread that drives the client.
            raise EngineCrashed(channel.crash)
        # Its output closed is enough: the process may not be reaped yet (poll() says alive).
        if channel is not None and self.model is not None and (channel.ended or not self.alive):
            while self._next(channel, channel.control, 1.0) is not None:  # events before the end
                pass

    def _stop_process(self) -> None:
        channel, self._channel = self._channel, None
        self.model = None
        if channel is None:
            return
        proc = channel.proc
        if proc.poll() is None:
            try:
                assert proc.stdin is not None
                with self._write_lock:
                    p.write_frame(proc.stdin, p.Shutdown())
                proc.wait(timeout=SHUTDOWN_S)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream:
                stream.close()

    def close(self) -> None:
        with self._control_lock:
            self._stop_process()

    def kill(self) -> None:
        """Kill the host abruptly (tests and the stop watchdog)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    # ---- requests ------------------------------------------------------------------------
    def load(self, params: LoadParams,
             on_progress: Callable[[float], None] | None = None) -> ModelInfo:
        """Raises LoadRefused for a load the fit planner refused, EngineError for others."""
        with self._control_lock:
            self.start()
            channel = self._control()
            self._send(p.Load(params))
            while True:
                event = self._next(channel, channel.control)
                if isinstance(event, p.LoadProgress):
                    if on_progress:
                        on_progress(event.fraction)
                elif isinstance(event, p.Loaded):
                    self.model = event.info
                    return event.info
                elif isinstance(event, p.LoadFailed):
                    self.model = None
                    if event.refusal is not None:
                        raise LoadRefused(event.refusal)
                    raise EngineError(event.message)

    def unload(self) -> None:
        with self._control_lock:
            if self.alive and self.model is not None:
                channel = self._control()
                self._send(p.Unload())
                while not isinstance(self._next(channel, channel.control), p.Unloaded):
                    pass
            self.model = None

    def generate(self, request: GenerationRequest) -> Iterator[Any]:
        """Yield the host's events for this request, ending with exactly one Finished."""
        rid = request.request_id
        channel = self._control()
        stream = channel.open(rid)
        try:
            self._send(p.Generate(request))
            last_event, slowest = time.monotonic(), 0.0
            while True:
                event = self._next(channel, stream, timeout=0.1)
                now = time.monotonic()
                # A host that goes on (or goes silent) after a stop is killed: checked whether
                # or not events still arrive.
                if self._cancel_overdue(rid, max(CANCEL_GRACE_S, 3 * slowest)):
                    self.kill()  # the host will be restarted on the next load
                    while True:
                        self._next(channel, stream)  # raises EngineCrashed once the host is gone
                if event is None:
                    continue
                slowest, last_event = max(slowest, now - last_event), now
                yield event
                if isinstance(event, p.Finished):
                    return
        except EngineCrashed as exc:
            if rid in self._cancel_at:
                yield p.Finished(rid, Finish(
                    "cancelled", "Stopped by restarting the engine; reload the model."))
                return
            raise exc
        finally:
            channel.close(rid)
            self._cancel_at.pop(rid, None)

    def _answer(self, rid: int, message: Any, kind: type,
                on_event: Callable[[Any], None] | None = None) -> Any:
        """Send a request answered by one event of `kind` carrying its id (`on_event` hears
        the others, its progress)."""
        channel = self._control()
        stream = channel.open(rid)
        try:
            self._send(message)
            while True:
                event = self._next(channel, stream)
                if isinstance(event, kind):
                    return event
                if on_event is not None:
                    on_event(event)
        finally:
            channel.close(rid)

    def inspect(self, request: GenerationRequest) -> p.PromptView:
        """The prompt the model would see for this request, after context fitting, token by
        token; nothing is generated. Raises EngineError when there is none (no model loaded, a
        template error, a message longer than the context)."""
        view = self._answer(request.request_id, p.Inspect(request), p.PromptView)
        if view.error:
            raise EngineError(view.error)
        return view

    def embed(self, texts: Sequence[str] | Sequence[Sequence[int]],
              truncate: bool = True) -> p.Embedded:
        """Unit vectors for texts (or token lists) from the loaded model in embedding mode (see
        engine/host/embedding.py), sent in parts of EMBED_PART; any thread. Raises
        EmbedRefused for input at fault (a text too long with `truncate` off, an empty one),
        EngineError when there are none for another reason (no model)."""
        import base64

        import numpy as np

        parts: list[p.Embedded] = []
        for start in range(0, len(texts), EMBED_PART):
            rid = next(_embed_ids)
            given = texts[start:start + EMBED_PART]
            request = p.Embed(rid, tuple(t for t in given if isinstance(t, str)), truncate,
                              tuple(tuple(t) for t in given if not isinstance(t, str)))
            part = self._answer(rid, request, p.Embedded)
            if part.error:
                raise (EmbedRefused if part.refused else EngineError)(part.error)
            parts.append(dataclasses.replace(part, truncated=tuple(
                i + start for i in part.truncated)))
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return p.Embedded(0)
        rows = np.concatenate([part.vectors() for part in parts])
        return dataclasses.replace(
            parts[0], data=base64.b64encode(rows.tobytes()).decode("ascii"),
            tokens=tuple(n for part in parts for n in part.tokens),
            truncated=tuple(i for part in parts for i in part.truncated))

    def count_images(self, sizes: Sequence[tuple[int, int]]) -> p.ImagesCounted:
        """Positions images of these sizes (width, height as core/images reads them) take with
        the loaded projector, and which projector that is; any thread, answered between two
        steps of the replies. Raises EngineError when they cannot be counted (no model, no
        projector, a size no image is read at)."""
        rid = next(_embed_ids)
        answer = self._answer(rid, p.CountImages(rid, tuple((int(w), int(h)) for w, h in sizes)),
                              p.ImagesCounted)
        if answer.error:
            raise EngineError(answer.error)
        return answer

    def drop_state(self, conversation: str, principal: str = WINDOW) -> None:
        """Have the engine forget the KV-cache state it keeps for a conversation (deleted).
        Nothing comes back; a dead engine has nothing to forget."""
        if self.alive:
            with contextlib.suppress(EngineCrashed):
                self._send(p.DropState(conversation, principal))

    def forget_states(self) -> None:
        """Have the engine forget every KV-cache state it keeps, in memory and on disk, of
        every model. Without a running engine the files are removed here."""
        if self.alive:
            with contextlib.suppress(EngineCrashed):
                self._send(p.DropState("", everything=True))
                return
        forget_kept_states()

    def state_report(self) -> p.StateReport:
        """The KV-cache states the engine keeps for conversations, and its budgets."""
        with self._control_lock:
            channel = self._control()
            self._send(p.StateUsage())
            while True:
                event = self._next(channel, channel.control)
                if isinstance(event, p.StateReport):
                    return event

    def memory_report(self) -> p.MemoryReport:
        """What the engine process holds (protocol.MemoryReport); answered at once, beside
        replies being written."""
        with self._control_lock:
            channel = self._control()
            self._send(p.MemoryUsage())
            while True:
                event = self._next(channel, channel.control)
                if isinstance(event, p.MemoryReport):
                    return event

    def tune(self, request_id: int, seconds_per_trial: float = 0.5, apply: bool = True,
             on_progress: Callable[[int, int], None] | None = None) -> p.TuneResult:
        """Measure threads and batch sizes with the loaded model (see protocol.Tune); a few
        seconds, longer on a busy machine: `on_progress(done, total)` after each trial. With
        `apply`, the fastest thread counts are used from now on and `model` says so.
        cancel(request_id) stops it (cancelled=True)."""

        def heard(event: Any) -> None:
            if isinstance(event, p.TuneProgress) and on_progress is not None:
                on_progress(event.done, event.total)
        try:
            event = self._answer(request_id, p.Tune(request_id, seconds_per_trial, apply),
                                 p.TuneResult, heard)
        finally:
            self._cancel_at.pop(request_id, None)
        if event.applied and self.model is not None:
            self.model = dataclasses.replace(self.model, n_threads=event.n_threads,
                                             n_threads_batch=event.n_threads_batch)
        return event

    def quantize(self, request: p.Quantize,
                 on_progress: Callable[[p.QuantizeProgress], None] | None = None
                 ) -> p.Quantized:
        """Run llama.cpp's quantizer in this client's host (engine/quantize.py gives it a host
        of its own and checks the result). It cannot be interrupted: kill() the host."""
        with self._control_lock:
            self.start()
            channel = self._control()
            self._send(request)
            while True:
                event = self._next(channel, channel.control)
                if isinstance(event, p.QuantizeProgress) and on_progress is not None:
                    on_progress(event)
                elif isinstance(event, p.Quantized):
                    return event

    def _cancel_overdue(self, rid: int, grace: float) -> bool:
        at = self._cancel_at.get(rid)
        return at is not None and time.monotonic() - at > grace

    def cancel(self, request_id: int) -> None:
        """Stop a request. Safe from any thread; returns at once."""
        self._cancel_at.setdefault(request_id, time.monotonic())
        with contextlib.suppress(EngineCrashed):  # a dead engine has nothing left to stop
            self._send(p.Cancel(request_id))


def _last_line(path: Path, limit: int = 4096) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            lines = f.read().decode("utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip()[:300] if lines else ""
