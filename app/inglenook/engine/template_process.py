"""Chat templates rendered in a process of their own, which the engine host can always stop.

A chat template is a program written by whoever made the GGUF file. core/template.py runs it in
Jinja's sandbox under budgets of time and size, but those are checked between Python steps: one
builtin can loop or allocate in C where no check runs (two self-doubling lists compared with each
other, `map` of a padding filter over a range, the text of a shared nested list). Here such a
template costs a child process, killed when it passes a hard limit of CPU time (or a far longer
one of wall-clock time) and capped in address space (RLIMIT_AS) so that C code cannot allocate
past it, never the engine: the load or the reply fails with a message, and the next render
starts a fresh child. CPU time, because on a machine busy with llama.cpp's spinning threads a
normal render can wait for a core for seconds, and must not be stopped for that.

The child lives as long as the loaded model: it compiles the template once and renders every
prompt (render_prompt's two or three renders in one round trip), so a prompt costs one pipe
round trip (bench/template_bench.py measures it), not a process start. It is started from
`inglenook.engine.host` only; it imports neither llama_cpp nor Qt.

Run as `python -m inglenook.engine.template_process` (a frozen bundle: `inglenook
--chat-template`). Frames both ways: a 4-byte big-endian length and a UTF-8 JSON object.
"""

from __future__ import annotations

import contextlib
import json
import queue
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import IO, Any

import psutil

from inglenook.core.builtin_templates import Choice
from inglenook.core.messages import Message, ToolCallTurn
from inglenook.core.template import (
    TIME_BUDGET_S,
    ChatTemplate,
    ControlStrings,
    RenderedPrompt,
    Segment,
    TemplateContext,
    TemplateError,
    render_prompt,
    time_limit,
)

FLAG = "--chat-template"  # how a frozen bundle runs the renderer (inglenook/__main__.py)
# Address space of the child: ~25 MB is Python and Jinja; a prompt is at most 4x its
# conversation's text, so a long chat renders in a few tens of MB.
MEMORY_LIMIT_BYTES = 1 << 30
# The sandbox stops a request after TIME_BUDGET_S of CPU time; the child is killed when it has
# used this much more, or when a request has taken WALL_LIMIT_S however little it computed.
KILL_GRACE_S = 1.0
WALL_LIMIT_S = 60.0
_POLL_S = 0.1
# CPU seconds granted per request, after which the kernel ends the child itself (SIGXCPU): a
# child left looping in C by an engine that died must not spin for ever.
CPU_PER_REQUEST_S = 30
START_CPU_S = 20.0  # starting Python and Jinja: ~0.1 s of CPU
MAX_ANSWER_BYTES = MEMORY_LIMIT_BYTES  # the child cannot have built more
_HEADER = struct.Struct(">I")
_DIED = ("The chat template's renderer stopped before it answered: the template needed more "
         "memory than a chat template may use.")


_NO_CONTROL = ControlStrings()


class _Gone:
    """Put on the inbox when the child's output ends."""


def command() -> list[str]:
    """This Python running this module; in a frozen bundle sys.executable is the app itself,
    which runs the renderer when given FLAG."""
    if getattr(sys, "frozen", False):
        return [sys.executable, FLAG]
    return [sys.executable, "-m", "inglenook.engine.template_process"]


