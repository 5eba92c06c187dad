#!/usr/bin/env bash
# lb.sh runs the load-balanced topology on loopback: HAProxy (deploy/haproxy/haproxy.cfg) in
# front of three `marketdata api` nodes, for the balancer's test suite (internal/lbtest) and for
# operators who want to try a rolling restart by hand:
#
#   HAProxy      clients on 127.0.0.1:32480, runtime API on $LB_DIR/haproxy.sock
#   API nodes    api1-api3: HTTP on 127.0.0.1:32481-32483, admin (/readyz) on 32491-32493
#
# The nodes run with the caller's environment (MD_DATABASE_URL, MD_REDIS_URL, ... as for
# `marketdata api`: the local services' addresses when unset; MD_CURSOR_SECRET and MD_KEY_PEPPER
# have no default and must be set), plus their addresses and
# MD_TRUSTED_PROXIES=127.0.0.1/32 (HAProxy connects from 127.0.0.1) unless the caller sets it.
# Ingest and the services are not started here: run `marketdata ingest` (or `make run`) beside.
#
# Subcommands:
#   up                 start HAProxy and every node, wait until HAProxy sees every node up
#   down               stop every node (SIGTERM) and HAProxy
#   status             one line per process, and HAProxy's view of each node
#   stop-node N        take node N (1-3) out of HAProxy (drain: no new request goes to it), then
#                      SIGTERM it and wait until it has exited (it finishes its requests and
#                      closes its streams with 1001)
#   start-node N       start node N again, wait until its /readyz is 200, put it back in HAProxy
#                      and wait until HAProxy has it up
#   restart-node N     stop-node N, then start-node N
#   env                the address clients use (MD_URL=...)
#   install            install HAProxy and socat (Debian's packages) when missing; `make test`
#                      runs it (`make haproxy`)
#
# Environment: LB_DIR (default /tmp/marketdata-lb: pid files, logs, the runtime socket), LB_BIN
# (default bin/marketdata), LB_API_ARGS (more arguments of `marketdata api`, e.g.
# --notice-subject), LB_WAIT_SECONDS (60). Processes are found by their pid files only.
# HAProxy is Debian's package; `up` installs it (apt-get, as deploy/local/services.sh does)
# when it is missing.
set -euo pipefail

PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=deploy/local/lib.sh
source "$here/lib.sh"

readonly DIR=${LB_DIR:-/tmp/marketdata-lb}
readonly BIN=${LB_BIN:-$root/bin/marketdata}
readonly WAIT_SECONDS=${LB_WAIT_SECONDS:-60}
readonly HOST=127.0.0.1
readonly LB_PORT=32480
readonly HTTP_PORTS=(32481 32482 32483)
readonly ADMIN_PORTS=(32491 32492 32493)
readonly SOCK=$DIR/haproxy.sock

