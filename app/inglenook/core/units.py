"""Sizes and counts as people read them: one place for the units the app shows."""

from __future__ import annotations

import math


def describe_size(size_bytes: int) -> str:
    """"980 B", "12 KB", "98 MB", "4.7 GB" (decimal units, as disks and the Hub count)."""
    if size_bytes < 1000:
        return f"{size_bytes} B"
    for unit, scale in (("KB", 1e3), ("MB", 1e6)):
        if round(size_bytes / scale) < 1000:  # so 999,999 bytes reads "1.0 MB", not "1000 KB"
            return f"{size_bytes / scale:.0f} {unit}"
    return f"{size_bytes / 1e9:.1f} GB"


def describe_params(count: int) -> str:
    """"1.5B", "135M", "?" when the header does not say."""
    if not count:
        return "?"
    if count >= 1e9:
        return f"{count / 1e9:.1f}B"
    return f"{count / 1e6:.0f}M" if count >= 1e6 else f"{count / 1e3:.0f}K"


def gigabytes(size_bytes: float) -> str:
    """"4.7 GB": memory, as the fit planner and the loaded models count it."""
    return f"{size_bytes / 1e9:.1f} GB"


def amount(size_bytes: float) -> str:
    """"640 KB", "12.3 MB", "1.25 GB": how far a download is, finer than describe_size."""
    if size_bytes < 1e6:
        return f"{math.ceil(size_bytes / 1e3)} KB"
    return f"{size_bytes / 1e6:.1f} MB" if size_bytes < 1e9 else f"{size_bytes / 1e9:.2f} GB"


def rate(bytes_per_s: float) -> str:
    """"12.3 MB/s"."""
    return f"{bytes_per_s / 1e6:.1f} MB/s"


def count(n: int, noun: str) -> str:
    """Like "1 image" or "1,204 hidden messages"."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