class TemplateRenderer:
    """A chat template compiled and rendered in a child process (see the module docstring).

    Duck-types ChatTemplate's `source` and `render` (RendersText), and renders whole prompts
    with `render_prompt`. Raises TemplateError for what the template does wrong, including
    running past `time_limit_s` (the child is then killed) or dying of its memory limit. Used
    from one thread at a time (the engine's)."""

    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "",
                 time_limit_s: float = TIME_BUDGET_S,
                 argv: Sequence[str] | None = None) -> None:
        self.source, self.bos_token, self.eos_token = source, bos_token, eos_token
        self._time_limit_s = time_limit_s
        self._argv = list(argv or command())
        self._proc: subprocess.Popen[bytes] | None = None
        self._usage: psutil.Process | None = None  # the child's CPU time
        self._inbox: queue.Queue[Any] = queue.Queue()
        self._control: ControlStrings | None = None  # what the child holds now
        try:
            self._start()
        except TemplateError:
            self._stop()  # nothing can close what was never returned
            raise

    @classmethod
    def for_model(cls, choice: Choice, bos_token: str, eos_token: str) -> TemplateRenderer:
        """As core/template.for_model: the chosen template, in its child process."""
        return cls(choice.source, bos_token=bos_token, eos_token=eos_token)

    # ---- rendering ---------------------------------------------------------------------
    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True,
               context: TemplateContext | None = None) -> str:
        answer = self._ask({"op": "render", "messages": [_encode(m) for m in messages],
                            "add_generation_prompt": add_generation_prompt,
                            "context": asdict(context or TemplateContext())})
        return str(answer["text"])

    def render_prompt(self, messages: Sequence[Message], *, add_generation_prompt: bool = True,
                      control: ControlStrings | None = None,
                      context: TemplateContext | None = None) -> RenderedPrompt:
        """core/template.render_prompt, done in the child."""
        answer = self._ask({"op": "prompt", "messages": [_encode(m) for m in messages],
                            "add_generation_prompt": add_generation_prompt,
                            "context": asdict(context or TemplateContext()),
                            "control": control or _NO_CONTROL})
        segments = tuple(Segment(str(text), bool(from_message))
                         for text, from_message in answer["segments"])
        return RenderedPrompt(segments, defused=bool(answer["defused"]))

    # ---- the child ---------------------------------------------------------------------
    def _start(self) -> None:
        """A fresh child with the template compiled (and no control strings yet)."""
        try:
            self._proc = subprocess.Popen(
                self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
        except OSError as exc:
            raise TemplateError(f"The chat template's renderer could not be started: "
                                f"{exc.strerror or exc}.") from exc
        self._inbox = queue.Queue()
        self._control = None
        try:
            self._usage = psutil.Process(self._proc.pid)
        except psutil.Error:  # gone already: its reader says so
            self._usage = None
        assert self._proc.stdout is not None
        threading.Thread(target=_read_answers, args=(self._proc.stdout, self._inbox),
                         daemon=True, name="template-answers").start()
        self._wait(START_CPU_S)  # Python's start-up is not the template's time
        self._send({"op": "compile", "source": self.source, "bos_token": self.bos_token,
                    "eos_token": self.eos_token, "time_limit_s": self._time_limit_s})

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._proc is None or self._proc.poll() is not None:
            self._stop()
            self._start()  # after a kill: compile again
        if request["op"] == "prompt" and request["control"] is not self._control:
            every, plain = request["control"].texts
            self._send({"op": "control", "every": every, "in_plain_text": plain})
            self._control = request["control"]
        return self._send({k: v for k, v in request.items() if k != "control"})

    def _send(self, request: dict[str, Any]) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        body = json.dumps(request).encode("ascii")  # ASCII JSON: lone surrogates cross as well
        try:
            proc.stdin.write(_HEADER.pack(len(body)) + body)
            proc.stdin.flush()
        except OSError:  # the child is gone: the pipe broke under our write
            pass  # its reader thread says so
        answer = self._wait(self._time_limit_s + KILL_GRACE_S)
        if "error" in answer:
            raise TemplateError(str(answer["error"]), bool(answer.get("raised_by_template")))
        return answer

    def _wait(self, cpu_limit_s: float) -> dict[str, Any]:
        """The child's next answer; it is killed when it has computed for `cpu_limit_s` (or
        waited WALL_LIMIT_S) without one."""
        answer = None
        used_before = self._cpu_seconds()
        wall_deadline = time.monotonic() + WALL_LIMIT_S
        while answer is None:
            try:
                answer = self._inbox.get(timeout=_POLL_S)
            except queue.Empty:
                if (self._cpu_seconds() - used_before > cpu_limit_s
                        or time.monotonic() > wall_deadline):
                    self._stop()
                    raise TemplateError(f"The chat template took longer than "
                                        f"{self._time_limit_s:g} seconds and was stopped."
                                        ) from None
        if isinstance(answer, _Gone):
            self._stop()
            raise TemplateError(_DIED)
        return dict(answer)

    def _cpu_seconds(self) -> float:
        try:
            times = self._usage.cpu_times() if self._usage is not None else None
        except psutil.Error:  # ended: its reader reports it
            return 0.0
        return 0.0 if times is None else times.user + times.system

    def _stop(self) -> None:
        self._usage = None
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def close(self) -> None:
        self._stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None


def _read_answers(stream: IO[bytes], inbox: queue.Queue[Any]) -> None:
    try:
        while (header := _read(stream, _HEADER.size)) is not None:
            (length,) = _HEADER.unpack(header)
            body = _read(stream, length) if length <= MAX_ANSWER_BYTES else None
            if body is None:
                break
            inbox.put(json.loads(body))
    except (OSError, ValueError):
        pass
    inbox.put(_Gone())


def _read(stream: IO[bytes], n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


# ---- in the child -------------------------------------------------------------------------
def _limit_memory() -> None:
    try:
        import resource
    except ImportError:  # Windows: the parent's time limit still applies
        return
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        wanted = MEMORY_LIMIT_BYTES if hard == resource.RLIM_INFINITY else min(
            hard, MEMORY_LIMIT_BYTES)
        resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))
    except (ValueError, OSError):  # not allowed here (some sandboxes, macOS)
        pass


