//go:build unix

package api

import (
	"log/slog"
	"syscall"
)

// fileReserve is what a node needs beside client connections: its
// listeners, Postgres, Redis and NATS connections, the runtime's own.
const fileReserve = 256

// WarnFileLimit (called once at start) warns when maxConns client connections would not fit under
// the process's open-file limit: the node then refuses connections at the
// file limit (and its own dials to Postgres and Redis may fail) before it
// reaches MD_MAX_CONNS. Go raises the soft limit to the hard one at start.
func WarnFileLimit(log *slog.Logger, maxConns int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	if uint64(maxConns)+fileReserve > lim.Cur {
		log.Warn("MD_MAX_CONNS does not fit under the open-file limit: raise the limit (ulimit -n, LimitNOFILE) or lower MD_MAX_CONNS",
			"max_conns", maxConns, "nofile_limit", lim.Cur, "reserve", fileReserve)
	}
}
