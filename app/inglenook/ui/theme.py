"""Light and dark themes: one style sheet (resources/style.qss) with colour variables, filled
from a light or a dark set of colours, plus the matching QPalette for what the style sheet does
not reach (menus, dialogs, Fusion's own drawing).

The theme follows the desktop's colour scheme (QStyleHints.colorScheme, live) unless the user
chose Light or Dark (Settings.theme). `manager()` is the application's ThemeManager; widgets
that bake colours into what they show (the chat's Markdown) listen to its `changed` signal.

Every (text, background) pair the style sheet uses is listed in TEXT_PAIRS, and a test holds
each to WCAG AA (4.5:1) in both themes. Disabled text is left out: WCAG exempts inactive
controls, and they must look inactive.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPalette

from inglenook import paths
from inglenook.core.settings import THEMES

log = logging.getLogger(__name__)

MODES = THEMES  # "system", "light", "dark"
_VARIABLE = re.compile(r"@([a-z_]+)@")


@dataclass(frozen=True)
class MarkdownPalette:
    """Colours baked into the HTML; the defaults are the light theme's. Defined
    here, where the colours are, so that the theme does not import the chat's renderer."""

    link: str = "#1a5fb4"
    code_background: str = "#f5f2ee"
    code_header: str = "#ebe6df"
    code_border: str = "#e7e2da"
    muted: str = "#645c53"
    table_border: str = "#d9d2c8"
    code_style: str = "default"  # the Pygments style of highlighted code


@dataclass(frozen=True)
class Colors:
    """The colour roles the style sheet names as @role@."""

    # Surfaces, from the window's background up to the cards on it.
    window: str
    surface: str  # cards, inputs, the bars, reply bubbles
    surface_alt: str  # the side panel
    sidebar: str
    hover: str
    pressed: str
    sunken: str  # grooves, progress tracks, neutral chips
    selected: str  # a selected row
    accent_soft: str  # a checked button
    accent_soft_border: str
    user_bubble: str
    user_bubble_border: str
    selection: str  # selected text
    border: str
    control_border: str
    control_border_hover: str
    scroll_handle: str
    scroll_handle_hover: str
    surface_disabled: str
    # Text.
    text: str
    heading: str
    text_muted: str
    text_disabled: str
    accent_text: str  # the app's name, accent-coloured links and buttons
    accent_strong: str  # text on accent_soft
    # The accent, as a fill.
    accent: str  # focus rings, sliders, progress
    accent_button: str
    accent_button_hover: str
    accent_button_disabled: str
    on_accent: str  # text and the check mark on accent_button
    stop_button: str
    stop_button_hover: str
    on_stop: str
    # Messages and states.
    danger: str
    danger_bg: str
    danger_border: str
    danger_text: str
    info_bg: str
    info_text: str
    info_border: str
    fits_bg: str
    fits_text: str
    tight_bg: str
    tight_text: str
    wont_bg: str
    wont_text: str
    done: str
    paused: str
    failed: str
    tooltip_bg: str
    tooltip_text: str
    # Markdown in messages.
    link: str
    code_bg: str
    code_header: str
    table_border: str
    icon: str  # the ink of the small icons (chevrons, the menu's dots)


LIGHT_COLORS = Colors(
    window="#f6f4f0", surface="#ffffff", surface_alt="#fbfaf8", sidebar="#efebe5",
    hover="#f3eee8", pressed="#ebe4da", sunken="#efe9e1", selected="#fbe3d2",
    accent_soft="#fbeee5", accent_soft_border="#e2b597", user_bubble="#fbe9dc",
    user_bubble_border="#f2d4bf", selection="#f3c9ac", border="#e7e2da",
    control_border="#ddd5ca", control_border_hover="#cdb9a5", scroll_handle="#d8d0c5",
    scroll_handle_hover="#c2b6a8", surface_disabled="#f8f6f3",
    text="#26231f", heading="#3b352f", text_muted="#645c53", text_disabled="#aaa39a",
    accent_text="#a8491f", accent_strong="#8f3f1c",
    accent="#d9773b", accent_button="#b4532a", accent_button_hover="#9c4622",
    accent_button_disabled="#ecc9b2", on_accent="#ffffff",
    stop_button="#3b352f", stop_button_hover="#26231f", on_stop="#ffffff",
    danger="#b3261e", danger_bg="#fdecea", danger_border="#f3c4bc", danger_text="#8a2c1f",
    info_bg="#eef4ec", info_text="#2e5129", info_border="#cfe0ca",
    fits_bg="#e2f0de", fits_text="#2e6b27", tight_bg="#fcefd2", tight_text="#875800",
    wont_bg="#fbe0dc", wont_text="#a12c1f", done="#5f9a55", paused="#cdb9a5", failed="#d0796d",
    tooltip_bg="#2f2b27", tooltip_text="#f6f4f0",
    link="#1a5fb4", code_bg="#f5f2ee", code_header="#ebe6df", table_border="#d9d2c8",
    icon="#645c53",
)

