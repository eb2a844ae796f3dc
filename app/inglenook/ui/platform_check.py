"""Before the window: can Qt open its X11 platform plugin here?

PySide6 wheels (and our bundle) carry Qt but not the system libraries its xcb plugin links to
(libxcb-cursor0, libxcb-icccm4…). Without them Qt prints a raw "Could not load the Qt platform
plugin" and aborts. Loading the plugin ourselves first (dlopen, as Qt would) names the missing
library, and the user is told what to install instead. packaging/qt-runtime-deps.sh installs the
same packages for `make run` (tests/unit/ui/test_platform_check.py keeps the two lists equal).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

# Debian/Ubuntu names, as packaging/qt-runtime-deps.sh lists them.
APT_PACKAGES = (
    "libxcb-cursor0", "libxcb-icccm4", "libxcb-image0", "libxcb-keysyms1", "libxcb-randr0",
    "libxcb-render-util0", "libxcb-shape0", "libxcb-xfixes0", "libxcb-xinerama0", "libxcb-xkb1",
    "libxkbcommon-x11-0", "libegl1", "libgl1", "libfontconfig1", "libdbus-1-3",
    "fonts-dejavu-core")
# Libraries the xcb plugin links to that a minimal system often lacks (to name them all: the
# loader's own message names only the first it missed).
LIBRARIES = ("libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-image.so.0",
             "libxcb-keysyms.so.1", "libxcb-randr.so.0", "libxcb-render-util.so.0",
             "libxcb-shape.so.0", "libxcb-xfixes.so.0", "libxcb-xkb.so.1",
             "libxkbcommon-x11.so.0", "libEGL.so.1", "libfontconfig.so.1")
PLUGIN = "libqxcb.so"


def wanted_platform(qt_args: Sequence[str], env: Mapping[str, str]) -> str:
    """The platform plugin Qt will try first ("" when it is not xcb's business to say)."""
    args = list(qt_args)
    for i, arg in enumerate(args):
        if arg == "-platform" and i + 1 < len(args):
            return args[i + 1].split(";")[0].split(":")[0]
        if arg.startswith("-platform="):
            return arg.split("=", 1)[1].split(";")[0].split(":")[0]
    if env.get("QT_QPA_PLATFORM"):
        return env["QT_QPA_PLATFORM"].split(";")[0].split(":")[0]
    if env.get("XDG_SESSION_TYPE") == "wayland" and env.get("WAYLAND_DISPLAY"):
        return "wayland"  # Qt tries Wayland first there, and falls back to xcb by itself
    return "xcb"


def plugin_path(env: Mapping[str, str]) -> Path | None:
    """Where Qt will look for the xcb plugin (QT_QPA_PLATFORM_PLUGIN_PATH first, as Qt does)."""
    override = env.get("QT_QPA_PLATFORM_PLUGIN_PATH")
    if override:
        return Path(override) / PLUGIN
    from PySide6.QtCore import QLibraryInfo  # the bundle's qt.conf or the wheel's own layout

    found = Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)) / "platforms" / PLUGIN
    return found if found.is_file() else None


def _load(path: str) -> str:
    """"" when the dynamic loader can load `path` (with what it links to), else its reason."""
    try:
        ctypes.CDLL(path)
    except OSError as exc:
        return str(exc)
    return ""


def missing_libraries() -> list[str]:
    return [name for name in LIBRARIES if _load(name)]


def problem(qt_args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> str:
    """What stops the window from opening, in words with the fix ("" when nothing does)."""
    env = os.environ if env is None else env
    if not sys.platform.startswith("linux") or wanted_platform(qt_args, env) != "xcb":
        return ""
    plugin = plugin_path(env)
    if plugin is None:
        return ""  # not where we know to look: let Qt say what it finds
    reason = _load(str(plugin)) if plugin.is_file() else f"{plugin} does not exist"
    if not reason:
        if not env.get("DISPLAY") and "-display" not in qt_args:
            return ("Inglenook cannot open its window: there is no X11 display (DISPLAY is not "
                    "set). Start it from a desktop session, or without a screen with "
                    "`xvfb-run inglenook`. The command line (inglenook chat, serve, models) "
                    "works without a display.")
        return ""
    missing = missing_libraries()
    named = ", ".join(missing) if missing else reason
    return ("Inglenook cannot open its window: Qt's X11 platform plugin needs system libraries "
            f"that are missing ({named}).\n"
            f"On Debian or Ubuntu, install them with:\n"
            f"    sudo apt-get install {' '.join(APT_PACKAGES)}\n"
            "On other systems, install your distribution's packages for xcb-cursor, "
            "xcb-icccm, xcb-keysyms, xkbcommon-x11 and EGL.\n"
            f"(The loader said: {reason})\n"
            "The command line (inglenook chat, serve, models) works without them.")
