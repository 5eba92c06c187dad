#!/usr/bin/env bash
# chromium.sh installs Debian's Chromium (package chromium, /usr/bin/chromium), which the
# documentation site's browser test drives headless (cmd/marketdata/docs_browser_test.go).
# Only Debian's package: never a browser download by a test tool.
#
# Idempotent: a machine that has /usr/bin/chromium is left alone. Needs root or passwordless
# sudo only when it installs. Prints one line on stdout; installer output goes to stderr.
set -euo pipefail

readonly CHROMIUM=/usr/bin/chromium

die() {
	printf 'chromium.sh: %s\n' "$*" >&2
	exit 1
}

as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n "$@"
	else
		die "need root (or sudo) to run: $*"
	fi
}

how="already installed"
if [ ! -x "$CHROMIUM" ]; then
	command -v apt-get >/dev/null 2>&1 || die "$CHROMIUM is missing and apt-get is unavailable: install Chromium yourself"
	as_root apt-get update -q >&2 || die "apt-get update failed"
	candidate=$(apt-cache policy chromium | awk '/Candidate:/ { print $2 }')
	case "$candidate" in
	"" | "(none)") die "package chromium is not available from this machine's apt sources" ;;
	esac
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >&2 ||
		die "apt-get install chromium failed"
	[ -x "$CHROMIUM" ] || die "package chromium installed but $CHROMIUM is missing"
	how=installed
fi
printf 'chromium: %s %s (%s)\n' "$CHROMIUM" "$how" "$("$CHROMIUM" --version 2>/dev/null | head -n 1)"
