"""Without the X11 libraries Qt's xcb plugin needs, `inglenook` says what to install instead of
Qt's raw plugin error (ui/platform_check.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from inglenook.ui import platform_check
from inglenook.ui.platform_check import APT_PACKAGES, problem, wanted_platform

ROOT = Path(__file__).resolve().parents[3]


def test_the_packages_named_are_the_ones_make_run_installs() -> None:
    script = (ROOT / "packaging" / "qt-runtime-deps.sh").read_text(encoding="utf-8")
    listed = re.search(r'PACKAGES="([^"]*)"', script)
    assert listed is not None
    assert tuple(listed.group(1).replace("\\\n", " ").split()) == APT_PACKAGES


@pytest.mark.parametrize(("args", "env", "platform"), [
    ((), {}, "xcb"),
    ((), {"QT_QPA_PLATFORM": "offscreen"}, "offscreen"),
    ((), {"QT_QPA_PLATFORM": "xcb;wayland"}, "xcb"),
    (("-platform", "offscreen"), {"QT_QPA_PLATFORM": "xcb"}, "offscreen"),
    (("-platform=vnc:size=800x600",), {}, "vnc"),
    ((), {"XDG_SESSION_TYPE": "wayland", "WAYLAND_DISPLAY": "wayland-0"}, "wayland"),
])
def test_the_platform_qt_tries_first(args: tuple[str, ...], env: dict[str, str],
                                     platform: str) -> None:
    assert wanted_platform(args, env) == platform


def test_other_platforms_are_not_checked(tmp_path: Path) -> None:
    (tmp_path / "libqxcb.so").write_bytes(b"not a library")
    env = {"QT_QPA_PLATFORM": "offscreen", "QT_QPA_PLATFORM_PLUGIN_PATH": str(tmp_path)}
    assert problem((), env) == ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11 is Linux's")
def test_each_missing_library_is_named_with_the_packages_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "libqxcb.so").write_bytes(b"")
    reason = "libxcb-cursor.so.0: cannot open shared object file: No such file or directory"
    monkeypatch.setattr(platform_check, "_load", lambda path: reason if "qxcb" in path
                        or "cursor" in path or "icccm" in path else "")
    message = problem((), {"DISPLAY": ":0", "QT_QPA_PLATFORM_PLUGIN_PATH": str(tmp_path)})
    assert "(libxcb-cursor.so.0, libxcb-icccm.so.4)" in message
    assert "sudo apt-get install libxcb-cursor0 libxcb-icccm4" in message


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11 is Linux's")
def test_inglenook_says_what_to_install_instead_of_qts_plugin_error(tmp_path: Path) -> None:
    """The real entry point with an xcb plugin the loader refuses (as it refuses one whose
    libraries are missing): a clear message and exit status 1, before Qt tries and aborts."""
    (tmp_path / "libqxcb.so").write_bytes(b"\x7fELF but not really")
    env = {k: v for k, v in os.environ.items()
           if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
    env.update(DISPLAY=":0", QT_QPA_PLATFORM_PLUGIN_PATH=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "inglenook"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "cannot open its window" in done.stderr
    assert "sudo apt-get install libxcb-cursor0" in done.stderr
    assert "qt.qpa.plugin" not in done.stderr  # Qt never got to try


def test_no_display_is_said_plainly(tmp_path: Path) -> None:
    if not sys.platform.startswith("linux") or platform_check.plugin_path({}) is None:
        pytest.skip("needs the wheel's xcb plugin")
    if platform_check._load(str(platform_check.plugin_path({}))):
        pytest.skip("this machine lacks the X11 libraries themselves")
    message = problem((), {})
    assert "no X11 display" in message and "xvfb-run" in message
