package edge

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// syncBuffer is a log buffer the accept goroutine writes while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type accepted struct {
	c   net.Conn
	err error
}

// acceptAsync runs one Accept on a goroutine of its own, as the server's
// accept loop does.
func acceptAsync(ln *Listener) <-chan accepted {
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		ch <- accepted{c, err}
	}()
	return ch
}

// waitAccept waits for an Accept started by acceptAsync to return.
func waitAccept(t *testing.T, ch <-chan accepted, what string) accepted {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Accept did not return within 10 s", what)
		return accepted{}
	}
}

// waitFor waits until cond holds, which the accept goroutine brings about.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10 s", what)
		}
		time.Sleep(time.Millisecond) // polling what another goroutine changes
	}
}

// waitMetric waits until the collector's value reaches want.
func waitMetric(t *testing.T, c prometheus.Collector, want float64, what string) {
	t.Helper()
	waitFor(t, func() bool { return metricValue(c) >= want }, fmt.Sprintf("%s reaching %v", what, want))
}

func dial(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestEdgeListenerCapWaits: at MD_MAX_CONNS open connections the listener
// stops accepting (a new client waits in the backlog) and says so once;
// a connection closing lets the waiting client in and the listener logs
// that it accepts again; Close ends a wait at the cap.
func TestEdgeListenerCapWaits(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	m := NewMetrics(prometheus.NewRegistry())
	ln := NewListener(inner, 1, time.Second, time.Second, m, slog.New(slog.NewTextHandler(&logs, nil)))
	defer ln.Close() //nolint:errcheck // closed again below; the test checks what Accept returns

	if got := metricValue(m.max); got != 1 {
		t.Errorf("max connections gauge = %v, want 1", got)
	}
	dial(t, inner.Addr())
	first := waitAccept(t, acceptAsync(ln), "first client")
	if first.err != nil {
		t.Fatalf("first Accept: %v", first.err)
	}
	second := acceptAsync(ln)
	dial(t, inner.Addr())
	waitMetric(t, m.capWaits, 1, "cap waits")
	select {
	case a := <-second:
		t.Fatalf("Accept at the cap returned %v, %v; want it to wait", a.c, a.err)
	default:
	}
	// The warning follows the count, on the accept goroutine.
	waitFor(t, func() bool { return strings.Contains(logs.String(), "at MD_MAX_CONNS") }, "a warning at the cap")

	if err := first.c.Close(); err != nil {
		t.Fatal(err)
	}
	a := waitAccept(t, second, "client waiting at the cap")
	if a.err != nil {
		t.Fatalf("Accept after a connection closed: %v", a.err)
	}
	defer a.c.Close()
	if !strings.Contains(logs.String(), "below MD_MAX_CONNS again") {
		t.Errorf("no line for accepting again:\n%s", logs.String())
	}
	if got := metricValue(m.open); got != 1 {
		t.Errorf("open connections = %v, want 1", got)
	}

	third := acceptAsync(ln)
	waitMetric(t, m.capWaits, 2, "cap waits")
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if a := waitAccept(t, third, "Close at the cap"); !errors.Is(a.err, net.ErrClosed) {
		t.Errorf("Accept at the cap after Close = %v, want net.ErrClosed", a.err)
	}
	if got := len(ln.slots); got != 1 {
		t.Errorf("%d places taken, want the one open connection's", got)
	}
}

// temporaryError is an accept error the network stack calls temporary.
type temporaryError struct{}

func (temporaryError) Error() string   { return "accept: try again" }
func (temporaryError) Temporary() bool { return true }

// TestEdgeListenerNamesReasons: each refusal is counted under its reason
// and the warning says what ran out.
func TestEdgeListenerNamesReasons(t *testing.T) {
	for _, c := range []struct {
		err    error
		reason string
		text   string
	}{
		{acceptErr(syscall.EMFILE), "emfile", "out of file descriptors (RLIMIT_NOFILE)"},
		{acceptErr(syscall.ENFILE), "enfile", "the system is out of file descriptors"},
		{acceptErr(syscall.ENOBUFS), "enobufs", "out of memory for connections"},
		{acceptErr(syscall.ENOMEM), "enomem", "out of memory for connections"},
		{&net.OpError{Op: "accept", Net: "tcp", Err: temporaryError{}}, "other", "temporary accept error"},
	} {
		t.Run(c.reason, func(t *testing.T) {
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			m := NewMetrics(prometheus.NewRegistry())
			ln := NewListener(&refusingListener{Listener: inner, errs: []error{c.err}}, 4, time.Second, time.Second,
				m, slog.New(slog.NewTextHandler(&logs, nil)))
			defer ln.Close() //nolint:errcheck // the test is over
			dial(t, inner.Addr())
			conn, err := ln.Accept()
			if err != nil {
				t.Fatalf("Accept = %v, want a connection after the refusal", err)
			}
			defer conn.Close()
			if got := metricValue(m.acceptErrors.WithLabelValues(c.reason)); got != 1 {
				t.Errorf("accept errors %s = %v, want 1", c.reason, got)
			}
			if !strings.Contains(logs.String(), "cannot accept connections: "+c.text) {
				t.Errorf("warning does not say %q:\n%s", c.text, logs.String())
			}
		})
	}
}

// TestEdgeListenerLogsOncePerPeriod: a second stretch of refusals soon
// after the first is counted but not logged again, nor is its end.
func TestEdgeListenerLogsOncePerPeriod(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	m := NewMetrics(prometheus.NewRegistry())
	refusing := &refusingListener{Listener: inner, errs: []error{acceptErr(syscall.EMFILE)}}
	ln := NewListener(refusing, 4, time.Second, time.Second, m, slog.New(slog.NewTextHandler(&logs, nil)))
	defer ln.Close() //nolint:errcheck // the test is over
	for i := range 2 {
		refusing.mu.Lock()
		refusing.errs = []error{acceptErr(syscall.EMFILE)}
		refusing.mu.Unlock()
		dial(t, inner.Addr())
		c, err := ln.Accept()
		if err != nil {
			t.Fatalf("Accept %d = %v", i, err)
		}
		defer c.Close()
	}
	if got := metricValue(m.acceptErrors.WithLabelValues("emfile")); got != 2 {
		t.Errorf("accept errors emfile = %v, want 2", got)
	}
	if got := strings.Count(logs.String(), "cannot accept connections"); got != 1 {
		t.Errorf("%d warnings for two stretches within %s, want 1:\n%s", got, acceptLogEvery, logs.String())
	}
	if got := strings.Count(logs.String(), "accepting connections again"); got != 1 {
		t.Errorf("%d lines for the ends, want 1 (the logged stretch's):\n%s", got, logs.String())
	}
}

// TestEdgeListenerCloseDuringBackoff: Close ends an Accept that waits out
// refusals, and gives its place back.
func TestEdgeListenerCloseDuringBackoff(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 1000)
	for i := range errs {
		errs[i] = acceptErr(syscall.EMFILE)
	}
	m := NewMetrics(prometheus.NewRegistry())
	ln := NewListener(&refusingListener{Listener: inner, errs: errs}, 4, time.Second, time.Second,
		m, slog.New(slog.DiscardHandler))
	ch := acceptAsync(ln)
	waitMetric(t, m.acceptErrors.WithLabelValues("emfile"), 3, "refusals")
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if a := waitAccept(t, ch, "Close during the backoff"); !errors.Is(a.err, net.ErrClosed) {
		t.Errorf("Accept = %v, want net.ErrClosed", a.err)
	}
	if got := len(ln.slots); got != 0 {
		t.Errorf("%d places taken after Close, want 0", got)
	}
}

// TestEdgeListenerCloseWakesBackoff: connections that close while no Accept
// waits leave one wake-up, never blocking their Close, and that wake-up
// ends the next wait for resources at once.
func TestEdgeListenerCloseWakesBackoff(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := NewListener(inner, 4, time.Second, time.Second, NewMetrics(prometheus.NewRegistry()), slog.New(slog.DiscardHandler))
	defer ln.Close() //nolint:errcheck // the test is over
	var conns []net.Conn
	for range 2 {
		dial(t, inner.Addr())
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	woke := make(chan bool, 1)
	go func() { woke <- sleep(time.Hour, ln.freed, ln.done) }()
	select {
	case ok := <-woke:
		if !ok {
			t.Error("sleep reported done, want woken")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a closed connection did not end the wait")
	}
	done := make(chan struct{})
	close(done)
	if sleep(time.Hour, nil, done) {
		t.Error("sleep after done: true, want false")
	}
}
