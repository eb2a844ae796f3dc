"""Entry points. `inglenook` opens the window; `inglenook chat|models|…` is Qt-free.

Each command lives in its own module, which adds its parser (`add_parser`) and runs it (`run`).
Two flags come before the commands: `--engine-host` runs the engine process (a frozen bundle
has no `python -m`, so the client starts the bundle's own executable with this flag;
`inglenook/__main__.py` dispatches it before even this module is imported) and `--self-test`
checks an installation (cli/self_test.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from inglenook import __version__
from inglenook.cli import (
    chat,
    connect,
    conversations,
    knowledge,
    models,
    prompt,
    say,
    serve,
    transcribe,
)

ENGINE_HOST_FLAG = "--engine-host"
SELF_TEST_FLAG = "--self-test"
CLOSED_PIPE_EXIT = 141  # 128 + SIGPIPE: what a shell reports for cat or grep ended that way


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inglenook", description="Chat with language models on your own machine.")
    parser.add_argument("--version", action="version", version=f"inglenook {__version__}")
    parser.add_argument(SELF_TEST_FLAG, action="store_true",
                        help="load the bundled model offscreen, write a few tokens, exit 0 if "
                             "all went well (checks an installation)")
    commands = parser.add_subparsers(dest="command")
    for module in COMMANDS.values():
        module.add_parser(commands)
    return parser


COMMANDS = {"chat": chat, "models": models, "conversations": conversations,
            "prompt": prompt, "serve": serve, "connect": connect, "knowledge": knowledge,
            "transcribe": transcribe, "say": say}


# Qt's own command-line options, for the window (QGuiApplication's and QApplication's).
QT_OPTIONS_WITH_VALUE = frozenset({
    "-platform", "-platformpluginpath", "-platformtheme", "-plugin", "-qwindowgeometry",
    "-qwindowicon", "-qwindowtitle", "-display", "-geometry", "-style", "-stylesheet",
    "-session", "-qmljsdebugger"})
QT_FLAGS = frozenset({"-reverse", "-widgetcount", "-nograb", "-dograb", "-sync"})


def split_qt_options(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(our arguments, Qt's), so that `inglenook -platform offscreen -style Fusion` works."""
    ours: list[str] = []
    qt: list[str] = []
    items = iter(argv)
    for arg in items:
        name = arg.split("=", 1)[0]
        if name in QT_OPTIONS_WITH_VALUE:
            qt.append(arg)
            if "=" not in arg:
                qt.append(next(items, ""))
        elif arg in QT_FLAGS:
            qt.append(arg)
        else:
            ours.append(arg)
    return ours, qt


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [ENGINE_HOST_FLAG]:  # the engine speaks on stdin/stdout: nothing else runs
        from inglenook.engine.host import main as host_main

        return host_main()
    try:
        code = _run(argv)
        sys.stdout.flush()  # what is still buffered fails here, not in Python's exit
        return code
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """Whoever read our output stopped (`inglenook conversations list | head -1`): end quietly,
    as command-line tools do, rather than with a traceback. Standard output is pointed at
    /dev/null first, because Python flushes it once more on the way out."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return CLOSED_PIPE_EXIT


def _run(argv: list[str]) -> int:
    argv, qt_args = split_qt_options(argv)
    args = _parser().parse_args(argv)
    if args.self_test:
        from inglenook.cli import self_test

        return self_test.run()
    if args.command in COMMANDS:
        return COMMANDS[args.command].run(args)
    from inglenook.ui.platform_check import problem

    if message := problem(qt_args):  # said plainly, instead of Qt's raw plugin error and abort
        print(message, file=sys.stderr)
        return 1
    from inglenook.ui.app import run_app

    return run_app(qt_args)
