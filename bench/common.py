"""What the bench scripts share: their log line, the bundled model, and N clients at once."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from inglenook import paths


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def bundled_model() -> Path | None:
    """The bundled model, or None (said on stderr) when it is missing."""
    model = paths.bundled_model_path()
    if model is None:
        log("The bundled model is missing: run `make setup`.")
    return model


def at_once(n: int, ask: Callable[[int], None]) -> float:
    """ask(0) … ask(n - 1) on n threads started together; the seconds until all ended."""
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(n)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started
