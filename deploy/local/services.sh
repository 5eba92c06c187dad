#!/usr/bin/env bash
# services.sh makes the services that marketdata's default configuration points at answer on
# this machine (Debian 12): PostgreSQL on 127.0.0.1:5432 (trust for user postgres), Redis on
# 127.0.0.1:6379 and NATS with JetStream on 127.0.0.1:4222 (monitoring on 127.0.0.1:8222).
#
# Idempotent: a service that already answers is left alone. One that is installed but down is
# started; one that is missing is installed with apt-get first. Never uses systemctl, because
# containers and CI machines run without systemd. Prints one line per service on stdout;
# installer output goes to stderr.
set -euo pipefail

# Non-root shells often lack the sbin directories where nats-server and start-stop-daemon live.
PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin

readonly PG_PORT=5432
readonly PG_DB=${MD_LOCAL_DB:-marketdata}
readonly REDIS_PORT=6379
readonly REDIS_DIR=/var/lib/redis
readonly REDIS_LOG=/var/log/redis/ci.log
readonly NATS_PORT=4222
readonly NATS_MON_PORT=8222
readonly NATS_DIR=/var/lib/nats-server
readonly NATS_LOG=/var/log/nats-server.log
readonly NATS_PID=/run/nats-server-local.pid
readonly WAIT_SECONDS=${SERVICES_WAIT_SECONDS:-30}

# die, as_root, apt_install
# shellcheck source=deploy/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# wait_for retries a probe until it succeeds or WAIT_SECONDS pass, then fails naming the service.
wait_for() {
	local name=$1 hint=$2
	shift 2
	local deadline=$((SECONDS + WAIT_SECONDS))
	until "$@"; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			die "$name did not answer within ${WAIT_SECONDS}s; see $hint"
		fi
		sleep 0.5
	done
}

# ---------------------------------------------------------------- PostgreSQL

pg_answers() {
	command -v pg_isready >/dev/null 2>&1 && pg_isready -q -h 127.0.0.1 -p "$PG_PORT" -t 2
}

# pg_psql runs psql as user postgres over TCP with no password source at all, so it succeeds
# only when 127.0.0.1 really trusts postgres (a ~/.pgpass or PGPASSWORD must not hide that).
pg_psql() {
	env -u PGPASSWORD PGPASSFILE=/nonexistent/.pgpass PGCONNECT_TIMEOUT=3 \
		psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -w -X -q -t -A -v ON_ERROR_STOP=1 "$@"
}

pg_trusts() {
	pg_psql -d postgres -c 'SELECT 1' >/dev/null 2>&1
}

# pg_cluster prints "VERSION NAME" of the Debian cluster configured on PG_PORT, if any.
pg_cluster() {
	command -v pg_lsclusters >/dev/null 2>&1 || return 0
	pg_lsclusters -h 2>/dev/null | awk -v port="$PG_PORT" '$3 == port { print $1, $2; exit }'
}

pg_ctl() {
	as_root pg_ctlcluster --skip-systemctl-redirect "$@"
}

# pg_add_trust puts trust rules for 127.0.0.1 and ::1 at the top of the cluster's pg_hba.conf
# (the first matching line wins), once, and reloads the cluster.
pg_add_trust() {
	local version=$1 name=$2
	local hba=/etc/postgresql/$version/$name/pg_hba.conf
	local marker='# marketdata deploy/local/services.sh: local development only'
	as_root test -f "$hba" || die "PostgreSQL: $hba not found"
	if ! as_root grep -qF "$marker" "$hba"; then
		local tmp
		tmp=$(mktemp)
		{
			printf '%s\n' "$marker"
			printf 'host    all    all    127.0.0.1/32    trust\n'
			printf 'host    all    all    ::1/128         trust\n'
			as_root cat "$hba"
		} >"$tmp"
		as_root cp "$tmp" "$hba"
		rm -f "$tmp"
	fi
	pg_ctl "$version" "$name" reload >&2 || die "PostgreSQL: reload of cluster $version/$name failed"
}

