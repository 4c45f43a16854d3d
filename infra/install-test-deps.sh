#!/bin/sh
# Test dependencies outside the Python venv, from Debian: chromium (headless XSS checks of the Data Docs and
# reports, tests/report/test_xss_browser.py; the Prefect UI test of tests/alerts), prometheus-alertmanager and
# prometheus (promtool + a real Prometheus; tests/alerts). Idempotent; prints why when it cannot install.
# Usage: infra/install-test-deps.sh [chromium] [alertmanager] [prometheus]   (default: chromium; as root or with passwordless sudo)
set -eu
want="${*:-chromium}"
missing=""
for w in $want; do
    case "$w" in
        chromium) command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing="$missing chromium" ;;
        alertmanager) command -v prometheus-alertmanager >/dev/null 2>&1 || command -v alertmanager >/dev/null 2>&1 || missing="$missing prometheus-alertmanager" ;;
        prometheus) { command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; } || missing="$missing prometheus" ;;
        *) echo "install-test-deps: unknown dependency $w (chromium, alertmanager, prometheus)" >&2; exit 2 ;;
    esac
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "install-test-deps: not root and no passwordless sudo: cannot install$missing" >&2; exit 3
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-test-deps: no apt-get (not Debian/Ubuntu): install$missing by hand" >&2; exit 3
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2 || { echo "install-test-deps: apt-get update failed (offline?)" >&2; exit 3; }
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >&2 || { echo "install-test-deps: apt-get install$missing failed" >&2; exit 3; }
