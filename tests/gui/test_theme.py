"""Light and dark themes: readable colours, the system's scheme followed live, the user's choice
kept, and the chat's Markdown and code drawn in the theme's colours."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from inglenook import paths
from inglenook.core.settings import Settings, load_settings
from inglenook.ui import theme
from inglenook.ui.chat.chat_view import ChatView
from inglenook.ui.chat.code_highlight import highlight
from inglenook.ui.chat.markdown import DEFAULT_PALETTE
from inglenook.ui.contrast import AA_TEXT, contrast, readable
from inglenook.ui.main_window import MainWindow
from tests.gui.conftest import chat

THEMES = [theme.LIGHT, theme.DARK]
SAMPLES = {  # a little of each language models write most, with comments, strings, numbers
    "python": 'def f(x: int = 3) -> str:\n    """Doc."""  # note\n    return f"{x!r}" + \'a\'\n',
    "javascript": "// note\nconst f = async (x = 3) => { return `${x}` + /re/g.source; };\n",
    "bash": '#!/bin/sh\nfor f in *.txt; do echo "$f" | grep -c x; done # note\n',
    "rust": "/// doc\nfn main() { let s: &str = \"a\"; println!(\"{}\", 42u8); }\n",
    "json": '{"a": [1, 2.5, true, null], "b": "text"}\n',
    "diff": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n",
}


@pytest.fixture
def themes(qapp: QApplication) -> Iterator[theme.ThemeManager]:
    """The application's theme manager; the app is unstyled again afterwards."""
    manager = theme.manager()
    yield manager
    manager.reset()


def set_scheme(scheme: Qt.ColorScheme) -> None:
    """What Qt does when the desktop switches between light and dark."""
    QGuiApplication.styleHints().colorSchemeChanged.emit(scheme)


def window_colour() -> str:
    return QApplication.palette().color(QPalette.ColorRole.Window).name()


# ---- colours ----------------------------------------------------------------------------------


@pytest.mark.parametrize("used", THEMES, ids=lambda t: t.name)
def test_every_text_colour_is_readable_on_its_background(used: theme.Theme) -> None:
    colours = vars(used.colors)
    poor = [(fg, bg, round(contrast(colours[fg], colours[bg]), 2))
            for fg, bg in theme.TEXT_PAIRS if contrast(colours[fg], colours[bg]) < AA_TEXT]
    assert poor == []


def test_the_style_sheet_takes_every_colour_from_the_theme() -> None:
    template = (paths.resources_dir() / "style.qss").read_text(encoding="utf-8")
    assert re.findall(r"#[0-9a-fA-F]{3,6}\b", template) == []  # no colour fixed for one theme
    for used in THEMES:
        sheet = re.sub(r"/\*.*?\*/", "", theme.stylesheet(used), flags=re.DOTALL)
        assert "@" not in sheet and used.colors.window in sheet and used.colors.text in sheet


@pytest.mark.parametrize("used", THEMES, ids=lambda t: t.name)
def test_highlighted_code_is_readable_on_the_code_background(used: theme.Theme) -> None:
    background = used.markdown.code_background
    seen: set[str] = set()
    for language, code in SAMPLES.items():
        html = highlight(code, language, used.code_style, background)
        assert html is not None
        seen.update(re.findall(r"color:(#[0-9a-fA-F]{6})", html))
    assert len(seen) >= 4  # a real style, not everything in one colour
    assert [c for c in seen if contrast(c, background) < AA_TEXT] == []


def test_readable_darkens_on_light_and_lightens_on_dark() -> None:
    assert readable("#777777", "#000000") == "#777777"  # already readable: unchanged
    darker, lighter = readable("#aaaaaa", "#ffffff"), readable("#555555", "#000000")
    assert contrast(darker, "#ffffff") >= AA_TEXT and darker < "#aaaaaa"
    assert contrast(lighter, "#000000") >= AA_TEXT and lighter > "#555555"


def test_the_light_theme_is_the_markdown_default() -> None:
    assert theme.LIGHT.markdown.code_background == DEFAULT_PALETTE.code_background
    assert theme.LIGHT.markdown.link == DEFAULT_PALETTE.link


def test_the_theme_setting_takes_only_known_values() -> None:
    assert Settings.parse({"theme": "dark"})[0].theme == "dark"
    settings, problems = Settings.parse({"theme": "sepia"})
    assert settings.theme == "system" and problems and "theme" in problems[0]


# ---- following the system, and the user's choice ---------------------------------------------


def test_the_theme_follows_the_system_scheme_unless_overridden(
        themes: theme.ThemeManager) -> None:
    themes.set_mode("system")
    set_scheme(Qt.ColorScheme.Dark)
    assert themes.theme is theme.DARK and window_colour() == theme.DARK.colors.window
    assert theme.DARK.colors.window in QApplication.instance().styleSheet()
    set_scheme(Qt.ColorScheme.Light)
    assert themes.theme is theme.LIGHT and window_colour() == theme.LIGHT.colors.window

    themes.set_mode("light")
    set_scheme(Qt.ColorScheme.Dark)
    assert themes.theme is theme.LIGHT  # the user's choice wins over the desktop
    themes.set_mode("dark")
    set_scheme(Qt.ColorScheme.Light)
    assert themes.theme is theme.DARK and window_colour() == theme.DARK.colors.window
    themes.set_mode("system")
    assert themes.theme is theme.LIGHT  # the desktop said light last
    with pytest.raises(ValueError):
        themes.set_mode("sepia")


