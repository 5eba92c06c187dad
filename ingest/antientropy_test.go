package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/internal/metrictest"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/internal/redisx"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// aeBatch is n events with two markets each, their prices and one trade per
// market, all at version v.
func aeBatch(n int, v int64) store.Batch {
	var b store.Batch
	ts := fixedNow.Add(-time.Hour).Add(time.Duration(v) * time.Second)
	for i := range n {
		id := fmt.Sprintf("AE%03d", i)
		a, bb := "A"+id, "B"+id
		b.Events = append(b.Events, store.Event{ID: id, Version: v, Title: fmt.Sprintf("Event %s v%d", id, v),
			Category: "ae", Status: store.StatusActive, VenueIDs: [4]*string{&a, &bb}, Volume: float64(i) + float64(v),
			UpdatedAt: ts})
		for j := range 2 {
			m := fmt.Sprintf("%s-m%d", id, j)
			b.Markets = append(b.Markets, store.Market{ID: m, EventID: id, Version: v, Title: "Market " + m,
				Status: store.StatusActive, Venues: map[string]string{"venue_a": m + "-a"}, UpdatedAt: ts})
			bid := 0.3 + float64(v)/100
			b.Prices = append(b.Prices, store.Price{MarketID: m, Version: v, TS: ts,
				Quotes: map[string]store.Quote{"venue_a": {Bid: &bid, Volume24h: float64(v)}}})
			b.Trades = append(b.Trades, store.Trade{MarketID: m, TradeID: fmt.Sprintf("%s-t%d", m, v), Venue: "venue_a",
				Price: 0.5, Size: 1, Side: "buy", TS: ts})
		}
	}
	return b
}

// ingestBatch commits b and caches it, as the worker does.
func ingestBatch(t *testing.T, st *store.Store, c *cache.Cache, b store.Batch) {
	t.Helper()
	ctx := context.Background()
	res, err := st.ApplyBatch(ctx, &b)
	if err != nil {
		t.Fatalf("apply batch: %v", err)
	}
	if _, err := c.Apply(ctx, res); err != nil {
		t.Fatalf("cache batch: %v", err)
	}
}

