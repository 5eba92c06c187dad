package ingest_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/ingest/feed"
	"github.com/marketdata/marketdata/store"
)

// hotWorld is a world of events and markets and a price stream in which a
// few hot markets are in every batch.
type hotWorld struct {
	seed, prices []feed.Msg
	want         map[string]int64
}

func newHotWorld(t *testing.T, prefix string, events, perEvent, updates, hot int) hotWorld {
	t.Helper()
	w := hotWorld{want: map[string]int64{}}
	var ids []string
	for i := range events {
		ev := fmt.Sprintf("EV-%04d", i)
		w.seed = append(w.seed, feed.Msg{Subject: prefix + ".event." + ev, MsgID: "s-" + ev,
			Data: mustJSON(t, eventMsg(ev, 1, "Event "+ev, "A-"+ev, "b-"+ev, nil, nil))})
		w.want["event:"+ev] = 1
		for j := range perEvent {
			mk := fmt.Sprintf("MK-%04d-%d", i, j)
			ids = append(ids, mk)
			w.seed = append(w.seed, feed.Msg{Subject: prefix + ".market." + mk, MsgID: "s-" + mk,
				Data: mustJSON(t, map[string]any{
					"universal_id": mk, "event_id": ev, "version": 1, "title": "Market " + mk, "status": "active",
					"venues":      map[string]string{"venue_a": "A-" + mk, "venue_b": "b-" + mk},
					"resolved_at": nil, "result": nil, "updated_at": "2026-11-01T10:00:01Z",
				})})
			w.want["market:"+mk] = 1
		}
	}
	rng := rand.New(rand.NewPCG(uint64(events), uint64(updates)))
	version := map[string]int64{}
	start := time.Date(2026, 11, 1, 11, 0, 0, 0, time.UTC)
	for i := range updates {
		// Every fourth update is one of the hot markets, spread over the
		// world: each batch of a few dozen messages holds all of them.
		mk := ids[rng.IntN(len(ids))]
		if i%4 == 0 {
			mk = ids[(i/4)%hot*(len(ids)/hot)]
		}
		version[mk]++
		v := version[mk]
		bid := float64(rng.IntN(90)+1) / 100
		w.prices = append(w.prices, feed.Msg{Subject: prefix + ".price." + mk, MsgID: fmt.Sprintf("p-%s-%d", mk, v),
			Data: mustJSON(t, map[string]any{
				"market_id": mk, "version": v, "ts": start.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano),
				"quotes": map[string]any{
					"venue_a": map[string]any{"bid": bid, "ask": bid + 0.01, "last": bid, "volume_24h": i},
					"venue_b": map[string]any{"bid": bid, "ask": bid + 0.02, "last": nil, "volume_24h": 0},
				},
			})})
		w.want["price:"+mk] = v
	}
	return w
}

// publishChunks publishes msgs as fast as the stream acknowledges them, a
// window of 2,000 at a time.
func publishChunks(t *testing.T, e *env, msgs []feed.Msg) {
	t.Helper()
	for i := 0; i < len(msgs); i += 2000 {
		publishAll(t, e.js, msgs[i:min(i+2000, len(msgs))], 0)
	}
}

// lockWaits samples pg_locks for lock requests of the test database's
// sessions that are not granted, until stop is closed.
type lockWaits struct {
	mu      sync.Mutex
	samples int
	// waits counts samples with a wait for a lock other than a relation
	// extension lock; types counts every wait seen, by lock type and relation.
	waits int
	types map[string]int
}

func (e *env) sampleLockWaits(t *testing.T, stop <-chan struct{}) *lockWaits {
	t.Helper()
	lw := &lockWaits{types: map[string]int{}}
	go func() {
		tick := time.NewTicker(3 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			rows, err := e.pool.Query(context.Background(), `
				SELECT l.locktype || coalesce(' ' || l.relation::regclass::text, '')
				FROM pg_locks l
				JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE NOT l.granted AND a.datname = current_database()`)
			if err != nil {
				continue
			}
			var types []string
			for rows.Next() {
				var lt string
				if rows.Scan(&lt) == nil {
					types = append(types, lt)
				}
			}
			rows.Close()
			lw.mu.Lock()
			lw.samples++
			waited := false
			for _, lt := range types {
				lw.types[lt]++
				// A relation extension lock is held while one page is
				// added to a table (an update that found no room in its
				// page): microseconds, and not a document or row lock.
				if !strings.HasPrefix(lt, "extend") {
					waited = true
				}
			}
			if waited {
				lw.waits++
			}
			lw.mu.Unlock()
		}
	}()
	return lw
}

// checkState checks that Postgres holds the highest version of everything
// and that each market's cached price item is that version's.
func (e *env) checkState(t *testing.T, w hotWorld) {
	t.Helper()
	e.verify(t, stream{want: w.want})
}

