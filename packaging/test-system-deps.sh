#!/usr/bin/env sh
# System programs some tests use, installed with apt when we can (root or password-less sudo):
# espeak-ng, the second, independent voice of the speech round trip (tests/unit/speech). Without
# it that one test is skipped and says so; nothing else needs it, so this never fails the run.
set -u
[ "$(uname -s)" = Linux ] || exit 0
command -v espeak-ng >/dev/null 2>&1 && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "espeak-ng not found: its voice test is skipped"; exit 0; }
if [ "$(id -u)" = 0 ]; then SUDO="env"; elif sudo -n true 2>/dev/null; then SUDO="sudo -n env"; else
    echo "espeak-ng not found (sudo apt-get install espeak-ng): its voice test is skipped"; exit 0
fi
APT="$SUDO DEBIAN_FRONTEND=noninteractive apt-get"
$APT install -y -qq espeak-ng >/dev/null 2>&1 ||
    { $APT update -qq >/dev/null 2>&1 && $APT install -y -qq espeak-ng >/dev/null 2>&1; } ||
    echo "espeak-ng could not be installed: its voice test is skipped"
exit 0
