#!/usr/bin/env sh
# The validators `make package` runs on the Linux metadata: desktop-file-validate
# (desktop-file-utils) and appstreamcli (appstream). Installed with apt when we can (root or
# password-less sudo); otherwise the command is printed and packaging/build.py skips the checks
# it cannot run, saying so.
set -eu
[ "$(uname -s)" = Linux ] || exit 0
missing=""
command -v desktop-file-validate >/dev/null 2>&1 || missing="$missing desktop-file-utils"
command -v appstreamcli >/dev/null 2>&1 || missing="$missing appstream"
[ -z "$missing" ] && exit 0
if command -v apt-get >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
        exit 0
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
        exit 0
    fi
    echo "To validate the .desktop and metainfo files:  sudo apt-get install$missing"
else
    echo "To validate the .desktop and metainfo files, install:$missing"
fi
exit 1