DARK_COLORS = Colors(
    window="#1d1b19", surface="#272421", surface_alt="#221f1d", sidebar="#181614",
    hover="#322e2a", pressed="#3b3631", sunken="#34302b", selected="#4b3222",
    accent_soft="#3d2b20", accent_soft_border="#7a4a2c", user_bubble="#3a2a20",
    user_bubble_border="#4f3728", selection="#70452a", border="#38332e",
    control_border="#4a443d", control_border_hover="#6a5f54", scroll_handle="#4a443d",
    scroll_handle_hover="#5e564d", surface_disabled="#24211f",
    text="#ece6de", heading="#f5efe7", text_muted="#b0a79c", text_disabled="#6f675e",
    accent_text="#f0a56f", accent_strong="#f3b88c",
    accent="#e0844a", accent_button="#e0844a", accent_button_hover="#eb9560",
    accent_button_disabled="#5a3b27", on_accent="#1d1b19",
    stop_button="#5a524a", stop_button_hover="#6a6158", on_stop="#ffffff",
    danger="#ff8f84", danger_bg="#3d1f1c", danger_border="#6b2f28", danger_text="#ffb4a9",
    info_bg="#1e2b1c", info_text="#b9dcb0", info_border="#35502f",
    fits_bg="#1f3320", fits_text="#9bd68f", tight_bg="#3a2e12", tight_text="#f0c46a",
    wont_bg="#3f1f1b", wont_text="#ff9e92", done="#6fae63", paused="#7a6e61", failed="#c2665a",
    tooltip_bg="#3b3631", tooltip_text="#f3ece4",
    link="#8ab4f8", code_bg="#1b1917", code_header="#34302b", table_border="#4a443d",
    icon="#b0a79c",
)

# (text, background) for every place the style sheet or the Markdown puts text on a colour.
TEXT_PAIRS: tuple[tuple[str, str], ...] = (
    ("tight_text", "surface"), ("danger_text", "surface"),  # the context meter's warnings
    *(("text", bg) for bg in ("window", "surface", "surface_alt", "sidebar", "hover",
                              "pressed", "selected", "user_bubble", "selection", "code_bg",
                              "code_header")),
    *(("text_muted", bg) for bg in ("window", "surface", "surface_alt", "sidebar", "hover",
                                    "user_bubble", "code_header", "sunken")),
    ("heading", "window"), ("heading", "sidebar"), ("heading", "hover"),
    ("accent_text", "window"), ("accent_text", "surface"), ("accent_text", "accent_soft"),
    ("accent_strong", "accent_soft"), ("on_accent", "accent_button"),
    ("on_accent", "accent_button_hover"), ("on_stop", "stop_button"),
    ("on_stop", "stop_button_hover"), ("danger", "window"), ("danger", "surface"),
    ("danger", "danger_bg"), ("danger_text", "danger_bg"), ("info_text", "info_bg"),
    ("fits_text", "fits_bg"), ("tight_text", "tight_bg"), ("wont_text", "wont_bg"),
    ("tooltip_text", "tooltip_bg"), ("link", "surface"), ("link", "user_bubble"),
    ("link", "code_header"),
)


@dataclass(frozen=True)
class Theme:
    name: str  # "light" or "dark"
    colors: Colors
    code_style: str  # the Pygments style for code blocks

    @cached_property
    def markdown(self) -> MarkdownPalette:
        c = self.colors
        return MarkdownPalette(link=c.link, code_background=c.code_bg, code_header=c.code_header,
                               code_border=c.border, muted=c.text_muted,
                               table_border=c.table_border, code_style=self.code_style)


LIGHT = Theme("light", LIGHT_COLORS, "default")
DARK = Theme("dark", DARK_COLORS, "github-dark")


def fill(template: str, theme: Theme, icons: str) -> str:
    """`template` with each @role@ replaced by the theme's colour and @ICONS@ by `icons`."""
    values = dataclasses.asdict(theme.colors)

    def colour(match: re.Match[str]) -> str:
        return values[match[1]]  # a KeyError names a role the style sheet made up

    return _VARIABLE.sub(colour, template.replace("@ICONS@", icons))


def stylesheet(theme: Theme) -> str:
    """The application's style sheet in `theme` ("" when the resources are missing)."""
    path = paths.resources_dir() / "style.qss"
    if not path.is_file():
        return ""
    return fill(path.read_text(encoding="utf-8"), theme, icon_dir(theme).as_posix())


def icon_dir(theme: Theme) -> Path:
    """The small icons drawn in the theme's ink: recoloured copies, written to the cache (the
    style sheet can only name files). Falls back to the light originals."""
    source = paths.resources_dir() / "icons"
    target = paths.cache_dir() / "theme-icons" / theme.name
    try:
        target.mkdir(parents=True, exist_ok=True)
        for svg in source.glob("*.svg"):
            if svg.name == "inglenook.svg":  # the app's icon keeps its own colours
                continue
            text = svg.read_text(encoding="utf-8")
            text = text.replace(LIGHT_COLORS.icon, theme.colors.icon).replace(
                "#ffffff", theme.colors.on_accent)
            out = target / svg.name
            if not out.is_file() or out.read_text(encoding="utf-8") != text:
                out.write_text(text, encoding="utf-8")
    except OSError as exc:
        log.warning("Could not write the %s icons to %s: %s", theme.name, target, exc)
        return source
    return target


