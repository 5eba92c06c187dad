package ingest_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/internal/metrictest"
	"github.com/marketdata/marketdata/internal/testenv"
)

// logLines returns the JSON log records in b whose msg is msg.
func logLines(t *testing.T, b *testenv.LogBuffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

func newLog() (*slog.Logger, *testenv.LogBuffer) {
	b := &testenv.LogBuffer{}
	return slog.New(slog.NewJSONHandler(b, nil)), b
}

const shortMsg = "stream has fewer replicas than configured"

// checkShortLogged checks one WARN line for stream: configured 3, actual 1.
func checkShortLogged(t *testing.T, b *testenv.LogBuffer, stream string) {
	t.Helper()
	for _, rec := range logLines(t, b, shortMsg) {
		if rec["stream"] != stream {
			continue
		}
		if rec["level"] != "WARN" || rec["replicas_wanted"] != 3.0 || rec["replicas"] != 1.0 ||
			!strings.Contains(rec["reason"].(string), "not clustered") {
			t.Errorf("log line for %s: got %v, want WARN with replicas_wanted 3, replicas 1 and the reason", stream, rec)
		}
		return
	}
	t.Errorf("no %q line for stream %s", shortMsg, stream)
}

// TestStreamShortOfReplicas: streams created R1, then ingest asked for 3 on
// the single local NATS server (which cannot hold 3): reported in a WARN line
// per stream, in the replica gauges and in StreamHealth's text, never
// silently kept; the worker runs on. A stream created while asking for 3 on
// a single server is created with 1, and reported the same way.
func TestStreamShortOfReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // creates the streams with 1 replica
	ctx := context.Background()
	cfg := e.cfg
	cfg.Replicas = 3
	log, logs := newLog()
	reg := prometheus.NewRegistry()
	metrics := ingest.NewMetrics(reg)
	w, err := ingest.New(cfg, ingest.Deps{NC: e.nc, Store: e.st, Cache: e.cache, Metrics: metrics, Log: log, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for len(logLines(t, logs, "ingest consuming")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the worker did not start consuming")
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkShortLogged(t, logs, cfg.Stream)
	checkShortLogged(t, logs, cfg.DLQStream)

	s, err := e.js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Replicas; got != 1 {
		t.Errorf("stream's configured replicas on a single server: got %d, want 1 (left as it can be)", got)
	}

	degraded, err := w.StreamHealth(ctx)
	if err != nil {
		t.Fatalf("StreamHealth: got error %v, want ready", err)
	}
	for _, stream := range []string{cfg.Stream, cfg.DLQStream} {
		if want := "stream " + stream + " has 1 of 3 replicas"; !strings.Contains(degraded, want) {
			t.Errorf("StreamHealth text: got %q, want it to contain %q", degraded, want)
		}
		if got := metrictest.Value(t, reg, "marketdata_ingest_stream_replicas", "stream", stream); got != 1 {
			t.Errorf("marketdata_ingest_stream_replicas{stream=%s}: got %v, want 1", stream, got)
		}
		if got := metrictest.Value(t, reg, "marketdata_ingest_stream_replicas_wanted", "stream", stream); got != 3 {
			t.Errorf("marketdata_ingest_stream_replicas_wanted{stream=%s}: got %v, want 3", stream, got)
		}
	}

	// The worker still applies updates.
	e.publish(t, e.subject("trade", "MK-1"), []byte(`{"market_id":"MK-1","trade_id":"R3","venue":"venue_a","price":0.5,"size":1,"side":"buy","ts":"2026-11-01T10:00:00Z"}`), "r3")
	e.waitDrained(t, 15*time.Second)

	// Streams absent, 3 asked of a single server: created with 1, reported.
	_, names := testenv.NATS(t)
	fresh := configOf(names)
	fresh.Replicas = 3
	flog, flogs := newLog()
	if err := ingest.EnsureStreams(ctx, e.js, fresh, flog); err != nil {
		t.Fatalf("EnsureStreams, 3 replicas on a single server: %v", err)
	}
	checkShortLogged(t, flogs, fresh.Stream)
	checkShortLogged(t, flogs, fresh.DLQStream)
}

// TestStreamHealthNotReady: StreamHealth is nil/empty on healthy R1 streams
// asked for 1, errors when the stream or the consumer is deleted behind the
// worker's back (ingest receives nothing: not ready), and only reports a
// reject stream that is gone.
func TestStreamHealthNotReady(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w, err := ingest.New(e.cfg, ingest.Deps{NC: e.nc, Store: e.st, Cache: e.cache,
		Metrics: ingest.NewMetrics(prometheus.NewRegistry()), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.EnsureConsumer(ctx, e.js, e.cfg); err != nil {
		t.Fatal(err)
	}
	if degraded, err := w.StreamHealth(ctx); degraded != "" || err != nil {
		t.Fatalf("healthy: got %q, %v; want \"\", nil", degraded, err)
	}

	if err := e.js.DeleteStream(ctx, e.cfg.DLQStream); err != nil {
		t.Fatal(err)
	}
	degraded, err := w.StreamHealth(ctx)
	if err != nil || !strings.Contains(degraded, e.cfg.DLQStream) {
		t.Errorf("reject stream gone: got %q, %v; want ready, degraded naming %s", degraded, err, e.cfg.DLQStream)
	}

	if err := e.js.DeleteConsumer(ctx, e.cfg.Stream, e.cfg.Consumer); err != nil {
		t.Fatal(err)
	}
	if _, err := w.StreamHealth(ctx); err == nil || !strings.Contains(err.Error(), "consumer") {
		t.Errorf("consumer gone: got %v, want an error naming the consumer", err)
	}

	if err := e.js.DeleteStream(ctx, e.cfg.Stream); err != nil {
		t.Fatal(err)
	}
	if _, err := w.StreamHealth(ctx); err == nil || !strings.Contains(err.Error(), e.cfg.Stream) {
		t.Errorf("stream gone: got %v, want an error naming %s", err, e.cfg.Stream)
	}
}
