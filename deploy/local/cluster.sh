#!/usr/bin/env bash
# cluster.sh runs marketdata's cluster topology on loopback, for the cluster test suite
# (internal/clustertest) and for operators who want to try failovers by hand:
#
#   Redis Cluster   3 masters + 3 replicas on 127.0.0.1:32001-32006, cluster bus on 32011-32016
#                   (not the default port+10000: 42001-42006 lie in Linux's ephemeral range,
#                   where any outgoing connection may hold them)
#   NATS            3 servers with JetStream, clients on 32221-32223, routes on 32248-32250
#   PostgreSQL      primary on 32432, streaming replica on 32433 (trust for user postgres)
#
# Everything lives under CLUSTER_DIR (default /tmp/marketdata-cluster): data, configs, logs and
# pid files. Processes are found by their pid files only, so nothing else on the machine is
# touched. These ports are not the shared services' (6379, 4222, 5432).
#
# Subcommands:
#   up                         start every node (idempotent: what answers is left alone)
#   down [--purge]             stop every node; --purge removes CLUSTER_DIR too
#   status                     one line per node
#   wait                       wait until every node is back: cluster_state:ok with 3 masters and
#                              3 attached replicas, JetStream on every NATS server, the replica
#                              streaming
#   env                        the MD_* variables that point marketdata at the topology
#   kill-redis PORT            SIGKILL one Redis node
#   stop-redis PORT            SHUTDOWN NOSAVE one Redis node
#   start-redis PORT           start one Redis node again (it rejoins with its nodes.conf)
#   kill-nats PORT|NAME        SIGKILL one NATS server (client port or server name n1..n3)
#   start-nats PORT|NAME       start one NATS server again
#   stop-pg-replica            fast shutdown of the replica
#   start-pg-replica           start the replica again
#   stop-pg-primary            fast shutdown of the primary
#   start-pg-primary           start the primary again
#
# Environment: CLUSTER_DIR, PG_BIN (default: the newest /usr/lib/postgresql/*/bin),
# REDIS_NODE_TIMEOUT (cluster-node-timeout in ms, default 2000), CLUSTER_WAIT_SECONDS (60).
# Needs redis-server, redis-cli, nats-server and PostgreSQL's server binaries. Postgres refuses
# to run as root: as root, it runs as user postgres through runuser.
set -euo pipefail

PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin

readonly DIR=${CLUSTER_DIR:-/tmp/marketdata-cluster}
readonly REDIS_PORTS=(32001 32002 32003 32004 32005 32006)
readonly NATS_PORTS=(32221 32222 32223)
readonly NATS_ROUTE_PORTS=(32248 32249 32250)
readonly PG_PRIMARY_PORT=32432
readonly PG_REPLICA_PORT=32433
readonly REDIS_NODE_TIMEOUT=${REDIS_NODE_TIMEOUT:-2000}
readonly WAIT_SECONDS=${CLUSTER_WAIT_SECONDS:-60}
readonly HOST=127.0.0.1

die() {
	printf 'cluster.sh: %s\n' "$*" >&2
	exit 1
}

# taken refuses a port that answers for a process this CLUSTER_DIR did not start.
taken() {
	die "$1 answers, but not for a node of $DIR (another CLUSTER_DIR's topology, or another program): stop it first"
}

say() {
	printf '%s\n' "$*"
}

need() {
	local b
	for b in "$@"; do
		command -v "$b" >/dev/null 2>&1 || die "$b not found in PATH (apt-get install redis-server nats-server postgresql)"
	done
}

pg_bin() {
	if [ -n "${PG_BIN:-}" ]; then
		printf '%s\n' "$PG_BIN"
		return
	fi
	local v
	# shellcheck disable=SC2012 # version directories are plain numbers
	v=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1 || true)
	if [ -n "$v" ] && [ -x "/usr/lib/postgresql/$v/bin/initdb" ]; then
		printf '/usr/lib/postgresql/%s/bin\n' "$v"
	elif command -v pg_config >/dev/null 2>&1; then
		pg_config --bindir
	else
		die "PostgreSQL server binaries not found: set PG_BIN"
	fi
}

# wait_for retries a probe until it succeeds or WAIT_SECONDS pass.
wait_for() {
	local what=$1
	shift
	local deadline=$((SECONDS + WAIT_SECONDS))
	until "$@"; do
		[ "$SECONDS" -lt "$deadline" ] || die "$what not reached within ${WAIT_SECONDS}s (logs under $DIR)"
		sleep 0.2
	done
}

