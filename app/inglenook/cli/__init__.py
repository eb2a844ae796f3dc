"""Entry points. `inglenook` opens the window; `inglenook chat|models|…` is Qt-free.

Each command lives in its own module, which adds its parser (`add_parser`) and runs it (`run`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from inglenook import __version__
from inglenook.cli import chat, conversations, models, prompt, serve


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inglenook", description="Chat with language models on your own machine.")
    parser.add_argument("--version", action="version", version=f"inglenook {__version__}")
    commands = parser.add_subparsers(dest="command")
    for module in COMMANDS.values():
        module.add_parser(commands)
    return parser


COMMANDS = {"chat": chat, "models": models, "conversations": conversations,
            "prompt": prompt, "serve": serve}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in COMMANDS:
        return COMMANDS[args.command].run(args)
    from inglenook.ui.app import run_app

    return run_app()