def qpalette(theme: Theme) -> QPalette:
    """The QPalette for `theme`: Fusion draws menus, dialogs and plain widgets with it."""
    c = theme.colors
    palette = QPalette()
    roles = QPalette.ColorRole
    for role, colour in (
        (roles.Window, c.window), (roles.WindowText, c.text), (roles.Base, c.surface),
        (roles.AlternateBase, c.surface_alt), (roles.Text, c.text), (roles.Button, c.surface),
        (roles.ButtonText, c.text), (roles.BrightText, c.danger),
        (roles.Highlight, c.accent_button), (roles.HighlightedText, c.on_accent),
        (roles.ToolTipBase, c.tooltip_bg), (roles.ToolTipText, c.tooltip_text),
        (roles.PlaceholderText, c.text_muted), (roles.Link, c.link),
        (roles.LinkVisited, c.link), (roles.Light, c.surface), (roles.Midlight, c.hover),
        (roles.Mid, c.control_border), (roles.Dark, c.control_border_hover),
        (roles.Shadow, "#000000"),
    ):
        palette.setColor(role, QColor(colour))
    disabled = QPalette.ColorGroup.Disabled
    for role in (roles.WindowText, roles.Text, roles.ButtonText):
        palette.setColor(disabled, role, QColor(c.text_disabled))
    palette.setColor(disabled, roles.Base, QColor(c.surface_disabled))
    palette.setColor(disabled, roles.Button, QColor(c.surface_disabled))
    return palette


class ThemeManager(QObject):
    """Applies the theme the mode asks for, and again when the desktop's scheme changes.

    Signals:
        changed(object): another Theme was applied; its palette and style sheet are in place.
    """

    changed = Signal(object)

    def __init__(self, app: QGuiApplication) -> None:
        super().__init__(app)
        self.setObjectName("themeManager")
        self._app = app
        self._mode = "system"
        hints = app.styleHints()
        self._scheme = hints.colorScheme()
        self._theme: Theme | None = None  # None until applied: the app is unstyled
        self._unstyled = app.palette()
        hints.colorSchemeChanged.connect(self._scheme_changed)

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def theme(self) -> Theme:
        """The theme applied (light before any)."""
        return self._theme or LIGHT

    def wanted(self) -> Theme:
        if self._mode == "system":
            return DARK if self._scheme == Qt.ColorScheme.Dark else LIGHT
        return DARK if self._mode == "dark" else LIGHT

    def set_mode(self, mode: str) -> None:
        """Follow the system ("system") or keep to "light" or "dark"; applies at once."""
        if mode not in MODES:
            raise ValueError(f"unknown theme {mode!r}")
        self._mode = mode
        self.apply()

    def apply(self) -> None:
        """Put the wanted theme in place (nothing to do when it already is)."""
        theme = self.wanted()
        if theme is self._theme:
            return
        self._theme = theme
        sheet = stylesheet(theme)
        if sheet and self._app.styleSheet():  # type: ignore[attr-defined]
            # Qt restyles a changed sheet in place by walking every widget once per ancestor
            # (0.25 s for the window's ~500 widgets); dropping the sheet and setting the new one
            # styles each widget twice, in about a third of that.
            self._app.setStyleSheet("")  # type: ignore[attr-defined]
        self._app.setPalette(qpalette(theme))
        if sheet:
            self._app.setStyleSheet(sheet)  # type: ignore[attr-defined]
        self.changed.emit(theme)

    def reset(self) -> None:
        """Back to how the app was before any theme: its own palette, no style sheet, following
        the system (tests put the app back this way)."""
        was = self._theme
        self._mode, self._theme = "system", None
        self._scheme = self._app.styleHints().colorScheme()
        self._app.setStyleSheet("")  # type: ignore[attr-defined]
        self._app.setPalette(self._unstyled)
        if was is not None and was is not LIGHT:
            self.changed.emit(LIGHT)

    def _scheme_changed(self, scheme: Qt.ColorScheme) -> None:
        self._scheme = scheme
        if self._theme is not None:  # an app never themed (some tests) stays as it is
            self.apply()


def manager() -> ThemeManager:
    """The application's ThemeManager, made on first use."""
    app = QGuiApplication.instance()
    if app is None:
        raise RuntimeError("the theme needs a QApplication")
    found = app.findChild(ThemeManager, "themeManager")
    return found if found is not None else ThemeManager(app)  # type: ignore[arg-type]


def current() -> Theme:
    """The theme in use (light when there is no application or none was applied)."""
    if QGuiApplication.instance() is None:
        return LIGHT
    return manager().theme