pid_alive() {
	local f=$1
	[ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

# answers reports whether something accepts connections on 127.0.0.1:$1.
answers() {
	(exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

node_check() {
	local n=$1
	[ "$n" -ge 1 ] 2>/dev/null && [ "$n" -le ${#HTTP_PORTS[@]} ] || die "node must be 1-${#HTTP_PORTS[@]}, got '$n'"
}

# runtime sends one command to HAProxy's runtime API and prints the answer.
runtime() {
	printf '%s\n' "$1" | socat -t 2 - "UNIX-CONNECT:$SOCK"
}

# drained reports whether HAProxy has node N in drain mode (admin state bit 0x08).
drained() {
	local st
	st=$(runtime "show servers state api_nodes" 2>/dev/null | awk -v s="api$1" '$4 == s { print $7 }')
	[ -n "$st" ] && [ $((st & 8)) -ne 0 ]
}

# haproxy_state prints HAProxy's operational state of node N (UP, DOWN, ...), "" when unknown.
haproxy_state() {
	local n=$1
	[ -S "$SOCK" ] || return 0
	# show servers state: field 4 is the name, field 6 the operational state (2 = running).
	local line
	line=$(printf 'show servers state api_nodes\n' | socat -t 2 - "UNIX-CONNECT:$SOCK" 2>/dev/null | awk -v s="api$n" '$4 == s { print $6 }') || true
	case "$line" in
	2) echo UP ;;
	0) echo DOWN ;;
	"") echo "" ;;
	*) echo "STATE$line" ;;
	esac
}

wait_for() {
	local what=$1
	shift
	local deadline=$((SECONDS + WAIT_SECONDS))
	until "$@"; do
		[ $SECONDS -lt $deadline ] || die "$what: not within ${WAIT_SECONDS}s (logs in $DIR)"
		sleep 0.1
	done
}

node_ready() {
	pid_alive "$DIR/api$1.pid" || die "api$1 exited: $(tail -n 5 "$DIR/api$1.log")"
	ready "${ADMIN_PORTS[$(($1 - 1))]}"
}

ready() {
	[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$HOST:$1/readyz")" = 200 ]
}

haproxy_listening() {
	pid_alive "$DIR/haproxy.pid" || die "haproxy exited: $(tail -n 5 "$DIR/haproxy.log")"
	answers $LB_PORT
}

up_in_haproxy() { [ "$(haproxy_state "$1")" = UP ]; }

start_node() {
	local n=$1 i=$(($1 - 1))
	local pidf=$DIR/api$n.pid
	if pid_alive "$pidf"; then
		echo "api$n: running (pid $(cat "$pidf"))"
		return
	fi
	answers "${HTTP_PORTS[$i]}" && die "127.0.0.1:${HTTP_PORTS[$i]} answers, but not for a node of $DIR: stop it first"
	[ -x "$BIN" ] || die "no marketdata binary at $BIN (make build, or set LB_BIN)"
	local args=()
	read -r -a args <<<"${LB_API_ARGS:-}"
	MD_HTTP_ADDR=$HOST:${HTTP_PORTS[$i]} MD_ADMIN_ADDR=$HOST:${ADMIN_PORTS[$i]} \
		MD_TRUSTED_PROXIES=${MD_TRUSTED_PROXIES:-127.0.0.1/32} \
		setsid "$BIN" api "${args[@]}" >>"$DIR/api$n.log" 2>&1 </dev/null &
	echo $! >"$pidf"
	wait_for "api$n ready (/readyz on ${ADMIN_PORTS[$i]})" node_ready "$n"
	if pid_alive "$DIR/haproxy.pid"; then
		runtime "set server api_nodes/api$n state ready" >/dev/null
		wait_for "HAProxy sees api$n up" up_in_haproxy "$n"
	fi
	echo "api$n: up on $HOST:${HTTP_PORTS[$i]} (admin ${ADMIN_PORTS[$i]}, pid $(cat "$pidf"))"
}

stop_node() {
	local n=$1
	local pidf=$DIR/api$n.pid
	if ! pid_alive "$pidf"; then
		rm -f "$pidf"
		echo "api$n: not running"
		return
	fi
	if pid_alive "$DIR/haproxy.pid"; then
		# Out of the balancer first: no request is sent to a node that is closing, so the
		# balancer never has to retry one that reached it (haproxy.cfg, "Retries").
		runtime "set server api_nodes/api$n state drain" >/dev/null
		wait_for "HAProxy drains api$n" drained "$n"
	fi
	local pid
	pid=$(cat "$pidf")
	kill -TERM "$pid"
	local deadline=$((SECONDS + WAIT_SECONDS))
	while kill -0 "$pid" 2>/dev/null; do
		if [ $SECONDS -ge $deadline ]; then
			kill -KILL "$pid" 2>/dev/null || true
			die "api$n did not exit within ${WAIT_SECONDS}s of SIGTERM; killed"
		fi
		sleep 0.05
	done
	rm -f "$pidf"
	echo "api$n: stopped"
}

install_tools() {
	local missing=()
	command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
	command -v socat >/dev/null 2>&1 || missing+=(socat)
	if [ ${#missing[@]} -gt 0 ]; then
		apt_install "${missing[@]}"
	fi
}

start_haproxy() {
	if pid_alive "$DIR/haproxy.pid"; then
		echo "haproxy: running (pid $(cat "$DIR/haproxy.pid"))"
		return
	fi
	install_tools
	answers $LB_PORT && die "127.0.0.1:$LB_PORT answers, but not for the HAProxy of $DIR: stop it first"
	local i
	local env=(LB_BIND=$HOST:$LB_PORT LB_STATS_SOCKET=$SOCK LB_ERRORS=$root/deploy/haproxy/errors)
	for i in 1 2 3; do
		env+=("LB_API$i=$HOST:${HTTP_PORTS[$((i - 1))]}" "LB_API${i}_CHECK_PORT=${ADMIN_PORTS[$((i - 1))]}")
	done
	env "${env[@]}" haproxy -c -q -f "$root/deploy/haproxy/haproxy.cfg" || die "deploy/haproxy/haproxy.cfg does not check"
	# -db: stay in the foreground (this script backgrounds it and keeps its pid).
	env "${env[@]}" setsid haproxy -db -f "$root/deploy/haproxy/haproxy.cfg" >>"$DIR/haproxy.log" 2>&1 </dev/null &
	echo $! >"$DIR/haproxy.pid"
	wait_for "HAProxy listening on $LB_PORT" haproxy_listening
	echo "haproxy: listening on $HOST:$LB_PORT (pid $(cat "$DIR/haproxy.pid"))"
}

stop_haproxy() {
	local pidf=$DIR/haproxy.pid
	if pid_alive "$pidf"; then
		local pid
		pid=$(cat "$pidf")
		kill -TERM "$pid"
		wait_for "HAProxy stopped" bash -c "! kill -0 $pid 2>/dev/null"
		echo "haproxy: stopped"
	fi
	rm -f "$pidf" "$SOCK"
}

cmd=${1:-}
[ "$cmd" = install ] || mkdir -p "$DIR"
case "$cmd" in
up)
	start_haproxy
	for n in 1 2 3; do start_node $n; done
	;;
down)
	for n in 1 2 3; do stop_node $n; done
	stop_haproxy
	;;
status)
	if pid_alive "$DIR/haproxy.pid"; then echo "haproxy: pid $(cat "$DIR/haproxy.pid")"; else echo "haproxy: down"; fi
	for n in 1 2 3; do
		if pid_alive "$DIR/api$n.pid"; then s="pid $(cat "$DIR/api$n.pid")"; else s=down; fi
		echo "api$n: $s; haproxy says ${s:+$(haproxy_state $n)}"
	done
	;;
stop-node)
	node_check "${2:-}"
	stop_node "$2"
	;;
start-node)
	node_check "${2:-}"
	start_node "$2"
	;;
restart-node)
	node_check "${2:-}"
	stop_node "$2"
	start_node "$2"
	;;
env)
	echo "MD_URL=http://$HOST:$LB_PORT"
	;;
install)
	install_tools
	echo "haproxy: $(haproxy -v | head -n 1)"
	;;
*)
	die "usage: lb.sh up|down|status|stop-node N|start-node N|restart-node N|env|install"
	;;
esac
