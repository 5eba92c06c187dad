# lib.sh: what services.sh and chromium.sh share. Sourced, never run; the sourcing script
# sets -euo pipefail. die names the script that sourced it.

die() {
	printf '%s: %s\n' "${0##*/}" "$*" >&2
	exit 1
}

# as_root runs a command as root: directly when we are root, else through passwordless sudo.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n true 2>/dev/null || die "need root to run: $* (sudo asks for a password; run as root or allow passwordless sudo)"
		sudo -n "$@"
	else
		die "need root (or sudo) to run: $*"
	fi
}

apt_updated=no

# apt_install installs Debian packages, running apt-get update at most once per run. A first
# argument --no-install-recommends is passed to apt-get install (chromium.sh: Chromium's
# recommends pull in about 90 more packages, systemd among them).
apt_install() {
	local opts=()
	if [ "${1:-}" = --no-install-recommends ]; then
		opts=(--no-install-recommends)
		shift
	fi
	command -v apt-get >/dev/null 2>&1 || die "$* not installed and apt-get is unavailable: install it yourself"
	if [ "$apt_updated" = no ]; then
		# A fresh machine may be running unattended-upgrades: wait for its lock.
		as_root apt-get -o DPkg::Lock::Timeout=300 update -q >&2 || die "apt-get update failed"
		apt_updated=yes
	fi
	local pkg candidate
	for pkg in "$@"; do
		candidate=$(apt-cache policy "$pkg" | awk '/Candidate:/ { print $2 }')
		case "$candidate" in
		"" | "(none)") die "package $pkg is not available from this machine's apt sources" ;;
		esac
	done
	as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q "${opts[@]}" "$@" >&2 ||
		die "apt-get install $* failed"
}

