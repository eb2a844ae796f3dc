#!/usr/bin/env sh
# Installs this Inglenook folder for the current user, where it is: a link in ~/.local/bin, the
# .desktop file (its Exec pointing at this folder), icons and AppStream metainfo in
# ~/.local/share. Nothing is copied outside ~/.local and nothing needs root.
#   ./install-linux.sh              install (run it again after moving the folder)
#   ./install-linux.sh --uninstall  remove what install put there (this folder stays)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=${XDG_DATA_HOME:-$HOME/.local/share}
BIN=$HOME/.local/bin
APP_ID=io.github.inglenook.Inglenook
FILES="applications/inglenook.desktop metainfo/$APP_ID.metainfo.xml"
for icon in "$HERE"/share/icons/hicolor/*/apps/inglenook.*; do
    FILES="$FILES icons/hicolor/${icon#"$HERE"/share/icons/hicolor/}"
done

if [ "${1:-}" = --uninstall ]; then
    [ -L "$BIN/inglenook" ] && rm -f "$BIN/inglenook"
    for f in $FILES; do rm -f "$DATA/$f"; done
else
    mkdir -p "$BIN"
    ln -sfn "$HERE/inglenook" "$BIN/inglenook"
    for f in $FILES; do
        mkdir -p "$(dirname "$DATA/$f")"
        cp "$HERE/share/$f" "$DATA/$f"
    done
    # Menus may not have ~/.local/bin on PATH: point the launcher at this folder.
    sed -i "s|^Exec=.*|Exec=\"$HERE/inglenook\"|; s|^TryExec=.*|TryExec=$HERE/inglenook|" \
        "$DATA/applications/inglenook.desktop"
fi
command -v update-desktop-database >/dev/null 2>&1 && \
    update-desktop-database -q "$DATA/applications" || true
command -v gtk-update-icon-cache >/dev/null 2>&1 && \
    gtk-update-icon-cache -q -t "$DATA/icons/hicolor" || true
echo "Inglenook ${1:+un}installed for $(id -un) (from $HERE)"
