package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/cache/cachetest"
	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/store"
)

// faultyStore is the real store with faults injected in front of ApplyBatch:
// an outage for the first outage calls, and a permanent refusal of batches
// that hold the trade poison.
type faultyStore struct {
	*store.Store
	outage atomic.Int64
	poison string
}

func (f *faultyStore) ApplyBatch(ctx context.Context, b *store.Batch) (*store.Result, error) {
	if f.outage.Add(-1) >= 0 {
		return nil, fmt.Errorf("store: begin: dial tcp 127.0.0.1:5432: connect: connection refused")
	}
	for _, t := range b.Trades {
		if t.TradeID == f.poison {
			return nil, &pgconn.PgError{Code: "22P05", Message: "unsupported Unicode escape sequence"}
		}
	}
	return f.Store.ApplyBatch(ctx, b)
}

func (e *env) startWorkerWith(t *testing.T, st ingest.Store, cfg ingest.Config, now func() time.Time, retention time.Duration) *ingest.Worker {
	t.Helper()
	w, err := ingest.New(cfg, ingest.Deps{
		NC: e.nc, Store: st, Cache: e.cache, Metrics: ingest.NewMetrics(prometheus.NewRegistry()),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: now, Retention: retention,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := w.Run(ctx); err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return w
}

func tradeJSON(id string) []byte {
	return []byte(`{"market_id":"MK-1","trade_id":"` + id + `","venue":"venue_a","price":0.5,"size":1,"side":"buy","ts":"2026-11-01T10:00:00Z"}`)
}

// TestOutageLosesNothing: a dependency that fails for longer than the
// delivery limit allows must not turn valid messages into rejects.
func TestOutageLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fs := &faultyStore{Store: e.st}
	fs.outage.Store(8)
	cfg := e.cfg
	cfg.MaxDeliveries = 2
	e.startWorkerWith(t, fs, cfg, time.Now, 0)
	e.publish(t, e.subject("trade", "MK-1"), tradeJSON("T-OUT"), "t")
	e.waitDrained(t, 60*time.Second)
	var trades, rejects int
	if err := e.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM trades), (SELECT count(*) FROM ingest_rejects)`).Scan(&trades, &rejects); err != nil {
		t.Fatal(err)
	}
	if trades != 1 || rejects != 0 {
		t.Errorf("after an outage of 8 attempts with 2 deliveries allowed: %d trades, %d rejects; want 1, 0", trades, rejects)
	}
}

// TestPoisonMessageRejected: a message Postgres refuses every time is
// recorded as max_deliveries after its deliveries, and the messages that
// shared its batch are applied.
func TestPoisonMessageRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fs := &faultyStore{Store: e.st, poison: "T-BAD"}
	cfg := e.cfg
	cfg.MaxDeliveries = 3
	cfg.Linger = 200 * time.Millisecond // the three messages share a batch
	e.startWorkerWith(t, fs, cfg, time.Now, 0)
	e.publish(t, e.subject("trade", "MK-1"), tradeJSON("T-1"), "a")
	e.publish(t, e.subject("trade", "MK-1"), tradeJSON("T-BAD"), "b")
	e.publish(t, e.subject("trade", "MK-1"), tradeJSON("T-2"), "c")
	e.waitDrained(t, 60*time.Second)
	ctx := context.Background()
	var trades int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM trades`).Scan(&trades); err != nil {
		t.Fatal(err)
	}
	var reason string
	if err := e.pool.QueryRow(ctx, `SELECT reason FROM ingest_rejects`).Scan(&reason); err != nil {
		t.Fatalf("reject row: %v", err)
	}
	if trades != 2 || !strings.HasPrefix(reason, ingest.ReasonMaxDeliveries+": delivered 3 times") {
		t.Errorf("got %d trades and reject %q; want 2 and max_deliveries after 3 deliveries", trades, reason)
	}
}

// TestSweepRetention: a resolved market leaves the event read when its
// retention ends, by the sweep, which resumes from its stored cursor.
func TestSweepRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	e.rules = cache.Rules{Retention: time.Hour, Now: now}
	e.cache = cache.New(e.rdb, e.prefix, e.rules)
	w := e.startWorkerWith(t, e.st, e.cfg, now, time.Hour)
	resolved := now().Add(-50 * time.Minute).Format(time.RFC3339Nano)
	e.publish(t, e.subject("event", "EV-R"), mustJSON(t, eventMsg("EV-R", 1, "r", "A", "B")), "e")
	e.publish(t, e.subject("market", "MK-R"), mustJSON(t, map[string]any{
		"universal_id": "MK-R", "event_id": "EV-R", "version": 1, "title": "x", "status": "resolved",
		"venues": map[string]string{"venue_a": "a"}, "resolved_at": resolved, "result": "yes",
		"updated_at": resolved,
	}), "m")
	e.waitDrained(t, 15*time.Second)
	ctx := context.Background()
	check := func(wantResolved bool) {
		t.Helper()
		ev, err := cachetest.Event(ctx, e.rdb, e.cache, "EV-R")
		if err != nil {
			t.Fatal(err)
		}
		ms, err := e.cache.Markets(ctx, []string{"MK-R"})
		if err != nil {
			t.Fatal(err)
		}
		in := strings.Contains(string(ev.Body), `"recently_resolved":[{"universal_id":"MK-R"`)
		if in != wantResolved || ms[0].Served != wantResolved {
			t.Errorf("MK-R in recently_resolved %v, served %v; want %v", in, ms[0].Served, wantResolved)
		}
	}
	check(true)
	clock.Add(int64(20 * time.Minute)) // 70 minutes after the resolution
	if err := w.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	check(false)
	cursor, ok, err := e.st.SweepCursor(ctx)
	if err != nil || !ok || !cursor.Equal(now().Add(-time.Hour).Truncate(time.Microsecond)) {
		t.Errorf("sweep cursor: got %v %v (%v), want the cut %v", cursor, ok, err, now().Add(-time.Hour))
	}
	if err := w.Sweep(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