# alive tells whether the process of a pid file runs.
alive() {
	local pidfile=$1 pid
	[ -f "$pidfile" ] || return 1
	pid=$(cat "$pidfile" 2>/dev/null) || return 1
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# kill_pidfile sends a signal to the process of a pid file and, for TERM, waits for it to end.
kill_pidfile() {
	local pidfile=$1 sig=$2 pid
	alive "$pidfile" || return 0
	pid=$(cat "$pidfile")
	kill "-$sig" "$pid" 2>/dev/null || true
	local deadline=$((SECONDS + 15))
	while kill -0 "$pid" 2>/dev/null; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			kill -KILL "$pid" 2>/dev/null || true
		fi
		sleep 0.1
	done
	rm -f "$pidfile"
}

# ---------------------------------------------------------------- Redis Cluster

rcli() {
	local port=$1
	shift
	timeout 5 redis-cli -h "$HOST" -p "$port" "$@" 2>/dev/null | tr -d '\r'
}

redis_pidfile() { printf '%s/redis/%s/redis.pid\n' "$DIR" "$1"; }

redis_answers() { [ "$(rcli "$1" ping)" = PONG ]; }

redis_state_ok() { rcli "$1" cluster info | grep -qx 'cluster_state:ok'; }

redis_all_ok() {
	local p
	for p in "${REDIS_PORTS[@]}"; do
		alive "$(redis_pidfile "$p")" || continue
		redis_state_ok "$p" || return 1
	done
}

check_redis_port() {
	local p
	for p in "${REDIS_PORTS[@]}"; do
		[ "$p" = "$1" ] && return 0
	done
	die "$1 is not a Redis port of the topology (${REDIS_PORTS[*]})"
}

start_redis() {
	local port=$1 d="$DIR/redis/$1"
	check_redis_port "$port"
	if redis_answers "$port"; then
		alive "$d/redis.pid" && return 0
		taken "$HOST:$port"
	fi
	mkdir -p "$d"
	# A cache only: no RDB snapshots, no AOF. The node keeps its identity in nodes.conf.
	redis-server --port "$port" --cluster-port $((port + 10)) --bind "$HOST" --daemonize yes \
		--dir "$d" --pidfile "$d/redis.pid" --logfile "$d/redis.log" \
		--cluster-enabled yes --cluster-config-file nodes.conf \
		--cluster-node-timeout "$REDIS_NODE_TIMEOUT" \
		--save "" --appendonly no --protected-mode no --repl-diskless-sync-delay 0 >/dev/null ||
		die "redis-server on $port did not start; see $d/redis.log"
	wait_for "Redis $port answering" redis_answers "$port"
}

up_redis() {
	local p created=no
	for p in "${REDIS_PORTS[@]}"; do
		start_redis "$p"
	done
	# A node that knows only itself has never joined: create the cluster once.
	if [ "$(rcli "${REDIS_PORTS[0]}" cluster info | awk -F: '$1 == "cluster_known_nodes" { print $2 }')" = 1 ]; then
		local addrs=()
		for p in "${REDIS_PORTS[@]}"; do
			addrs+=("$HOST:$p")
		done
		redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$DIR/redis/create.log" 2>&1 ||
			die "redis-cli --cluster create failed; see $DIR/redis/create.log"
		created=yes
	fi
	wait_for "cluster_state:ok on every Redis node" redis_all_ok
	# Every master needs its replica attached before a failover can be tried.
	wait_for "3 masters with one replica each" redis_replicas_attached
	say "redis: cluster ok on $HOST:${REDIS_PORTS[0]}-${REDIS_PORTS[5]} (created: $created, cluster-node-timeout ${REDIS_NODE_TIMEOUT}ms)"
}

# redis_replicas_attached tells whether 3 masters serve slots and 3 replicas have finished
# syncing (master_link_status:up): a replica still syncing cannot be promoted.
redis_replicas_attached() {
	local nodes p synced=0
	nodes=$(rcli "${REDIS_PORTS[0]}" cluster nodes) || return 1
	[ "$(awk '$3 ~ /master/ && $3 !~ /fail/ && $9 != "" { n++ } END { print n + 0 }' <<<"$nodes")" = 3 ] || return 1
	[ "$(awk '$3 ~ /slave/ && $3 !~ /fail/ && $8 == "connected" { n++ } END { print n + 0 }' <<<"$nodes")" = 3 ] || return 1
	for p in "${REDIS_PORTS[@]}"; do
		if rcli "$p" info replication | grep -qx 'master_link_status:up'; then
			synced=$((synced + 1))
		fi
	done
	[ "$synced" = 3 ]
}

status_redis() {
	local p role state
	for p in "${REDIS_PORTS[@]}"; do
		if redis_answers "$p"; then
			role=$(rcli "$p" info replication | awk -F: '$1 == "role" { print $2 }')
			state=$(rcli "$p" cluster info | awk -F: '$1 == "cluster_state" { print $2 }')
			say "redis $HOST:$p up role=$role cluster_state=$state"
		else
			say "redis $HOST:$p down"
		fi
	done
}

# ---------------------------------------------------------------- NATS

nats_name() {
	case "$1" in
	n1 | 32221) echo n1 ;;
	n2 | 32222) echo n2 ;;
	n3 | 32223) echo n3 ;;
	*) die "$1 is not a NATS server of the topology (n1..n3 or ${NATS_PORTS[*]})" ;;
	esac
}