def _grant_cpu() -> None:
    """Allow CPU_PER_REQUEST_S more CPU seconds from now."""
    try:
        import resource
    except ImportError:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    wanted = int(usage.ru_utime + usage.ru_stime) + CPU_PER_REQUEST_S
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CPU, (
            wanted if hard == resource.RLIM_INFINITY else min(hard, wanted), hard))


def _encode(m: Message) -> list[Any]:
    """A message as a JSON list: asdict() and keyed objects cost more than the render."""
    return [m.role, m.content, m.reasoning, [[c.id, c.name, c.arguments] for c in m.tool_calls],
            m.tool_call_id, m.name]


def _message(data: list[Any]) -> Message:
    role, content, reasoning, calls, tool_call_id, name = data
    return Message(role, content, reasoning, tuple(ToolCallTurn(*c) for c in calls),
                   tool_call_id, name)


class _Child:
    def __init__(self) -> None:
        self.template: ChatTemplate | None = None
        self.control = ControlStrings()
        self.time_limit_s = TIME_BUDGET_S

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request["op"]
        if op == "compile":
            self.time_limit_s = float(request["time_limit_s"])
            with time_limit(self.time_limit_s):
                self.template = ChatTemplate(request["source"], bos_token=request["bos_token"],
                                             eos_token=request["eos_token"])
            return {}
        if op == "control":
            self.control = ControlStrings(request["every"], request["in_plain_text"])
            return {}
        if self.template is None:
            return {"error": "No chat template was compiled."}
        messages = [_message(m) for m in request["messages"]]
        context = request["context"]
        context = TemplateContext(tuple(context["tools"]), context["enable_thinking"],
                                  context["reasoning_effort"])
        with time_limit(self.time_limit_s):
            if op == "render":
                return {"text": self.template.render(
                    messages, add_generation_prompt=request["add_generation_prompt"],
                    context=context)}
            prompt = render_prompt(self.template, messages, control=self.control,
                                   context=context,
                                   add_generation_prompt=request["add_generation_prompt"])
        return {"segments": [(s.text, s.from_message) for s in prompt.segments],
                "defused": prompt.defused}


def _write(stream: IO[bytes], answer: dict[str, Any]) -> None:
    data = json.dumps(answer).encode("ascii")
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def main() -> int:
    _limit_memory()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    child = _Child()
    _write(stdout, {"ready": True})
    while (header := _read(stdin, _HEADER.size)) is not None:
        body = _read(stdin, _HEADER.unpack(header)[0])
        if body is None:
            break
        _grant_cpu()
        try:
            answer = child.answer(json.loads(body))
        except TemplateError as exc:
            answer = {"error": str(exc), "raised_by_template": exc.raised_by_template}
        except MemoryError:
            answer = {"error": "The chat template produced an unreasonably large prompt and "
                               "was stopped."}
        except Exception as exc:  # a request this side cannot read: say so, keep serving
            answer = {"error": f"The chat template's renderer failed: {exc!r}"}
        _write(stdout, answer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
