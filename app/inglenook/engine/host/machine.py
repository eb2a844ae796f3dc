"""What the engine knows about this machine without llama.cpp: its cores."""

from __future__ import annotations

import os

import psutil


def physical_cores() -> int:
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def logical_cores() -> int:
    """The CPUs this process may run on (hyperthreads included)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1