nats_index() { echo $((${1#n} - 1)); }

nats_info() {
	# shellcheck disable=SC2016 # $1 expands in the inner shell
	timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && IFS= read -r line <&3 && printf "%s\n" "$line"' \
		_ "$1" 2>/dev/null
}

nats_answers() {
	case "$(nats_info "$1")" in INFO*) return 0 ;; *) return 1 ;; esac
}

nats_config() {
	local name=$1 i
	i=$(nats_index "$name")
	local d="$DIR/nats/$name"
	mkdir -p "$d/js"
	cat >"$d/nats.conf" <<EOF
server_name: $name
listen: $HOST:${NATS_PORTS[$i]}
jetstream {
  store_dir: "$d/js"
  max_memory_store: 256MB
  max_file_store: 2GB
}
cluster {
  name: marketdata-test
  listen: $HOST:${NATS_ROUTE_PORTS[$i]}
  routes: [
    nats-route://$HOST:${NATS_ROUTE_PORTS[0]}
    nats-route://$HOST:${NATS_ROUTE_PORTS[1]}
    nats-route://$HOST:${NATS_ROUTE_PORTS[2]}
  ]
}
EOF
}

start_nats() {
	local name i d
	name=$(nats_name "$1")
	i=$(nats_index "$name")
	d="$DIR/nats/$name"
	if nats_answers "${NATS_PORTS[$i]}"; then
		alive "$d/nats.pid" && return 0
		taken "$HOST:${NATS_PORTS[$i]}"
	fi
	nats_config "$name"
	# setsid: the server must not die with the shell that started it.
	setsid nats-server -c "$d/nats.conf" -P "$d/nats.pid" -l "$d/nats.log" </dev/null >/dev/null 2>&1 &
	wait_for "NATS $name answering" nats_answers "${NATS_PORTS[$i]}"
}

# nats_js_info asks one server for the account's JetStream info ($JS.API.INFO) over the plain
# client protocol and prints the answer.
nats_js_info() {
	# shellcheck disable=SC2016 # $1 expands in the inner shell
	timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf "CONNECT {\"verbose\":false,\"pedantic\":false}\r\nSUB _INBOX.cluster 1\r\nPUB \$JS.API.INFO _INBOX.cluster 0\r\n\r\n" >&3
		while IFS= read -r line <&3; do
			case "$line" in MSG*) IFS= read -r body <&3 && printf "%s\n" "$body"; exit 0 ;; esac
		done
		exit 1' _ "$1" 2>/dev/null
}

# nats_js_ready tells whether every server answers JetStream requests (a metadata leader exists).
nats_js_ready() {
	local p info
	for p in "${NATS_PORTS[@]}"; do
		info=$(nats_js_info "$p") || return 1
		case "$info" in *account_info_response*) ;; *) return 1 ;; esac
		case "$info" in *'"error"'*) return 1 ;; esac
	done
}

