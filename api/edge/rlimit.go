//go:build unix

package edge

import (
	"log/slog"
	"syscall"
)

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

// RaiseFileLimit raises the process's soft open-file limit to its hard
// limit and returns the soft limit in force afterwards. Go raises it at
// start already on most systems; `marketdata dev` calls this so that what it
// fits MD_MAX_CONNS under is the most the machine allows. A refused raise
// (macOS caps it) leaves the limit as it was.
func RaiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			lim = raised
		}
	}
	return lim.Cur, nil
}
