"""`inglenook serve`: the OpenAI-compatible API, without the window: one model loaded at start,
and any other of the library loaded when a request names it."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from inglenook.cli.chat import model_path, wont_load
from inglenook.cli.common import UsageError, engine_session, fail
from inglenook.cli.options import add_load_arguments, read_load_params
from inglenook.core.escape import printable
from inglenook.core.load import LoadParams
from inglenook.models.projector import with_projector
from inglenook.server.config import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    OLLAMA_PORT,
    TOKEN_ENV,
    ConfigError,
    ServerConfig,
    token_from_env,
)

SHARED_CACHE = ("Note: clients without a token share one prompt cache: one can tell, by how "
                "fast a prompt is read, what another sent. Give each tool its own token "
                "(--token 'A B'), or keep clients apart with --isolate-clients.")

if TYPE_CHECKING:
    from inglenook.engine.router import EngineRouter


def add_parser(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser(
        "serve", help="serve a model over an OpenAI-compatible API (loopback only by default)")
    serve.add_argument("--model", help="a .gguf file (default: the bundled model)")
    serve.add_argument("--host", default=DEFAULT_HOST,
                       help=f"address to listen on (default {DEFAULT_HOST}; any other address "
                       "needs --token)")
    serve.add_argument("--port", type=int, default=None,
                       help=f"port (default {DEFAULT_PORT}, with --ollama {OLLAMA_PORT}; 0 "
                       "picks a free one)")
    serve.add_argument("--ollama", action="store_true",
                       help="also answer Ollama's API (/api/chat, /api/tags…), on Ollama's "
                       f"port {OLLAMA_PORT} unless --port says otherwise")
    serve.add_argument("--token", default=None,
                       help=f"require 'Authorization: Bearer TOKEN' (or set {TOKEN_ENV}); "
                       "several, separated by spaces: one per tool, each with a KV cache of "
                       "its own")
    serve.add_argument("--cors-origin", action="append", default=[], metavar="URL",
                       help="a web page origin allowed to call the API, e.g. "
                       "http://localhost:3000 (repeat for more)")
    serve.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                       help="another name clients reach this machine by (the Host header), "
                       "besides its addresses and localhost (repeat for more)")
    serve.add_argument("--fetch-images", action="store_true",
                       help="fetch an image a request names by http(s) URL (public addresses "
                       "only, up to 32 MiB); without it only data: URLs are read and nothing "
                       "is fetched")
    serve.add_argument("--allow-pull", action="store_true",
                       help="with --ollama: let clients download models from the Hugging Face "
                       "Hub (Ollama's /api/pull, as hf.co/owner/repo:QUANT) into the models "
                       "folder; without it a pull is refused")
    serve.add_argument("--isolate-clients", action="store_true",
                       help="keep each client's KV cache to itself on a server without a token "
                       "(by its address and `user`, else its connection): clients then cannot "
                       "learn what another sent by timing the prompt cache, at the cost of "
                       "reuse between them (for a machine shared with others)")
    add_load_arguments(serve)  # a model a request names loads with the same options


def run(args: argparse.Namespace) -> int:
    from inglenook.engine.router import EngineRouter

    port = args.port if args.port is not None else OLLAMA_PORT if args.ollama else DEFAULT_PORT
    config = ServerConfig(host=args.host, port=port, token=token_from_env(args.token),
                          ollama=args.ollama,
                          cors_origins=tuple(args.cors_origin),
                          extra_hosts=tuple(args.allow_host), fetch_images=args.fetch_images,
                          isolate_clients=args.isolate_clients, allow_pull=args.allow_pull)
    if args.allow_pull and not args.ollama:
        fail("--allow-pull is for Ollama's /api/pull: add --ollama.")
        return 2
    try:
        config.check()  # refused before a model is loaded for nothing
        load = read_load_params(args, model_path(args))
    except ConfigError as exc:
        return fail(str(exc))
    except UsageError as exc:
        fail(str(exc))
        return 2
    if problem := wont_load(load.model_path):
        return fail(problem)
    handler = logging.StreamHandler()
    handler.setFormatter(OneLine("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    logging.getLogger("uvicorn").setLevel(logging.WARNING)
    client = EngineRouter(api_params=api_params(load))
    with engine_session(client) as end:
        return _serve(client, load, config)
    return end.code


class OneLine(logging.Formatter):
    """Every log message on one line, nothing in it a terminal acts on, whoever wrote it
    (what the server logs escapes what clients sent already; this is the net under it). A
    traceback stays as it is: it follows the message, written by the app."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        if not record.message.isprintable():
            record.message = printable(record.message)
        return super().formatMessage(record)


def api_params(load: LoadParams) -> Callable[[str], LoadParams]:
    """How a model a request names is loaded: with the served model's options, but its own
    vision projector (the one beside it, as `--model` finds one; none for a text model), never
    the served model's."""
    def params(path: str) -> LoadParams:
        if path == load.model_path:
            return load
        return with_projector(load.replace(model_path=path, mmproj_path=""))
    return params


def _serve(client: EngineRouter, load: LoadParams, config: ServerConfig) -> int:
    """Load, listen and answer until Ctrl+C or SIGTERM."""
    from inglenook.engine.client import EngineError
    from inglenook.engine.scheduler import Job, Scheduler
    from inglenook.server import ApiServer
    from inglenook.server.image_cache import request_image_cache

    print(f"Loading {load.model_path} …", file=sys.stderr, flush=True)
    with contextlib.suppress(OSError):  # the last run's request images that are past their age
        request_image_cache().prune()
    info = client.load(load)
    scheduler = Scheduler(client.cancel, lanes=client.lanes)

    def reload() -> None:
        try:
            client.load(load)
            logging.info("the model is loaded again")
        except EngineError as exc:
            logging.error("the model could not be loaded again: %s", exc)

    def engine_lost(message: str) -> None:
        logging.error("%s", message)
        with contextlib.suppress(RuntimeError):  # the scheduler closed: we are stopping
            scheduler.submit(Job(reload, owner="engine", exclusive=True))

    done = threading.Event()
    server = ApiServer(scheduler, client, config, on_engine_lost=engine_lost,
                       on_status=lambda s: None if s.running else done.set())
    try:
        url = server.start()
    except OSError as exc:
        scheduler.close()
        return fail(f"cannot listen on {config.url}: {exc}")
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    replies = f", {info.n_slots} replies at once" if info.n_slots > 1 else ""
    print(f"Serving {info.name} at {url}/v1 (n_ctx {info.n_ctx}{replies}); Ctrl+C stops.",
          flush=True)
    if config.token:
        print("Clients must send 'Authorization: Bearer <token>'.", flush=True)
    elif config.isolate_clients:
        print("Each client's prompt cache is its own (--isolate-clients).", flush=True)
    else:
        print(SHARED_CACHE, flush=True)
    if config.fetch_images:
        print("Images named by URL are fetched (public addresses only).", flush=True)
    if config.allow_pull:
        print("Clients may download models from the Hub (/api/pull).", flush=True)
    try:
        done.wait()
    finally:
        server.stop()
        scheduler.close()
    return 0
