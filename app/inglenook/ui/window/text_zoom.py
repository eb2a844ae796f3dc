"""Text zoom of the chat (View ▸ Larger text Ctrl+=, Smaller text Ctrl+-, Actual size Ctrl+0),
kept in the settings (`text_zoom`, percent) across restarts. Steps as browsers take them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inglenook.ui.app_settings import AppSettings

STEPS = (50, 67, 75, 80, 90, 100, 110, 125, 150, 175, 200, 250, 300)


def next_zoom(current: int, direction: int) -> int:
    """The step after `current` (+1 larger, -1 smaller, 0 back to 100 %); a value between steps
    (a hand-edited settings.json) goes to the nearest step that way."""
    if direction == 0:
        return 100
    if direction > 0:
        return next((s for s in STEPS if s > current), STEPS[-1])
    return next((s for s in reversed(STEPS) if s < current), STEPS[0])


def zoom(settings: AppSettings, direction: int) -> None:
    """Change the chat's text size and keep it; the window applies it on changed("text_zoom")."""
    settings.set("text_zoom", next_zoom(settings.value.text_zoom, direction))
