package ingest_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/internal/testenv"
)

// TestRunStoppedBeforeSetup: a worker stopped while it still waits for
// NATS to set its streams up (here: its connection is closed) stops
// cleanly, as Ctrl-C on `marketdata dev` during its first seconds does:
// Run returns nil, not the cancellation.
func TestRunStoppedBeforeSetup(t *testing.T) {
	e := newEnv(t)
	nc, err := nats.Connect(testenv.NATSURL)
	if err != nil {
		testenv.Unavailable(t, "NATS", err)
	}
	nc.Close() // setup retries until the context ends
	w, err := ingest.New(e.cfg, ingest.Deps{
		NC: nc, Store: e.st, Cache: e.cache, Metrics: ingest.NewMetrics(prometheus.NewRegistry()),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now, Retention: 168 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	time.Sleep(300 * time.Millisecond) // a stop while setup retries: nothing to wait on but time
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run stopped before its streams were set up: %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return 5 s after its context ended")
	}
}
