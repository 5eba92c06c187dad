package redisx

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// clusterTrouble reports whether a failed command hints that the cluster's
// topology moved, so that the failover watcher should look harder: a node
// that cannot be dialled or dropped the connection, or a cluster-state
// answer (CLUSTERDOWN, MOVED, ASK, TRYAGAIN, LOADING, READONLY). Timeouts
// are not trouble: a caller's own short deadline or a busy box says nothing
// about the topology, and a dead master is still seen by the watcher's
// steady poll.
func clusterTrouble(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed) {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		for _, p := range []string{"CLUSTERDOWN", "MOVED", "ASK", "TRYAGAIN", "LOADING", "READONLY"} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) {
		return true
	}
	var oerr *net.OpError
	if errors.As(err, &oerr) {
		// A read or write that ran out of time is a deadline, not a dead
		// node; a dial that does not complete is.
		return !oerr.Timeout() || oerr.Op == "dial"
	}
	return false
}

// isTimeout reports whether err is a timeout: a deadline of the caller's or
// a dial or read that ran out of time.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var nerr net.Error
	return errors.As(err, &nerr) && nerr.Timeout()
}
