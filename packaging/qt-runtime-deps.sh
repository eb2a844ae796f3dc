#!/usr/bin/env sh
# Makes sure the system libraries Qt's X11 (xcb) platform plugin needs are present on Linux.
# PySide6 wheels bundle Qt itself but not these. On Debian/Ubuntu they are installed with apt
# when we can (root or password-less sudo); otherwise the command to run is printed. The window
# itself names them when they are missing (app/inglenook/ui/platform_check.py: keep both lists equal).
set -eu
[ "$(uname -s)" = Linux ] || exit 0
case "${QT_QPA_PLATFORM:-xcb}" in xcb*) ;; *) exit 0 ;; esac
PACKAGES="libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 \
libxcb-render-util0 libxcb-shape0 libxcb-xfixes0 libxcb-xinerama0 libxcb-xkb1 \
libxkbcommon-x11-0 libegl1 libgl1 libfontconfig1 libdbus-1-3 fonts-dejavu-core"
missing=""
for lib in libxcb-cursor.so.0 libxcb-icccm.so.4 libxcb-keysyms.so.1 libxkbcommon-x11.so.0 libEGL.so.1; do
    ldconfig -p 2>/dev/null | grep -q "$lib" || missing="$missing $lib"
done
[ -z "$missing" ] && exit 0
echo "Qt needs system libraries that are missing:$missing"
if command -v apt-get >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $PACKAGES
        exit 0
    elif sudo -n true 2>/dev/null; then
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $PACKAGES
        exit 0
    fi
    echo "Install them with:  sudo apt-get install $PACKAGES"
else
    echo "Install your distribution's packages for: xcb-cursor, xcb-icccm, xkbcommon-x11, EGL."
fi
exit 1
