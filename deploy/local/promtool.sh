#!/usr/bin/env bash
# promtool.sh puts promtool, from Debian's package prometheus, at /usr/local/bin/promtool: the
# alert rules' tests run `promtool check rules` and `promtool test rules` on
# deploy/prometheus/ (deploy/prometheus/rules_test.go).
#
# Only that one binary is taken out of the package (apt-get download, dpkg-deb): installing the
# package would also install a Prometheus server that its postinst enables and starts on :9090
# (on a machine with systemd or without a policy-rc.d), a system user and 13 JavaScript packages
# for its web UI, none of which a test needs. promtool is a static Go program.
#
# Idempotent: a machine with promtool on PATH (the package installed by hand, say) is left alone.
# Needs root or passwordless sudo only when it installs. Prints one line on stdout; installer
# output goes to stderr.
set -euo pipefail

readonly TARGET=/usr/local/bin/promtool

# die, as_root
# shellcheck source=deploy/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

how="already installed"
bin=$(command -v promtool || true)
if [ -z "$bin" ]; then
	command -v apt-get >/dev/null 2>&1 || die "promtool not installed and apt-get is unavailable: install Debian's package prometheus (or promtool) yourself"
	as_root apt-get -o DPkg::Lock::Timeout=300 update -q >&2 || die "apt-get update failed"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# apt-get download fetches as the _apt user when it can write the directory.
	chmod 0777 "$tmp"
	(cd "$tmp" && apt-get download -q prometheus >&2) || die "apt-get download prometheus failed"
	deb=$(find "$tmp" -maxdepth 1 -name 'prometheus_*.deb' -print -quit)
	[ -n "$deb" ] || die "apt-get download prometheus left no .deb in $tmp"
	dpkg-deb -x "$deb" "$tmp/root" || die "dpkg-deb -x $deb failed"
	[ -x "$tmp/root/usr/bin/promtool" ] || die "package prometheus ships no usr/bin/promtool"
	as_root install -m 0755 "$tmp/root/usr/bin/promtool" "$TARGET"
	bin=$TARGET
	how="installed from $(basename "$deb")"
fi
printf 'promtool: %s %s (%s)\n' "$bin" "$how" "$("$bin" --version 2>&1 | head -n 1)"