def test_an_unthemed_app_ignores_scheme_changes(themes: theme.ThemeManager) -> None:
    before = QApplication.instance().styleSheet()
    set_scheme(Qt.ColorScheme.Dark)
    assert QApplication.instance().styleSheet() == before  # tests of other widgets stay as is
    set_scheme(Qt.ColorScheme.Light)


def test_messages_shown_are_drawn_again_in_the_new_theme(
        qtbot: QtBot, themes: theme.ThemeManager) -> None:
    themes.set_mode("light")
    view = ChatView()
    qtbot.addWidget(view)
    bubble = view.add_bubble("assistant", "Some code:\n\n```python\nx = 1\n```\n")
    assert theme.LIGHT.colors.code_bg in bubble.body.toHtml()
    themes.set_mode("dark")
    assert bubble.body.markdown_palette() == theme.DARK.markdown
    html = bubble.body.toHtml()
    assert theme.DARK.colors.code_bg in html and theme.LIGHT.colors.code_bg not in html
    later = view.add_bubble("assistant", "```\ny\n```")  # a new message starts in the theme
    assert theme.DARK.colors.code_bg in later.body.toHtml()


def test_the_view_menu_switches_the_theme_and_it_is_kept(
        qtbot: QtBot, window: MainWindow, themes: theme.ThemeManager) -> None:
    chat(qtbot, window, "Hello")
    reply = window.chat.bubbles[-1]
    dark = window.command_actions["themeDark"]
    assert window.command_actions["themeSystem"].isChecked() and not dark.isChecked()
    dark.trigger()
    assert dark.isChecked() and not window.command_actions["themeSystem"].isChecked()
    assert themes.theme is theme.DARK and window_colour() == theme.DARK.colors.window
    assert reply.body.markdown_palette() == theme.DARK.markdown
    set_scheme(Qt.ColorScheme.Light)
    assert themes.theme is theme.DARK  # chosen: the desktop no longer decides
    window.close()
    assert load_settings().theme == "dark"


def test_choices_made_elsewhere_show_when_the_menu_opens(
        window: MainWindow, themes: theme.ThemeManager) -> None:
    themes.set_mode("light")
    view_menu = next(a.menu() for a in window.menuBar().actions() if "View" in a.text())
    theme_menu = next(a.menu() for a in view_menu.actions() if a.text() == "Theme")
    theme_menu.aboutToShow.emit()
    assert window.command_actions["themeLight"].isChecked()
    assert not window.command_actions["themeSystem"].isChecked()


def test_a_message_shown_in_full_is_drawn_again_in_the_new_theme(
        qtbot: QtBot, themes: theme.ThemeManager) -> None:
    themes.set_mode("light")
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(700, 500)
    view.show()
    code = "".join(f"x{i} = {i}\n" for i in range(3_000))
    body = view.add_bubble("assistant", f"```python\n{code}```\n\n" + "Words. " * 9_000).body
    assert body.truncated
    with qtbot.waitSignal(body.fully_shown, timeout=60_000):
        body.show_all()
    assert theme.LIGHT.colors.code_bg in body.toHtml()
    themes.set_mode("dark")  # every part again, in the background
    qtbot.waitUntil(lambda: theme.LIGHT.colors.code_bg not in body.toHtml(), timeout=60_000)
    assert theme.DARK.colors.code_bg in body.toHtml() and not body.truncated


class StyleChanges(QObject):
    """Counts the StyleChange events a widget receives (each is a restyle of it)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.StyleChange:
            self.count += 1
        return False


def test_a_theme_switch_restyles_each_widget_a_fixed_number_of_times(
        window: MainWindow, themes: theme.ThemeManager) -> None:
    """Qt restyles a changed application style sheet in place by walking every widget once for
    itself and once more for each ancestor: the Send button was restyled six
    times per switch, 0.25 s for the whole window. The switch drops the old sheet first, so that
    each widget is restyled twice, whatever its depth."""
    themes.set_mode("light")
    send = window.composer.button
    depth, parent = 0, send.parentWidget()
    while parent is not None:
        depth, parent = depth + 1, parent.parentWidget()
    assert depth >= 5  # deep enough for the in-place walk to show
    counter = StyleChanges()
    send.installEventFilter(counter)
    themes.set_mode("dark")
    send.removeEventFilter(counter)
    assert 1 <= counter.count <= 2
    assert themes.theme is theme.DARK and window_colour() == theme.DARK.colors.window
    assert QApplication.instance().styleSheet() == theme.stylesheet(theme.DARK)  # type: ignore[union-attr]
