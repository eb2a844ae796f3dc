"""`inglenook chat`: answer one prompt on the command line.

The prompt is an argument, `-` for standard input, or `--file PATH` (for prompts larger than one
argument may be). Numbers are checked here, with one line saying what is wrong, rather than
reaching the engine as NaN or out of range.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from inglenook import paths
from inglenook.cli.common import fail
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, Message
from inglenook.core.sampling import SPECS, SamplingParams

if TYPE_CHECKING:
    from inglenook.engine.remote import RemoteClient

MAX_PROMPT_BYTES = 64 * 2**20  # what one engine frame carries, less room for the rest
REMOTE_KEY_ENV = "INGLENOOK_REMOTE_API_KEY"


class UsageError(Exception):
    """A bad option or input; str() is one line for the user."""


def add_prompt_arguments(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """The message and where it comes from (shared with `inglenook prompt`)."""
    parser.add_argument("prompt", nargs="?",
                        help="what to ask; - reads it from standard input")
    parser.add_argument("--file", metavar="PATH", help="read what to ask from a file")
    parser.set_defaults(prompt_required=required)


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """How the model is loaded (shared with `inglenook prompt`). Numbers are read as text and
    checked by `load_params`, so a bad one gets one line, not a usage screen."""
    parser.add_argument("--model", help="a .gguf file (default: the bundled model)")
    parser.add_argument("--ctx", default="0",
                        help="context length (default: the model's, at most 8192)")
    parser.add_argument("--allow-beyond-trained", action="store_true",
                        help="allow a context longer than the model was trained on")


def add_parser(commands: argparse._SubParsersAction) -> None:
    chat = commands.add_parser("chat", help="answer one prompt on the command line")
    add_prompt_arguments(chat)
    add_model_arguments(chat)
    chat.add_argument("--temperature", default=str(SamplingParams.temperature),
                      help="randomness, 0 to 2 (0: always the most likely token)")
    chat.add_argument("--seed", default="-1", help="fixed seed (default: random)")
    chat.add_argument("--max-tokens", default="-1",
                      help="longest reply in tokens (default: no limit)")
    chat.add_argument("--threads", default="0",
                      help="CPU threads (default: all physical cores)")
    chat.add_argument("--system", default="", help="system prompt")
    chat.add_argument("--stats", action="store_true", help="print speed figures to stderr")
    chat.add_argument("--endpoint", metavar="URL",
                      help="use a model on an OpenAI-compatible server (vLLM, llama-server, "
                      "Ollama, LM Studio, inglenook serve) instead of a local file: its base URL, "
                      "e.g. http://gpu-box:8000/v1, or the name of an endpoint added in the "
                      "window; --model then names one of its models (default: the first listed)")
    chat.add_argument("--api-key", metavar="KEY",
                      help=f"the endpoint's API key (or set {REMOTE_KEY_ENV}, which keeps it out "
                      "of process listings)")


def number(option: str, raw: str, kind: type[int] | type[float], minimum: float,
           maximum: float | None = None) -> int | float:
    """`raw` as a finite number of `kind` within [minimum, maximum], or UsageError."""
    bounds = f"from {minimum:g} to {maximum:g}" if maximum is not None else f"≥ {minimum:g}"
    what = "a whole number" if kind is int else "a number"
    try:
        value = kind(raw)
    except ValueError:
        raise UsageError(f"{option} must be {what} {bounds}, not {raw!r}.") from None
    if not math.isfinite(value) or value < minimum or (maximum is not None and value > maximum):
        raise UsageError(f"{option} must be {what} {bounds}, not {raw!r}.")
    return value


def spec_number(option: str, raw: str, name: str, kind: type[int] | type[float]) -> int | float:
    spec = SPECS[name]
    return number(option, raw, kind, spec.minimum, spec.maximum)


def read_prompt(args: argparse.Namespace) -> str | None:
    """The message: the argument, standard input (`-`) or --file; None when none was given
    and none is required."""
    if args.prompt is not None and args.file is not None:
        raise UsageError("give the message as an argument or with --file, not both.")
    if args.file is not None:
        try:
            with open(Path(args.file), "rb") as f:
                data = f.read(MAX_PROMPT_BYTES + 1)
        except OSError as exc:
            raise UsageError(f"cannot read {args.file}: {exc.strerror or exc}.") from None
        return _text(data, args.file)
    if args.prompt == "-":
        return _text(sys.stdin.buffer.read(MAX_PROMPT_BYTES + 1), "standard input")
    if args.prompt is None and args.prompt_required:
        raise UsageError("no message: give it as an argument, - for standard input, "
                         "or --file PATH.")
    return args.prompt


def _text(data: bytes, where: str) -> str:
    if len(data) > MAX_PROMPT_BYTES:
        raise UsageError(f"{where} holds more than {MAX_PROMPT_BYTES // 2**20} MB.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where} is not UTF-8 text (byte {exc.start}).") from None


def load_params(args: argparse.Namespace, threads: int = 0) -> LoadParams:
    model = args.model or paths.bundled_model_path()
    if model is None:
        raise UsageError("no model given and the bundled model is not installed (make setup).")
    n_ctx = number("--ctx", args.ctx, int, 0)
    return LoadParams(str(model), n_ctx=int(n_ctx), n_threads=threads,
                      allow_beyond_trained=args.allow_beyond_trained)


def remote_client(args: argparse.Namespace) -> RemoteClient:
    """The RemoteClient for --endpoint: a saved endpoint (by name, with its stored key) or a URL."""
    from inglenook.engine.providers import ProviderStore
    from inglenook.engine.remote import RemoteClient
    from inglenook.engine.remote_api import Endpoint, normalize_base_url
    from inglenook.engine.remote_keys import KeyStoreError

    key = args.api_key if args.api_key is not None else os.environ.get(REMOTE_KEY_ENV, "")
    store = ProviderStore()
    saved = store.find(args.endpoint) if "://" not in args.endpoint else None
    if saved is not None:
        try:
            endpoint = store.endpoint(saved)
        except KeyStoreError as exc:
            raise UsageError(str(exc)) from None
        return RemoteClient(replace(endpoint, api_key=key or endpoint.api_key))
    try:
        url = normalize_base_url(args.endpoint)
    except ValueError as exc:
        raise UsageError(f"--endpoint: {exc}") from None
    return RemoteClient(Endpoint(url, key))


def run(args: argparse.Namespace) -> int:
    from inglenook.engine import protocol as p
    from inglenook.engine.client import EngineClient, EngineError

    try:
        if args.endpoint:
            client: EngineClient | RemoteClient = remote_client(args)
            load = LoadParams(args.model or "")
        else:
            client = EngineClient()
            load = load_params(args, int(number("--threads", args.threads, int, 0)))
        sampling = SamplingParams(
            temperature=float(spec_number("--temperature", args.temperature, "temperature",
                                          float)),
            seed=int(spec_number("--seed", args.seed, "seed", int)),
            max_tokens=int(spec_number("--max-tokens", args.max_tokens, "max_tokens", int)))
        prompt = read_prompt(args)
    except UsageError as exc:
        fail(str(exc))
        return 2
    assert prompt is not None
    messages = ((Message("system", args.system),) if args.system else ()) + (
        Message("user", prompt),)
    try:
        client.load(load)
        finish = None
        for event in client.generate(GenerationRequest(1, messages, sampling)):
            if isinstance(event, p.Delta):
                sys.stdout.write(event.text)
                sys.stdout.flush()
            elif isinstance(event, p.ReplyStats) and args.stats:
                s = event.stats
                print(f"\n[{s.generated_tokens} tokens, {s.decode_tok_s:.1f} tok/s, "
                      f"TTFT {s.ttft_s * 1000:.0f} ms]", file=sys.stderr)
            elif isinstance(event, p.Finished):
                finish = event.finish
        sys.stdout.write("\n")
        if finish is not None and finish.reason == "error":
            return fail(finish.message)
        return 0
    except EngineError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130
    finally:
        client.close()
