"""`inglenook connect [APP]`: what to paste into another app so that it uses `inglenook serve`
(the same guides as the window's Connect an app…)."""

from __future__ import annotations

import argparse
from pathlib import Path

from inglenook import paths
from inglenook.cli.common import fail
from inglenook.server.config import DEFAULT_HOST, DEFAULT_PORT, token_from_env
from inglenook.server.connect import guides


def add_parser(commands: argparse._SubParsersAction) -> None:
    connect = commands.add_parser(
        "connect", help="print the settings that connect an app (Claude Code, Codex, Aider, "
                        "Continue, Open WebUI, Zed…) to `inglenook serve`")
    connect.add_argument("app", nargs="?", default="",
                         help="only this app (a part of its name, e.g. codex); default: all")
    connect.add_argument("--url", default=f"http://{DEFAULT_HOST}:{DEFAULT_PORT}",
                         help="where the server listens (default: %(default)s)")
    connect.add_argument("--model", default="",
                         help="the model's name as /v1/models lists it (default: the bundled "
                              "model's)")
    connect.add_argument("--token", default=None,
                         help="the server's token (default: INGLENOOK_API_TOKEN, else none)")
    connect.add_argument("--ctx", type=int, default=8192, help="the model's context length")
    connect.add_argument("--ollama", nargs="?", const="http://127.0.0.1:11434", default="",
                         metavar="URL", help="also the apps that speak Ollama's API "
                         "(`inglenook serve --ollama`; default URL %(const)s)")


def run(args: argparse.Namespace) -> int:
    model = args.model or Path(str(paths.bundled_model_path() or "")).stem
    token = (token_from_env(args.token).split() or [""])[0]
    found = [g for g in guides(args.url.rstrip("/"), model, token, args.ctx,
                               ollama_url=args.ollama.rstrip("/"))
             if args.app.lower() in g.app.lower()]
    if not found:
        names = ", ".join(g.app for g in guides(args.url, model, token))
        fail(f"no app is called {args.app!r}; apps: {names}.")
        return 2
    for i, guide in enumerate(found):
        print(("\n" if i else "") + f"## {guide.app} — {guide.where}")
        for note in (guide.unserved, guide.works, guide.note):
            if note:
                print(f"# {note}")
        print(guide.text, end="")
    return 0