ensure_postgres() {
	local how="already answering" cluster version name
	if ! pg_answers; then
		how=started
		if ! command -v pg_ctlcluster >/dev/null 2>&1 || ! command -v pg_isready >/dev/null 2>&1; then
			apt_install postgresql
			how="installed and started"
		fi
		cluster=$(pg_cluster)
		if [ -z "$cluster" ]; then
			if [ -n "$(pg_lsclusters -h 2>/dev/null)" ]; then
				die "PostgreSQL: clusters exist but none is on port $PG_PORT (pg_lsclusters); move one or free the port"
			fi
			# shellcheck disable=SC2012 # version directories are plain numbers
			version=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1 || true)
			[ -n "$version" ] || die "PostgreSQL: no server version under /usr/lib/postgresql"
			as_root pg_createcluster --port "$PG_PORT" "$version" main >&2 ||
				die "PostgreSQL: pg_createcluster $version main failed"
			cluster="$version main"
		fi
		read -r version name <<<"$cluster"
		# The package's postinst may already have started it; start only what is down.
		if ! pg_answers && ! pg_ctl "$version" "$name" status >/dev/null 2>&1; then
			pg_ctl "$version" "$name" start >&2 ||
				die "PostgreSQL: could not start cluster $version/$name; see /var/log/postgresql/postgresql-$version-$name.log"
		fi
		wait_for PostgreSQL "/var/log/postgresql/postgresql-$version-$name.log" pg_answers
	fi

	command -v psql >/dev/null 2>&1 || die "PostgreSQL answers on 127.0.0.1:$PG_PORT but psql is missing (apt-get install postgresql-client)"
	if ! pg_trusts; then
		cluster=$(pg_cluster)
		[ -n "$cluster" ] || die "PostgreSQL on 127.0.0.1:$PG_PORT refuses user postgres without a password, and it is not a Debian cluster this script can configure: allow trust for 127.0.0.1 yourself"
		read -r version name <<<"$cluster"
		pg_add_trust "$version" "$name"
		wait_for "PostgreSQL trust auth" "/etc/postgresql/$version/$name/pg_hba.conf" pg_trusts
		how="$how, trust auth configured"
	fi

	# The default MD_DATABASE_URL names this database; tests create their own.
	if [ -z "$(pg_psql -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" ]; then
		# A concurrent run may win the race; only its absence afterwards is an error.
		pg_psql -d postgres -c "CREATE DATABASE \"$PG_DB\"" >/dev/null 2>&1 ||
			[ -n "$(pg_psql -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" ] ||
			die "PostgreSQL: could not create database $PG_DB"
		how="$how, database $PG_DB created"
	fi
	local server_version
	server_version=$(pg_psql -d postgres -c 'SHOW server_version')
	printf 'postgresql: 127.0.0.1:%s %s (v%s, trust for postgres, database %s)\n' \
		"$PG_PORT" "$how" "${server_version%% *}" "$PG_DB"
}

# ---------------------------------------------------------------- Redis

redis_answers() {
	command -v redis-cli >/dev/null 2>&1 &&
		[ "$(timeout 3 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]
}

ensure_redis() {
	local how="already answering"
	if ! redis_answers; then
		how=started
		if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
			apt_install redis-server
			how="installed and started"
		fi
		# The package's postinst may already have started it.
		if ! redis_answers; then
			as_root mkdir -p "$REDIS_DIR" "$(dirname "$REDIS_LOG")"
			# A cache only: no RDB snapshots, no AOF. "-::1" binds IPv6 only where it exists.
			as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" \
				--save "" --appendonly no --dir "$REDIS_DIR" --logfile "$REDIS_LOG" >&2 ||
				die "Redis: redis-server failed to start; see $REDIS_LOG"
		fi
		wait_for Redis "$REDIS_LOG" redis_answers
	fi
	local version
	version=$(timeout 3 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" info server | tr -d '\r' |
		awk -F: '$1 == "redis_version" { print $2 }')
	printf 'redis: 127.0.0.1:%s %s (v%s)\n' "$REDIS_PORT" "$how" "$version"
}

# ---------------------------------------------------------------- NATS

# nats_info prints the INFO line a NATS server sends first on every client connection.
nats_info() {
	# shellcheck disable=SC2016 # $1 expands in the inner shell, where the port is passed
	timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && IFS= read -r line <&3 && printf "%s\n" "$line"' \
		_ "$NATS_PORT" 2>/dev/null
}

nats_answers() {
	local info
	info=$(nats_info) || return 1
	case "$info" in INFO*) ;; *) return 1 ;; esac
}

nats_monitor_answers() {
	curl -sf -m 3 -o /dev/null "http://127.0.0.1:$NATS_MON_PORT/healthz?js-enabled-only=true"
}

ensure_nats() {
	local how="already answering"
	if ! nats_answers; then
		how=started
		if ! command -v nats-server >/dev/null 2>&1; then
			apt_install nats-server
			how="installed and started"
		fi
		if ! nats_answers; then
			as_root mkdir -p "$NATS_DIR"
			# The pid file makes --oknodo skip only our own live server, not any nats-server.
			as_root start-stop-daemon --start --oknodo --background \
				--pidfile "$NATS_PID" --make-pidfile --exec "$(command -v nats-server)" -- \
				-a 127.0.0.1 -p "$NATS_PORT" -m "$NATS_MON_PORT" -js -sd "$NATS_DIR" -l "$NATS_LOG" >&2 ||
				die "NATS: start-stop-daemon could not start nats-server"
		fi
		wait_for "NATS" "$NATS_LOG" nats_answers
	fi

	local info version monitor
	info=$(nats_info) || die "NATS stopped answering on 127.0.0.1:$NATS_PORT; see $NATS_LOG"
	case "$info" in
	*'"jetstream":true'*) ;;
	*) die "NATS on 127.0.0.1:$NATS_PORT runs without JetStream: restart it with -js (see $NATS_LOG)" ;;
	esac
	version=$(sed -n 's/.*"version":"\([^"]*\)".*/\1/p' <<<"$info")
	if nats_monitor_answers; then
		monitor="monitoring on 127.0.0.1:$NATS_MON_PORT"
	else
		monitor="monitoring off: the server was started without -m $NATS_MON_PORT"
	fi
	local note=""
	# Debian 12 packages 2.9.x: JetStream works, but 2.10 features (several filter subjects per
	# consumer, subject transforms, stream compression, metadata) answer with errors.
	case "$version" in
	2.[0-9].* | 1.* | 0.*) note="; older than 2.10, so 2.10-only JetStream features are unavailable" ;;
	esac
	printf 'nats: 127.0.0.1:%s %s (v%s, JetStream on, %s%s)\n' "$NATS_PORT" "$how" "$version" "$monitor" "$note"
}

ensure_postgres
ensure_redis
ensure_nats
