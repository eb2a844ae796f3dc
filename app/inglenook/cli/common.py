"""What every command shares: one line for a failure, and the end of an engine session."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

INTERRUPTED_EXIT = 130  # 128 + SIGINT: what a shell reports for Ctrl+C


class UsageError(Exception):
    """A bad option or input; str() is one line for the user (exit 2)."""


def fail(message: str) -> int:
    """One line on stderr; the exit status for a failed command."""
    print(f"inglenook: {message}", file=sys.stderr)
    return 1


class Closable(Protocol):
    def close(self) -> None: ...


@dataclass
class SessionEnd:
    """How an engine session ended, when an error or Ctrl+C ended it."""

    code: int = 0


@contextmanager
def engine_session(client: Closable) -> Iterator[SessionEnd]:
    """Run commands on an engine, closing it however they end: an EngineError becomes one
    line and exit 1, Ctrl+C exit 130. A command returns from inside the block when all went
    well, and `end.code` after it:

        with engine_session(client) as end:
            client.load(params)
            return 0
        return end.code
    """
    from inglenook.engine.client import EngineError

    end = SessionEnd()
    try:
        yield end
    except EngineError as exc:
        end.code = fail(str(exc))
    except KeyboardInterrupt:
        end.code = INTERRUPTED_EXIT
    finally:
        client.close()