up_nats() {
	local n
	for n in n1 n2 n3; do
		start_nats "$n"
	done
	wait_for "JetStream answering on every NATS server" nats_js_ready
	say "nats: 3 servers with JetStream on $HOST:${NATS_PORTS[0]}-${NATS_PORTS[2]} (routes ${NATS_ROUTE_PORTS[0]}-${NATS_ROUTE_PORTS[2]})"
}

status_nats() {
	local n i
	for n in n1 n2 n3; do
		i=$(nats_index "$n")
		if nats_answers "${NATS_PORTS[$i]}"; then
			say "nats $n $HOST:${NATS_PORTS[$i]} up"
		else
			say "nats $n $HOST:${NATS_PORTS[$i]} down"
		fi
	done
}

# ---------------------------------------------------------------- PostgreSQL

# as_pg runs a command as user postgres when we are root (Postgres refuses root).
as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

pg_dir() { printf '%s/pg/%s\n' "$DIR" "$1"; }

pg_answers() { "$(pg_bin)/pg_isready" -q -h "$HOST" -p "$1" -t 2; }

pg_start() {
	local which=$1 port=$2 d
	d=$(pg_dir "$which")
	if pg_answers "$port"; then
		[ -f "$d/postmaster.pid" ] && return 0
		taken "$HOST:$port"
	fi
	as_pg "$(pg_bin)/pg_ctl" -D "$d" -l "$DIR/pg/$which.log" -w -t "$WAIT_SECONDS" start >/dev/null ||
		die "PostgreSQL $which did not start; see $DIR/pg/$which.log"
}

pg_stop() {
	local which=$1 d
	d=$(pg_dir "$which")
	[ -f "$d/postmaster.pid" ] || return 0
	as_pg "$(pg_bin)/pg_ctl" -D "$d" -m fast -w -t "$WAIT_SECONDS" stop >/dev/null || true
}

psql_at() {
	local port=$1
	shift
	PGCONNECT_TIMEOUT=3 "$(pg_bin)/psql" -h "$HOST" -p "$port" -U postgres -w -X -q -t -A -v ON_ERROR_STOP=1 "$@"
}