// rebuiltDump is what a fresh rebuild from st holds, read from a prefix of
// the shared Redis.
func rebuiltDump(t *testing.T, st *store.Store, rules cache.Rules) map[string]string {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	if _, err := cache.New(rdb, prefix, rules).Rebuild(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	return dump(t, rdb, prefix)
}

// newAntiEntropy is a pass of page documents every 50 ms; its notices go to
// subject on nc (nc nil: none).
func newAntiEntropy(t *testing.T, st *store.Store, c *cache.Cache, nc *nats.Conn, subject string, reg prometheus.Registerer, page int) (*ingest.AntiEntropy, *ingest.AntiEntropyMetrics) {
	m := ingest.NewAntiEntropyMetrics(reg)
	cfg := ingest.DefaultAntiEntropyConfig()
	cfg.Page, cfg.Interval = page, 50*time.Millisecond
	if subject != "" {
		cfg.NoticeSubject = subject
	}
	return mustAntiEntropy(t, cfg, ingest.AntiEntropyDeps{Store: st, Cache: c, NC: nc, Metrics: m, Log: slog.New(slog.NewTextHandler(t.Output(), nil))}), m
}

// mustAntiEntropy is ingest.NewAntiEntropy, failing the test on a refused
// configuration.
func mustAntiEntropy(t *testing.T, cfg ingest.AntiEntropyConfig, d ingest.AntiEntropyDeps) *ingest.AntiEntropy {
	t.Helper()
	ae, err := ingest.NewAntiEntropy(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	return ae
}

// TestAntiEntropyRepairsLostWrites: documents deleted or rewound in Redis
// behind ingest's back, listing entries and trades lost, are restored
// exactly (Redis equals a fresh rebuild), announced in a change notice, and
// counted; a second pass finds nothing to do.
func TestAntiEntropyRepairsLostWrites(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	ingestBatch(t, e.st, e.cache, aeBatch(40, 1))
	ingestBatch(t, e.st, e.cache, aeBatch(40, 2))
	if _, err := e.cache.Rebuild(ctx, e.st); err != nil { // marks the listing complete
		t.Fatal(err)
	}
	want := rebuiltDump(t, e.st, e.rules)
	if got := dump(t, e.rdb, e.prefix); len(got) != len(want) {
		t.Fatalf("fixture: %d keys, rebuild %d", len(got), len(want))
	}
	// What a lost acknowledged write leaves: missing documents, documents
	// at an older revision, a lost listing entry, lost trades.
	old := e.cache.MarketKey("AE003-m0")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.rdb.Del(ctx, e.cache.EventKey("AE001"), e.cache.MarketKey("AE002-m1"), e.cache.TradesKey("AE004-m0")).Err())
	must(e.rdb.HSet(ctx, old, "g", "1", "b", `{"stale":true}`).Err())
	must(e.rdb.HSet(ctx, e.cache.EventKey("AE005"), "g", "2", "b", "older").Err())
	must(e.rdb.HDel(ctx, e.prefix+"{i}:g", "AE006").Err())
	must(e.rdb.HDel(ctx, e.prefix+"{i}:s", "AE006").Err())
	must(e.rdb.ZRem(ctx, e.prefix+"{i}:v", "AE006").Err())
	must(e.rdb.ZPopMax(ctx, e.cache.TradesKey("AE007-m1")).Err())

	notices, err := e.nc.SubscribeSync(e.names.NoticeSubject)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	ae, _ := newAntiEntropy(t, e.st, e.cache, e.nc, e.names.NoticeSubject, reg, 25) // several pages
	st, err := ae.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Events != 2 || st.Listings != 1 || st.Markets != 2 || st.TradeLists != 2 {
		t.Errorf("repaired: got %+v, want 2 events, 1 listing, 2 markets, 2 trade lists", st)
	}
	diffDumps(t, dump(t, e.rdb, e.prefix), want)

	// One notice per page that repaired something.
	var n notice.Change
	for {
		msg, err := notices.NextMsg(time.Second)
		if err != nil {
			break
		}
		var page notice.Change
		if err := json.Unmarshal(msg.Data, &page); err != nil {
			t.Fatal(err)
		}
		if page.Seq == 0 {
			t.Errorf("anti-entropy notice %+v without the change number its write took", page)
		}
		n.Events = append(n.Events, page.Events...)
		n.Markets = append(n.Markets, page.Markets...)
		n.Trades = append(n.Trades, page.Trades...)
	}
	for _, id := range []string{"AE001", "AE005", "AE006"} {
		if !slices.Contains(n.Events, id) {
			t.Errorf("notice events %v: want %s", n.Events, id)
		}
	}
	if !slices.Contains(n.Markets, "AE002-m1") || !slices.Contains(n.Trades, "AE004-m0") {
		t.Errorf("notice: %+v, want markets AE002-m1 and trades AE004-m0", n)
	}
	if got := metrictest.Value(t, reg, "marketdata_ingest_antientropy_repaired_total", "kind", "market"); got != 2 {
		t.Errorf("repaired_total{kind=market}: got %v, want 2", got)
	}
	if got := metrictest.Value(t, reg, "marketdata_ingest_antientropy_checked_total"); got < 40+80+80 {
		t.Errorf("checked_total: got %v, want at least 200", got)
	}
	if metrictest.Value(t, reg, lastPassMetric) == 0 {
		t.Errorf("last pass timestamp not set")
	}

	again, err := ae.Pass(ctx)
	if err != nil || again.Repaired() != 0 || again.Listings != 0 {
		t.Errorf("second pass: %+v (%v), want nothing repaired", again, err)
	}
}

// TestAntiEntropyStepsShareOneWalk: two processes' periodic steps walk the
// store once between them (the position and a lock are in Redis) and repair
// what is behind.
func TestAntiEntropyStepsShareOneWalk(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	ingestBatch(t, e.st, e.cache, aeBatch(30, 1))
	if _, err := e.cache.Rebuild(ctx, e.st); err != nil {
		t.Fatal(err)
	}
	want := rebuiltDump(t, e.st, e.rules)
	if err := e.rdb.Del(ctx, e.cache.EventKey("AE029"), e.cache.MarketKey("AE000-m0")).Err(); err != nil {
		t.Fatal(err)
	}
	reg1, reg2 := prometheus.NewRegistry(), prometheus.NewRegistry()
	a1, _ := newAntiEntropy(t, e.st, e.cache, nil, "", reg1, 10)
	a2, _ := newAntiEntropy(t, e.st, e.cache, nil, "", reg2, 10)
	// The walk is complete when one of the two finished it: that worker
	// records the pass's end (Checked also counts trade windows, so it
	// cannot tell).
	walked := func() bool {
		return metrictest.Value(t, reg1, lastPassMetric) > 0 || metrictest.Value(t, reg2, lastPassMetric) > 0
	}
	var mu sync.Mutex
	var total ingest.PassStats
	var wg sync.WaitGroup
	for _, a := range []*ingest.AntiEntropy{a1, a2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 90 documents, 10 a page: the two share one walk, so between
			// them 10 steps cover it. A step that finds the other holding
			// the lock checks nothing, so step until the walk is complete
			// (bounded: a walk that never ends fails the test).
			deadline := time.Now().Add(30 * time.Second)
			for !walked() {
				if time.Now().After(deadline) {
					t.Errorf("the shared walk did not complete within 30s")
					return
				}
				st, err := a.Step(ctx)
				if err != nil {
					t.Errorf("step: %v", err)
					return
				}
				mu.Lock()
				total.Checked += st.Checked
				total.Events += st.Events
				total.Markets += st.Markets
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if total.Events != 1 || total.Markets != 1 {
		t.Errorf("repaired: got %+v, want 1 event and 1 market", total)
	}
	diffDumps(t, dump(t, e.rdb, e.prefix), want)
}

// TestAntiEntropyAfterClusterFailover: writes acknowledged by a master just
// before it is SIGKILLed may be lost with it; after the replica's promotion
// the pass (started by the topology change) leaves Redis equal to a rebuild.
func TestAntiEntropyAfterClusterFailover(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	cl := testenv.StartRedisCluster(t)
	rdb, err := redisx.Open(cl.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	c := cache.New(rdb, "md:", e.rules)
	ingestBatch(t, e.st, c, aeBatch(60, 1))
	if _, err := c.Rebuild(ctx, e.st); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	ae, _ := newAntiEntropy(t, e.st, c, nil, "", reg, 200)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { ae.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()

	// Writes, then the master of one of them dies at once; some of those
	// writes may not have reached its replica.
	ingestBatch(t, e.st, c, aeBatch(60, 2))
	dead := cl.KillMaster(ctx, c.EventKey("AE010"))
	if _, _, err := cl.WaitPromoted(ctx, dead, c.EventKey("AE010")); err != nil {
		t.Fatal(err)
	}
	// Lose writes for sure, as a replica that lagged would: rewind some
	// documents (on every shard, the promoted one included).
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cl.WaitHealthy(wctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 60; i += 3 {
		k := c.EventKey(fmt.Sprintf("AE%03d", i))
		for {
			err := rdb.HSet(ctx, k, "g", "1").Err()
			if err == nil {
				break
			}
			if wctx.Err() != nil {
				t.Fatalf("rewind %s after the failover: %v", k, err)
			}
			time.Sleep(50 * time.Millisecond) // the client follows the promotion
		}
	}
	want := rebuiltDump(t, e.st, e.rules)
	deadline := time.Now().Add(45 * time.Second)
	var got map[string]string
	for {
		got = clusterDump(t, rdb, "md:")
		if equalDumps(got, want) && metrictest.Value(t, reg, lastPassMetric) > 0 {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // polling Redis for the pass's effect
	}
	diffDumps(t, got, want)
	t.Logf("repaired events %v markets %v trades %v",
		metrictest.Value(t, reg, "marketdata_ingest_antientropy_repaired_total", "kind", "event"),
		metrictest.Value(t, reg, "marketdata_ingest_antientropy_repaired_total", "kind", "market"),
		metrictest.Value(t, reg, "marketdata_ingest_antientropy_repaired_total", "kind", "trades"))
}

func equalDumps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// clusterDump is dump over every master of a cluster.
func clusterDump(t *testing.T, rdb redis.UniversalClient, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	var mu sync.Mutex
	cc, ok := rdb.(*redisx.Cluster)
	if !ok {
		t.Fatalf("cluster dump of %T", rdb)
	}
	var masters []*redis.Client
	err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		mu.Lock()
		masters = append(masters, n)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range masters {
		maps.Copy(out, dump(t, n, prefix))
	}
	return out
}

// lastPassMetric is when the anti-entropy pass last completed a walk.
const lastPassMetric = "marketdata_ingest_antientropy_last_pass_timestamp_seconds"

// flakyCache fails its writes while fail is set, as Redis does during a
// failover.
type flakyCache struct {
	ingest.Cache
	fail atomic.Bool
}

func (f *flakyCache) Apply(ctx context.Context, res *store.Result) (notice.Change, error) {
	if f.fail.Load() {
		return notice.Change{}, errors.New("cache: write: dial tcp 127.0.0.1:1: connect: connection refused")
	}
	return f.Cache.Apply(ctx, res)
}

// TestAntiEntropyAfterWriteErrors: on one Redis server (no topology to
// watch), the first cache write that succeeds after failures starts a full
// pass at once, which repairs what was lost meanwhile.
func TestAntiEntropyAfterWriteErrors(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	ingestBatch(t, e.st, e.cache, aeBatch(10, 1))
	if _, err := e.cache.Rebuild(ctx, e.st); err != nil {
		t.Fatal(err)
	}
	cfg := ingest.DefaultAntiEntropyConfig()
	cfg.Interval = time.Hour
	ae := mustAntiEntropy(t, cfg, ingest.AntiEntropyDeps{
		Store: e.st, Cache: e.cache, Log: slog.New(slog.NewTextHandler(t.Output(), nil))})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { ae.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()

	flaky := &flakyCache{Cache: e.cache}
	w := ae.WatchWrites(flaky)
	// A batch committed while Redis refused it: its cache write is lost.
	b := aeBatch(10, 2)
	res, err := e.st.ApplyBatch(ctx, &b)
	if err != nil {
		t.Fatal(err)
	}
	flaky.fail.Store(true)
	if _, err := w.Apply(ctx, res); err == nil {
		t.Fatal("write while failing: got no error")
	}
	flaky.fail.Store(false)
	b3 := store.Batch{Events: aeBatch(1, 3).Events}
	res3, err := e.st.ApplyBatch(ctx, &b3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Apply(ctx, res3); err != nil {
		t.Fatal(err)
	}
	want := rebuiltDump(t, e.st, e.rules)
	var got map[string]string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if got = dump(t, e.rdb, e.prefix); equalDumps(got, want) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling Redis for the pass's effect
	}
	diffDumps(t, got, want)
}
