#!/usr/bin/env bash
# chromium.sh installs Debian's Chromium (package chromium, /usr/bin/chromium), which the
# documentation site's browser test drives headless (cmd/marketdata/docs_browser_test.go).
# Only Debian's package: never a browser download by a test tool. Installed without recommended
# packages: a headless browser needs none of them (fonts, audio, desktop integration), and with
# them apt-get installs about 115 packages (479 MB) and upgrades systemd; without, about 25
# (414 MB). Chromium's own dependencies may still upgrade shared libraries (libnss3, libgtk-3-0,
# ...) that other programs on the machine use.
#
# Idempotent: a machine that has /usr/bin/chromium is left alone. Needs root or passwordless
# sudo only when it installs. Prints one line on stdout; installer output goes to stderr.
set -euo pipefail

readonly CHROMIUM=/usr/bin/chromium

# die, as_root, apt_install
# shellcheck source=deploy/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

how="already installed"
if [ ! -x "$CHROMIUM" ]; then
	apt_install --no-install-recommends chromium
	[ -x "$CHROMIUM" ] || die "package chromium installed but $CHROMIUM is missing"
	how=installed
fi
printf 'chromium: %s %s (%s)\n' "$CHROMIUM" "$how" "$("$CHROMIUM" --version 2>/dev/null | head -n 1)"
