"""WCAG 2 contrast between two colours, and a colour nudged until it is readable. No Qt here:
the Markdown renderer uses it on a worker thread."""

from __future__ import annotations

AA_TEXT = 4.5  # WCAG 2 level AA for normal text


def _rgb(colour: str) -> tuple[int, int, int]:
    value = colour.lstrip("#")
    if len(value) == 3:
        value = "".join(c * 2 for c in value)
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


def _hex(rgb: tuple[float, float, float]) -> str:
    return "#" + "".join(f"{max(0, min(255, round(c))):02x}" for c in rgb)


def luminance(colour: str) -> float:
    """Relative luminance of a #rrggbb colour (WCAG 2 definition)."""

    def linear(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.04045 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in _rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(foreground: str, background: str) -> float:
    """The contrast ratio of two colours, 1 to 21."""
    a, b = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (a + 0.05) / (b + 0.05)


def readable(colour: str, background: str, ratio: float = AA_TEXT) -> str:
    """`colour`, mixed towards black on a light background (white on a dark one) just enough to
    reach `ratio` against `background`; unchanged when it already does."""
    if contrast(colour, background) >= ratio:
        return colour
    target = 0.0 if luminance(background) > 0.18 else 255.0
    rgb = _rgb(colour)
    for step in range(1, 21):
        mix = step / 20
        candidate = _hex(tuple(c + (target - c) * mix for c in rgb))  # type: ignore[arg-type]
        if contrast(candidate, background) >= ratio:
            return candidate
    return _hex((target, target, target))
