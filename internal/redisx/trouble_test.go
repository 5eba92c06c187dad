package redisx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// replyError is an error answer of a Redis server, as go-redis returns it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

// TestClusterTrouble: only errors that hint at a moved topology make the
// failover watcher look harder; deadlines, cancels and ordinary answers do
// not.
func TestClusterTrouble(t *testing.T) {
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"redis.Nil", redis.Nil, false},
		{"caller's deadline", context.DeadlineExceeded, false},
		{"wrapped deadline", fmt.Errorf("redisx: read: %w", context.DeadlineExceeded), false},
		{"canceled", context.Canceled, false},
		{"read timeout", readTimeout, false},
		{"pool timeout", redis.ErrPoolTimeout, false},
		{"client closed", redis.ErrClosed, false},
		{"WRONGTYPE answer", replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{"NOSCRIPT answer", replyError("NOSCRIPT No matching script"), false},
		{"dial timeout", dialTimeout, true},
		{"connection refused", refused, true},
		{"connection reset", reset, true},
		{"EOF", io.EOF, true},
		{"wrapped EOF", fmt.Errorf("redisx: write: %w", io.EOF), true},
		{"CLUSTERDOWN", replyError("CLUSTERDOWN The cluster is down"), true},
		{"MOVED", replyError("MOVED 3999 127.0.0.1:6381"), true},
		{"ASK", replyError("ASK 3999 127.0.0.1:6381"), true},
		{"TRYAGAIN", replyError("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{"LOADING", replyError("LOADING Redis is loading the dataset in memory"), true},
		{"READONLY", replyError("READONLY You can't write against a read only replica."), true},
		{"other", errors.New("something else"), false},
	}
	for _, tc := range cases {
		if got := clusterTrouble(tc.err); got != tc.want {
			t.Errorf("%s (%v): got %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestClusterPrunesProbes: probes of addresses that are neither in the
// cluster's view nor configured are closed and dropped.
func TestClusterPrunesProbes(t *testing.T) {
	c := newCluster(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	for _, a := range []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"} {
		c.probe(a)
	}
	old := c.probe("127.0.0.1:3")
	c.pruneProbes([]string{"127.0.0.1:2"})
	if got, want := c.probeAddrs(), []string{"127.0.0.1:1", "127.0.0.1:2"}; !slices.Equal(got, want) {
		t.Errorf("probes: got %v, want %v", got, want)
	}
	if err := old.Ping(context.Background()).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("ping on a pruned probe: got %v, want %v", err, redis.ErrClosed)
	}
}

// TestClusterCloseTwice: a second Close is not an error.
func TestClusterCloseTwice(t *testing.T) {
	c := newCluster(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	if err := c.Close(); err != nil {
		t.Fatalf("first close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second close: got %v, want nil", err)
	}
}

// TestClusterNoteErrorAfterDeadline: a dial that failed because the
// caller's own deadline passed does not alarm the watcher; the same error
// with time left does.
func TestClusterNoteErrorAfterDeadline(t *testing.T) {
	c := &Cluster{} // no client, no watcher: nothing else notes errors
	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	c.noteError(ended, timeout)
	if c.troubled() {
		t.Errorf("troubled after a dial that outlived the caller's context: got true, want false")
	}
	c.noteError(context.Background(), timeout)
	if !c.troubled() {
		t.Errorf("troubled after a dial timeout: got false, want true")
	}
}

// TestClusterNoteRefusedAfterDeadline: a refused dial is trouble even when
// it reaches the hook after the caller's context ended (go-redis retries it
// after a 100 ms backoff, longer than the rate limiter's 50 ms budget): the
// deadline did not cause it, a dead node did.
func TestClusterNoteRefusedAfterDeadline(t *testing.T) {
	ended, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	for _, err := range []error{
		&net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}},
		io.EOF,
		fmt.Errorf("read: %w", syscall.ECONNRESET),
	} {
		c := &Cluster{}
		c.noteError(ended, err)
		if !c.troubled() {
			t.Errorf("troubled after %v past the caller's deadline: got false, want true", err)
		}
	}
}