pg_replica_streaming() {
	[ "$(psql_at "$PG_PRIMARY_PORT" -d postgres -c "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'" 2>/dev/null)" = 1 ]
}

up_pg() {
	local bin primary replica
	bin=$(pg_bin)
	primary=$(pg_dir primary)
	replica=$(pg_dir replica)
	mkdir -p "$DIR/pg"
	# The postgres user must reach its directories under a root-owned temp dir.
	chmod 755 "$DIR"
	[ "$(id -u)" -ne 0 ] || chown postgres: "$DIR/pg"
	if [ ! -f "$primary/PG_VERSION" ]; then
		as_pg "$bin/initdb" -D "$primary" -U postgres --auth=trust -E UTF8 --no-sync >"$DIR/pg/initdb.log" 2>&1 ||
			die "initdb failed; see $DIR/pg/initdb.log"
		cat >>"$primary/postgresql.conf" <<EOF
# marketdata deploy/local/cluster.sh: a throwaway test primary
port = $PG_PRIMARY_PORT
listen_addresses = '$HOST'
unix_socket_directories = '$DIR/pg'
wal_level = replica
max_wal_senders = 5
hot_standby = on
fsync = off
full_page_writes = off
synchronous_commit = off
shared_buffers = 32MB
max_connections = 200
EOF
		printf 'host    replication    postgres    127.0.0.1/32    trust\n' >>"$primary/pg_hba.conf"
	fi
	pg_start primary "$PG_PRIMARY_PORT"
	# Before the base backup, so that the replica has it from its first start.
	if [ -z "$(psql_at "$PG_PRIMARY_PORT" -d postgres -c "SELECT 1 FROM pg_database WHERE datname = 'marketdata'")" ]; then
		psql_at "$PG_PRIMARY_PORT" -d postgres -c 'CREATE DATABASE marketdata' >/dev/null
	fi
	if [ ! -f "$replica/PG_VERSION" ]; then
		as_pg "$bin/pg_basebackup" -h "$HOST" -p "$PG_PRIMARY_PORT" -U postgres -D "$replica" -R -X stream -c fast \
			>"$DIR/pg/basebackup.log" 2>&1 || die "pg_basebackup failed; see $DIR/pg/basebackup.log"
		printf 'port = %s\n' "$PG_REPLICA_PORT" >>"$replica/postgresql.conf"
	fi
	pg_start replica "$PG_REPLICA_PORT"
	wait_for "the replica streaming from the primary" pg_replica_streaming
	say "postgres: primary $HOST:$PG_PRIMARY_PORT, streaming replica $HOST:$PG_REPLICA_PORT (database marketdata)"
}

status_pg() {
	local which port rec
	for which in primary replica; do
		port=$PG_PRIMARY_PORT
		[ "$which" = primary ] || port=$PG_REPLICA_PORT
		if pg_answers "$port"; then
			rec=$(psql_at "$port" -d postgres -c 'SELECT pg_is_in_recovery()' 2>/dev/null || echo '?')
			say "postgres $which $HOST:$port up in_recovery=$rec"
		else
			say "postgres $which $HOST:$port down"
		fi
	done
}

# ---------------------------------------------------------------- commands

cmd_up() {
	need redis-server redis-cli nats-server
	[ -x "$(pg_bin)/initdb" ] || die "initdb not found in $(pg_bin)"
	mkdir -p "$DIR/redis" "$DIR/nats"
	up_redis
	up_nats
	up_pg
}

cmd_down() {
	local p n
	for p in "${REDIS_PORTS[@]}"; do
		kill_pidfile "$(redis_pidfile "$p")" TERM
	done
	for n in n1 n2 n3; do
		kill_pidfile "$DIR/nats/$n/nats.pid" TERM
	done
	pg_stop replica
	pg_stop primary
	if [ "${1:-}" = --purge ]; then
		rm -rf "$DIR"
		say "down; removed $DIR"
	else
		say "down (data kept in $DIR; down --purge removes it)"
	fi
}

cmd_env() {
	local redis="" nats="" p
	for p in "${REDIS_PORTS[@]}"; do
		redis+="${redis:+,}$HOST:$p"
	done
	for p in "${NATS_PORTS[@]}"; do
		nats+="${nats:+,}nats://$HOST:$p"
	done
	say "MD_REDIS_URL=$redis"
	say "MD_NATS_URL=$nats"
	say "MD_DATABASE_URL=postgres://postgres@$HOST:$PG_PRIMARY_PORT/marketdata?sslmode=disable"
	say "MD_DATABASE_READ_URL=postgres://postgres@$HOST:$PG_REPLICA_PORT/marketdata?sslmode=disable"
	say "MD_STREAM_REPLICAS=3"
}

main() {
	local cmd=${1:-}
	[ $# -eq 0 ] || shift
	case "$cmd" in
	up) cmd_up ;;
	down) cmd_down "$@" ;;
	status)
		status_redis
		status_nats
		status_pg
		;;
	env) cmd_env ;;
	wait)
		wait_for "cluster_state:ok on every Redis node" redis_all_ok
		wait_for "3 Redis masters with one replica each" redis_replicas_attached
		wait_for "JetStream answering on every NATS server" nats_js_ready
		wait_for "the Postgres replica streaming from the primary" pg_replica_streaming
		say "all nodes up"
		;;
	kill-redis)
		check_redis_port "${1:?kill-redis PORT}"
		kill_pidfile "$(redis_pidfile "$1")" KILL
		;;
	stop-redis)
		check_redis_port "${1:?stop-redis PORT}"
		rcli "$1" shutdown nosave >/dev/null || true
		wait_for "Redis $1 gone" bash -c "! timeout 2 redis-cli -h $HOST -p $1 ping >/dev/null 2>&1"
		;;
	start-redis) start_redis "${1:?start-redis PORT}" ;;
	kill-nats)
		kill_pidfile "$DIR/nats/$(nats_name "${1:?kill-nats PORT|NAME}")/nats.pid" KILL
		;;
	start-nats) start_nats "${1:?start-nats PORT|NAME}" ;;
	stop-pg-replica) pg_stop replica ;;
	start-pg-replica) pg_start replica "$PG_REPLICA_PORT" ;;
	stop-pg-primary) pg_stop primary ;;
	start-pg-primary) pg_start primary "$PG_PRIMARY_PORT" ;;
	*) die "usage: cluster.sh up|down [--purge]|status|env|wait|kill-redis PORT|stop-redis PORT|start-redis PORT|kill-nats PORT|start-nats PORT|stop-pg-replica|start-pg-replica|stop-pg-primary|start-pg-primary" ;;
	esac
}

main "$@"
