"""What every command shares."""

from __future__ import annotations

import sys


def fail(message: str) -> int:
    """One line on stderr; the exit status for a failed command."""
    print(f"inglenook: {message}", file=sys.stderr)
    return 1
