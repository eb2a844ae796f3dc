"""Qt-free client of the engine host process (used by the CLI and the window's worker).

One thread drives the client (load, generate); `cancel()` may be called from any thread.
If the host dies, the client raises EngineCrashed with a readable reason and starts a fresh host
on the next load(); it never reloads on its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
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
from inglenook.core.load import LoadParams, ModelInfo
from inglenook.core.messages import GenerationRequest
from inglenook.core.replies import Finish
from inglenook.engine import protocol as p

START_TIMEOUT_S = 60.0
# A stop that the host has not honoured within max(this, 3 × the slowest step seen in the
# request) is forced by restarting the host. llama.cpp stops within a token or a batch; only a
# stuck host (or a step it cannot interrupt) gets here.
CANCEL_GRACE_S = 5.0


class EngineError(Exception):
    """A failure the user should read (bad model file, engine gone)."""


class EngineCrashed(EngineError):
    pass


class _Ended:
    """Put on the inbox when the host's output closes."""


def default_host_command() -> list[str]:
    """This Python running the host module; in a frozen bundle (PyInstaller) sys.executable is
    the app itself, which runs the host when given --engine-host (see inglenook/__main__.py)."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "--engine-host"]
    return [sys.executable, "-m", "inglenook.engine.host"]


class EngineClient:
    """`command` runs the host (default: this Python running inglenook.engine.host); tests give
    a fake host that speaks the same protocol (tests/helpers/fake_host.py)."""

    def __init__(self, log_path: Path | None = None,
                 command: Sequence[str] | None = None) -> None:
        self._log_path = log_path or paths.engine_log_file()
        self._command = list(command or default_host_command())
        self._proc: subprocess.Popen[bytes] | None = None
        self._inbox: queue.Queue[Any] = queue.Queue()
        self._write_lock = threading.Lock()
        self._cancel_at: dict[int, float] = {}
        self.ready: p.Ready | None = None
        self.model: ModelInfo | None = None
        # Called from a reader thread the moment a host process ends (crash or shutdown), so
        # a host that dies while idle is noticed at once, not at the next request.
        self.on_exit: Callable[[], None] | None = None

    # ---- process -------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> p.Ready:
        if self.alive and self.ready:
            return self.ready
        self._stop_process()
        env = dict(os.environ)
        source_root = str(Path(inglenook.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [source_root, env.get("PYTHONPATH")]))
        log: IO[bytes] = open(self._log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            self._proc = subprocess.Popen(
                self._command,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env)
        finally:
            log.close()
        self._inbox = queue.Queue()
        threading.Thread(target=self._read_events,
                         args=(self._proc, self._inbox, self._exited),
                         daemon=True, name="engine-events").start()
        event = self._next(START_TIMEOUT_S)
        if not isinstance(event, p.Ready):
            raise EngineCrashed(f"The engine did not start ({event!r}).")
        self.ready = event
        return event

    @staticmethod
    def _read_events(proc: subprocess.Popen[bytes], inbox: queue.Queue[Any],
                     on_exit: Callable[[], None] | None) -> None:
        assert proc.stdout is not None
        try:
            while (event := p.read_frame(proc.stdout)) is not None:
                inbox.put(event)
        except (p.ProtocolError, OSError, ValueError):
            pass
        inbox.put(_Ended())
        if on_exit is not None:
            on_exit()

    def _next(self, timeout: float | None = None) -> Any:
        try:
            event = self._inbox.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(event, _Ended):
            self._inbox.put(event)  # every later read sees the end too
            raise EngineCrashed(self._crash_reason())
        return event

    def _crash_reason(self) -> str:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait()
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
        return f"The engine stopped unexpectedly ({how}).{detail}"

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

    def check(self) -> None:
        """Raise EngineCrashed if the host died while a model was loaded (the reason is read
        from its exit status and log). Call from the thread that drives the client."""
        if self._proc is not None and self.model is not None and not self.alive:
            while self._next(1.0) is not None:  # events left before the end: skipped
                pass

    def _stop_process(self) -> None:
        proc, self._proc = self._proc, None
        self.model = None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                assert proc.stdin is not None
                with self._write_lock:
                    p.write_frame(proc.stdin, p.Shutdown())
                proc.wait(timeout=3)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream:
                stream.close()

    def close(self) -> None:
        self._stop_process()

    def kill(self) -> None:
        """Kill the host abruptly (tests and the stop watchdog)."""
        if self._proc and self._proc.poll() is None:
            self._proc.kill()

    # ---- requests ------------------------------------------------------------------------
    def load(self, params: LoadParams,
             on_progress: Callable[[float], None] | None = None) -> ModelInfo:
        self.start()
        self._send(p.Load(params))
        while True:
            event = self._next()
            if isinstance(event, p.LoadProgress):
                if on_progress:
                    on_progress(event.fraction)
            elif isinstance(event, p.Loaded):
                self.model = event.info
                return event.info
            elif isinstance(event, p.LoadFailed):
                self.model = None
                raise EngineError(event.message)

    def unload(self) -> None:
        if self.alive and self.model is not None:
            self._send(p.Unload())
            while not isinstance(self._next(), p.Unloaded):
                pass
        self.model = None

    def generate(self, request: GenerationRequest) -> Iterator[Any]:
        """Yield the host's events for this request, ending with exactly one Finished."""
        rid = request.request_id
        self._send(p.Generate(request))
        last_event, slowest = time.monotonic(), 0.0
        try:
            while True:
                event = self._next(timeout=0.1)
                now = time.monotonic()
                # A host that goes on (or goes silent) after a stop is killed: checked whether
                # or not events still arrive.
                if self._cancel_overdue(rid, max(CANCEL_GRACE_S, 3 * slowest)):
                    self.kill()  # the host will be restarted on the next load
                    while True:
                        self._next()  # raises EngineCrashed once the host is gone
                if event is None:
                    continue
                slowest, last_event = max(slowest, now - last_event), now
                if getattr(event, "request_id", rid) != rid:
                    continue  # a late event of an earlier request
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
            self._cancel_at.pop(rid, None)

    def inspect(self, request: GenerationRequest) -> p.PromptView:
        """The prompt the model would see for this request, after context fitting, token by
        token; nothing is generated. Raises EngineError when there is none (no model loaded, a
        template error, a message longer than the context)."""
        self._send(p.Inspect(request))
        while True:
            event = self._next()
            if isinstance(event, p.PromptView) and event.request_id == request.request_id:
                if event.error:
                    raise EngineError(event.error)
                return event

    def drop_state(self, conversation: str) -> None:
        """Have the engine forget the KV-cache state it keeps for a conversation (deleted).
        Nothing comes back; a dead engine has nothing to forget."""
        if self.alive:
            with contextlib.suppress(EngineCrashed):
                self._send(p.DropState(conversation))

    def state_report(self) -> p.StateReport:
        """The KV-cache states the engine keeps for conversations, and its budgets."""
        self._send(p.StateUsage())
        while True:
            event = self._next()
            if isinstance(event, p.StateReport):
                return event

    def tune(self, request_id: int, seconds_per_trial: float = 0.5,
             apply: bool = True) -> p.TuneResult:
        """Measure threads and batch sizes with the loaded model (see protocol.Tune); a few
        seconds. With `apply`, the fastest thread counts are used from now on and `model`
        says so. cancel(request_id) stops it (cancelled=True)."""
        self._send(p.Tune(request_id, seconds_per_trial, apply))
        while True:
            event = self._next()
            if isinstance(event, p.TuneResult) and event.request_id == request_id:
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
        self.start()
        self._send(request)
        while True:
            event = self._next()
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
