"""`inglenook chat`: answer one prompt on the command line.

The prompt is an argument, `-` for standard input, or `--file PATH` (for prompts larger than one
argument may be). Every load option and sampling setting has a flag (cli/options.py); a model
the bundled engine cannot load is refused before loading, with the words the Library uses.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from inglenook import paths
from inglenook.cli.common import UsageError, engine_session, fail
from inglenook.cli.options import (
    add_load_arguments,
    add_sampling_arguments,
    read_load_params,
    read_sampling,
)
from inglenook.core.builtin_templates import describe
from inglenook.core.load import LoadParams
from inglenook.core.messages import GenerationRequest, ImageRef, Message

if TYPE_CHECKING:
    from inglenook.engine.remote import RemoteClient

MAX_PROMPT_BYTES = 64 * 2**20  # what one engine frame carries, less room for the rest
REMOTE_KEY_ENV = "INGLENOOK_REMOTE_API_KEY"


def add_prompt_arguments(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """The message and where it comes from (shared with `inglenook prompt`)."""
    parser.add_argument("prompt", nargs="?",
                        help="what to ask; - reads it from standard input")
    parser.add_argument("--file", metavar="PATH", help="read what to ask from a file")
    parser.set_defaults(prompt_required=required)


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Which model and how it is loaded (shared with `prompt`; `serve` has the same flags)."""
    parser.add_argument("--model", help="a .gguf file (default: the bundled model)")
    add_load_arguments(parser)


def add_parser(commands: argparse._SubParsersAction) -> None:
    chat = commands.add_parser("chat", help="answer one prompt on the command line")
    add_prompt_arguments(chat)
    add_model_arguments(chat)
    add_sampling_arguments(chat)
    chat.add_argument("--system", default="", help="system prompt")
    chat.add_argument("--stats", action="store_true", help="print speed figures to stderr")
    chat.add_argument("--image", metavar="FILE", action="append", default=[],
                      help="show the model an image (PNG, JPEG, GIF, WebP, BMP) with the prompt; "
                      "repeat for several. A local model needs its vision projector (--mmproj, "
                      "or an mmproj-*.gguf beside it); with --endpoint the image is sent to the "
                      "server as a data: URL")
    chat.add_argument("--endpoint", metavar="URL",
                      help="use a model on an OpenAI-compatible server (vLLM, llama-server, "
                      "Ollama, LM Studio, inglenook serve) instead of a local file: its base URL, "
                      "e.g. http://gpu-box:8000/v1, or the name of an endpoint added in the "
                      "window; --model then names one of its models (default: the first listed)")
    chat.add_argument("--api-key", metavar="KEY",
                      help=f"the endpoint's API key (or set {REMOTE_KEY_ENV}, which keeps it out "
                      "of process listings)")


def read_images(args: argparse.Namespace) -> tuple[ImageRef, ...]:
    """The --image files, each read and decoded once here so a refusal (not an image, too
    large, a FIFO) is one clear line before any model loads."""
    from inglenook.core.images import ImageRefused, read_image  # Pillow only when asked

    refs = []
    for name in args.image:
        path = Path(name)
        try:
            image = read_image(path)
        except ImageRefused as exc:
            raise UsageError(f"--image: {exc}") from None
        refs.append(ImageRef(image.sha256, str(path.resolve())))
    return tuple(refs)


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


def model_path(args: argparse.Namespace) -> str:
    """--model, else the bundled model."""
    model = args.model or paths.bundled_model_path()
    if model is None:
        raise UsageError("no model given and the bundled model is not installed (make setup).")
    return str(model)


def load_params(args: argparse.Namespace) -> LoadParams:
    return read_load_params(args, model_path(args))


def wont_load(path: str) -> str | None:
    """Why the bundled engine cannot load this file, as the Library says it; None when it
    may (the engine then says what else is wrong, a file that is no GGUF say)."""
    from inglenook.models import compat

    verdict = compat.check_file(path)
    return verdict.sentence if verdict is not None and verdict.wont_load else None


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
    from inglenook.engine.client import EngineClient

    try:
        sampling = read_sampling(args)
        load = LoadParams(args.model or "") if args.endpoint else load_params(args)
        prompt = read_prompt(args)
        images = read_images(args)
        remote = remote_client(args) if args.endpoint else None
    except UsageError as exc:
        fail(str(exc))
        return 2
    assert prompt is not None
    if remote is None and (problem := wont_load(load.model_path)):
        return fail(problem)
    client: EngineClient | RemoteClient = remote or EngineClient()
    messages = ((Message("system", args.system),) if args.system else ()) + (
        Message("user", prompt, images=images),)
    with engine_session(client) as end:
        info = client.load(load)
        if info.template_source == "detected":  # said beside the answer, as the window does
            notice = describe(info.template_source, info.template_name, info.template_reason)
            print(f"inglenook: {notice}", file=sys.stderr)
        # A remote server that says its model reads no images is believed; one that says
        # nothing is sent them (the user asked with --image) and answers for itself.
        if remote is not None and images and remote.vision_said is False:
            return fail(f"{remote.endpoint.who} says {info.name} reads no images: choose a "
                        "vision model with --model.")
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
    return end.code
