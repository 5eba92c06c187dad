package edge

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// refusingListener refuses its first accepts with errs, then accepts from a
// real loopback listener.
type refusingListener struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (l *refusingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

func acceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

// TestEdgeListenerRetries: accept errors for want of resources never reach
// the server; they are counted by reason and logged once per episode.
func TestEdgeListenerRetries(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	m := NewMetrics(prometheus.NewRegistry())
	ln := NewListener(&refusingListener{Listener: inner, errs: []error{
		acceptErr(syscall.EMFILE), acceptErr(syscall.EMFILE), acceptErr(syscall.ENFILE),
		acceptErr(syscall.ENOBUFS), acceptErr(syscall.ENOMEM),
	}}, 4, time.Second, time.Second, m, slog.New(slog.NewTextHandler(&logs, nil)))
	defer ln.Close() //nolint:errcheck // closed again at the end; the test checks what accept returns, not this
	client, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("Accept = %v, want a connection after the refusals", err)
	}
	for reason, want := range map[string]float64{"emfile": 2, "enfile": 1, "enobufs": 1, "enomem": 1} {
		if got := metricValue(m.acceptErrors.WithLabelValues(reason)); got != want {
			t.Errorf("accept errors %s = %v, want %v", reason, got, want)
		}
	}
	if got := strings.Count(logs.String(), "cannot accept connections"); got != 1 {
		t.Errorf("%d warnings for one episode, want 1:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "accepting connections again") {
		t.Errorf("no line for the end of the episode:\n%s", logs.String())
	}
	if got := metricValue(m.open); got != 1 {
		t.Errorf("open connections = %v, want 1", got)
	}
	c.Close()
	c.Close() // a second close frees nothing more
	if got := metricValue(m.open); got != 0 {
		t.Errorf("open connections after close = %v, want 0", got)
	}
}

// TestEdgeListenerPassesOtherErrors: a closed listener ends Accept, and an
// error that is neither temporary nor about resources is returned.
func TestEdgeListenerPassesOtherErrors(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bad := fmt.Errorf("accept: %w", syscall.EINVAL)
	ln := NewListener(&refusingListener{Listener: inner, errs: []error{bad}}, 4, time.Second, time.Second,
		NewMetrics(prometheus.NewRegistry()), slog.New(slog.DiscardHandler))
	if _, err := ln.Accept(); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Accept = %v, want EINVAL passed on", err)
	}
	if err := ln.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
	}
	if got := len(ln.slots); got != 0 {
		t.Errorf("%d places taken after failed accepts, want 0", got)
	}
}

// metricValue is the value of a collector of one counter or gauge.
func metricValue(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		return -1
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}
