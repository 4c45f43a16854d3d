#!/bin/sh
# Test dependencies outside the Python venv: Debian's chromium (headless XSS checks of the Data Docs and
# reports, tests/report/test_xss_browser.py). Idempotent; prints why when it cannot install.
# Usage: infra/install-test-deps.sh   (as root, or with passwordless sudo)
set -eu
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "install-test-deps: not root and no passwordless sudo: cannot install chromium" >&2; exit 3
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-test-deps: no apt-get (not Debian/Ubuntu): install chromium by hand" >&2; exit 3
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2 || { echo "install-test-deps: apt-get update failed (offline?)" >&2; exit 3; }
$SUDO apt-get install -y -qq --no-install-recommends chromium >&2 || { echo "install-test-deps: apt-get install chromium failed" >&2; exit 3; }
command -v chromium >/dev/null 2>&1