// TestKeepUpHotMarkets: four appliers in one process take a price stream in
// which eight hot markets are in every batch. No session of the database
// ever waits for a row or document lock (batches in flight never share a market, and
// a price batch holds its document locks only while Postgres executes it;
// only a relation extension lock, held while a page is added to a table, may
// be waited for, and is logged), the rate stays
// above a floor a busy machine still clears, and the result is exactly what
// a rebuild from Postgres gives.
func TestKeepUpHotMarkets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Appliers = 4
	e.cfg.BatchSize = 500
	w := newHotWorld(t, e.cfg.SubjectPrefix, 1000, 5, 40_000, 8)
	e.startWorker(t)
	publishChunks(t, e, w.seed)
	e.waitDrained(t, 120*time.Second)

	stop := make(chan struct{})
	lw := e.sampleLockWaits(t, stop)
	start := time.Now()
	publishChunks(t, e, w.prices)
	// The wait only catches a hang: the floor below judges the rate. (A
	// wait of 120 s asked for 333/s, more than the floor, and failed on a
	// box running this suite beside two others.)
	e.waitDrained(t, 400*time.Second)
	elapsed := time.Since(start)
	close(stop)

	rate := float64(len(w.prices)) / elapsed.Seconds()
	lw.mu.Lock()
	t.Logf("%d price updates in %s: %.0f/s; pg_locks sampled %d times, %d with waits %v",
		len(w.prices), elapsed.Round(time.Millisecond), rate, lw.samples, lw.waits, lw.types)
	if lw.samples < 10 {
		t.Errorf("pg_locks sampled only %d times", lw.samples)
	}
	if lw.waits > 0 {
		t.Errorf("lock waits seen in %d of %d samples (%v), want none but relation extension", lw.waits, lw.samples, lw.types)
	}
	lw.mu.Unlock()
	// The rate is mdbench ingest's figure (over 20,000/s on a quiet machine
	// for the whole path); what serializes appliers is the lock waits above.
	// This floor only catches a collapse: a 2-core box under a load average
	// of 40 (six test runs beside this one) applied 523/s, and one running
	// three test suites' Postgres work at once fewer than 333/s.
	const floor = 150
	if rate < floor {
		t.Errorf("applied %.0f updates/s, want at least %d", rate, floor)
	}
	e.checkState(t, w)
}

// TestKeepUpTwoProcesses: two workers with stores of their own (so each has
// its own cache of market and event rows, as two processes do) share the
// consumer while markets keep changing events and titles between price
// updates. Each process's cached rows must never render a stale item: Redis
// ends byte for byte as a rebuild from Postgres.
func TestKeepUpTwoProcesses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Appliers = 2
	w := newHotWorld(t, e.cfg.SubjectPrefix, 20, 5, 6_000, 4)
	// Interleave market changes: markets move between events and are
	// renamed, and events change their venue ids (their served state).
	rng := rand.New(rand.NewPCG(3, 4))
	var msgs []feed.Msg
	mv := map[string]int{}
	ev := map[string]int{}
	for i, p := range w.prices {
		msgs = append(msgs, p)
		if i%50 != 25 {
			continue
		}
		mk := strings.TrimPrefix(p.Subject, e.cfg.SubjectPrefix+".price.")
		mv[mk]++
		v := 1 + mv[mk]
		to := fmt.Sprintf("EV-%04d", rng.IntN(20))
		msgs = append(msgs, feed.Msg{Subject: e.cfg.SubjectPrefix + ".market." + mk, MsgID: fmt.Sprintf("m-%s-%d", mk, v),
			Data: mustJSON(t, map[string]any{
				"universal_id": mk, "event_id": to, "version": v, "title": fmt.Sprintf("Market %s v%d", mk, v), "status": "active",
				"venues":      map[string]string{"venue_a": "A-" + mk},
				"resolved_at": nil, "result": nil, "updated_at": "2026-11-01T10:00:01Z",
			})})
		w.want["market:"+mk] = int64(v)
		evID := fmt.Sprintf("EV-%04d", rng.IntN(20))
		ev[evID]++
		evV := 1 + ev[evID]
		venues := []any{"A-" + evID, "b-" + evID}
		if evV%2 == 0 {
			venues = []any{"A-" + evID} // one venue: not served
		}
		msgs = append(msgs, feed.Msg{Subject: e.cfg.SubjectPrefix + ".event." + evID, MsgID: fmt.Sprintf("e-%s-%d", evID, evV),
			Data: mustJSON(t, eventMsg(evID, evV, "Event "+evID, venues...))})
		w.want["event:"+evID] = int64(evV)
	}
	e.startWorker(t)
	e.startWorkerOwnStore(t)
	publishChunks(t, e, w.seed)
	e.waitDrained(t, 60*time.Second)
	publishChunks(t, e, msgs)
	e.waitDrained(t, 120*time.Second)
	e.checkState(t, w)
}

// startWorkerOwnStore runs a worker whose store is its own (its own pool and
// cache of rows), as a second ingest process has.
func (e *env) startWorkerOwnStore(t *testing.T) {
	t.Helper()
	pool, err := store.Connect(context.Background(), e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	w, err := ingest.New(e.cfg, ingest.Deps{
		NC: e.nc, Store: store.New(pool), Cache: e.cache, Metrics: ingest.NewMetrics(prometheus.NewRegistry()),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now, Retention: 168 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
}
