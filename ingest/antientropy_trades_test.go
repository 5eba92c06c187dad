package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/ingest"
	"github.com/marketdata/marketdata/internal/metrictest"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/store"
)

// tradeBatch is one trade and one price for each of markets, the i-th of
// the feed: trade ids and times and price versions grow with i.
func tradeBatch(markets []string, i int) store.Batch {
	var b store.Batch
	ts := fixedNow.Add(-time.Hour).Add(time.Duration(i) * time.Millisecond)
	for _, m := range markets {
		bid := 0.3 + float64(i%50)/100
		b.Prices = append(b.Prices, store.Price{MarketID: m, Version: int64(100 + i), TS: ts,
			Quotes: map[string]store.Quote{"venue_a": {Bid: &bid, Volume24h: float64(i)}}})
		b.Trades = append(b.Trades, store.Trade{MarketID: m, TradeID: fmt.Sprintf("%s-f%06d", m, i), Venue: "venue_a",
			Price: 0.5, Size: 1, Side: "sell", TS: ts})
	}
	return b
}

// aeMarkets are the market ids of aeBatch(n, v).
func aeMarkets(n int) []string {
	var out []string
	for i := range n {
		for j := range 2 {
			out = append(out, fmt.Sprintf("AE%03d-m%d", i, j))
		}
	}
	return out
}

// landingCache completes an ingest write (land) right after the pass's
// n-th read of trade lists in Redis, before the pass goes on: the pass
// compares while ingest has committed to Postgres and not yet written
// Redis.
type landingCache struct {
	ingest.AntiEntropyCache
	after  int
	land   func()
	reads  int
	landed bool
}

func (c *landingCache) read() {
	c.reads++
	if c.reads == c.after {
		c.land()
		c.landed = true
	}
}

func (c *landingCache) ReadTradeWindows(ctx context.Context, markets []string) (map[string]cache.TradeWindow, error) {
	defer c.read()
	return c.AntiEntropyCache.ReadTradeWindows(ctx, markets)
}

func (c *landingCache) MissingTrades(ctx context.Context, trades []store.Trade) (map[string][]store.Trade, error) {
	defer c.read()
	return c.AntiEntropyCache.MissingTrades(ctx, trades)
}

// wantTradeList is the trade list a rebuild would write for market: its
// newest trades in Postgres, as Redis holds them.
func wantTradeList(t *testing.T, st *store.Store, market string) []string {
	t.Helper()
	ts, err := st.NewestTrades(context.Background(), market, cache.MaxTrades)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(ts))
	for i := range ts {
		out[len(ts)-1-i] = fmt.Sprintf("%s=%v", cache.RenderTrade(&ts[i]), cache.TradeScore(&ts[i])) // oldest first
	}
	return out
}

// gotTradeList is the trade list Redis holds for market, oldest first.
func gotTradeList(t *testing.T, e *env, market string) []string {
	t.Helper()
	zs, err := e.rdb.ZRangeWithScores(context.Background(), e.cache.TradesKey(market), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(zs))
	for i, z := range zs {
		out[i] = fmt.Sprintf("%s=%v", z.Member, z.Score)
	}
	return out
}

func checkTradeLists(t *testing.T, e *env, markets []string) {
	t.Helper()
	for _, m := range markets {
		got, want := gotTradeList(t, e, m), wantTradeList(t, e.st, m)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("trade list of %s: got %d trades %q, want %d %q", m, len(got), got, len(want), want)
		}
	}
}

// TestAntiEntropyTradesInFlight: trades ingest has committed to Postgres
// and not yet written to Redis when the pass compares are not a loss: the
// pass neither counts nor rewrites them, whichever of its looks at Redis
// the write lands after: its look at the trade windows (1), or its first
// look at the lists themselves (2).
func TestAntiEntropyTradesInFlight(t *testing.T) {
	for _, after := range []int{1, 2} {
		t.Run(fmt.Sprintf("lands after read %d", after), func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			ingestBatch(t, e.st, e.cache, aeBatch(10, 1))
			if _, err := e.cache.Rebuild(ctx, e.st); err != nil {
				t.Fatal(err)
			}
			// Ingest commits a batch of trades and prices and is about to
			// write it to Redis.
			markets := aeMarkets(10)[3:6]
			b := tradeBatch(markets, 1)
			res, err := e.st.ApplyBatch(ctx, &b)
			if err != nil {
				t.Fatal(err)
			}
			lc := &landingCache{AntiEntropyCache: e.cache, after: after, land: func() {
				if _, err := e.cache.Apply(ctx, res); err != nil {
					t.Errorf("ingest's cache write: %v", err)
				}
			}}
			reg := prometheus.NewRegistry()
			cfg := ingest.DefaultAntiEntropyConfig()
			ae := mustAntiEntropy(t, cfg, ingest.AntiEntropyDeps{Store: e.st, Cache: lc, Metrics: ingest.NewAntiEntropyMetrics(reg)})
			st, err := ae.Pass(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// The write lands before the next look at Redis, which finds
			// nothing missing and ends the pass's looks at trades.
			if !lc.landed || lc.reads != after+1 {
				t.Fatalf("reads of trade lists in Redis: %d (landed after read %d: %v), want %d", lc.reads, after, lc.landed, after+1)
			}
			if st.TradeLists != 0 {
				t.Errorf("trade lists repaired: got %d, want 0 (ingest was writing them); pass %+v", st.TradeLists, st)
			}
			if got := metrictest.Value(t, reg, "marketdata_ingest_antientropy_repaired_total", "kind", "trades"); got != 0 {
				t.Errorf("repaired_total{kind=trades}: got %v, want 0", got)
			}
			checkTradeLists(t, e, markets)
		})
	}
}

// TestAntiEntropyNoTradeRepairsUnderFeed: with a feed of trades and prices
// committed and cached as the worker does, full passes (which compare
// while batches are between Postgres and Redis) repair no trade list.
func TestAntiEntropyNoTradeRepairsUnderFeed(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	ingestBatch(t, e.st, e.cache, aeBatch(20, 1))
	if _, err := e.cache.Rebuild(ctx, e.st); err != nil {
		t.Fatal(err)
	}
	markets := aeMarkets(20)
	feedCtx, stopFeed := context.WithCancel(ctx)
	var batches atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; feedCtx.Err() == nil; i++ {
			// Four markets a batch, walking over all of them.
			k := (i * 4) % len(markets)
			b := tradeBatch(markets[k:k+4], i)
			res, err := e.st.ApplyBatch(ctx, &b)
			if err != nil {
				t.Errorf("feed: %v", err)
				return
			}
			if _, err := e.cache.Apply(ctx, res); err != nil {
				t.Errorf("feed: cache: %v", err)
				return
			}
			batches.Add(1)
		}
	}()
	defer func() { stopFeed(); wg.Wait() }()

	// The feed is running before the first pass starts.
	for deadline := time.Now().Add(10 * time.Second); batches.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the feed wrote no batch within 10s")
		}
		time.Sleep(10 * time.Millisecond) // waiting for the feed's first batch
	}
	reg := prometheus.NewRegistry()
	ae, _ := newAntiEntropy(t, e.st, e.cache, nil, "", reg, 10) // 100 documents: 10 pages a pass
	// Full passes, at least 3, until the feed has written 200 batches
	// while they ran.
	var total ingest.PassStats
	passes, during := 0, int64(0)
	for deadline := time.Now().Add(30 * time.Second); passes < 3 || during < 200; passes++ {
		if time.Now().After(deadline) {
			t.Fatalf("%d passes in 30s with %d feed batches during them, want 3 and 200", passes, during)
		}
		before := batches.Load()
		st, err := ae.Pass(ctx)
		if err != nil {
			t.Fatal(err)
		}
		during += batches.Load() - before
		total.Checked += st.Checked
		total.TradeLists += st.TradeLists
		total.Events += st.Events
		total.Markets += st.Markets
		total.Listings += st.Listings
	}
	stopFeed()
	wg.Wait()
	t.Logf("%d passes with %d feed batches during them; repaired: %+v", passes, during, total)
	if total.TradeLists != 0 {
		t.Errorf("trade lists repaired over %d passes under the feed: got %d, want 0", passes, total.TradeLists)
	}
	if got := metrictest.Value(t, reg, "marketdata_ingest_antientropy_repaired_total", "kind", "trades"); got != 0 {
		t.Errorf("repaired_total{kind=trades}: got %v, want 0", got)
	}
	checkTradeLists(t, e, markets)
}

// TestAntiEntropyRepairsLostTradeLists: trade lists that really lost trades
// in Redis (the key deleted, the newest trades popped, the oldest of a full
// list popped) are rewritten within one pass to Postgres' newest trades and
// counted; lists that only hold trades newer than the window read are not.
func TestAntiEntropyRepairsLostTradeLists(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	ingestBatch(t, e.st, e.cache, aeBatch(5, 1))
	markets := aeMarkets(5)
	// Two full lists: 250 trades each, more than Redis keeps.
	for i := 1; i <= 250; i++ {
		ingestBatch(t, e.st, e.cache, store.Batch{Trades: tradeBatch(markets[:2], i).Trades})
	}
	if _, err := e.cache.Rebuild(ctx, e.st); err != nil {
		t.Fatal(err)
	}
	checkTradeLists(t, e, markets) // the fixture

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.rdb.ZPopMax(ctx, e.cache.TradesKey(markets[0]), 3).Err())
	must(e.rdb.ZPopMin(ctx, e.cache.TradesKey(markets[1])).Err())
	must(e.rdb.Del(ctx, e.cache.TradesKey(markets[4])).Err())
	// Redis ahead of Postgres: a trade in Redis only. Not a loss, and
	// nothing a rewrite from Postgres would change.
	extra := store.Trade{MarketID: markets[6], TradeID: markets[6] + "-x", Venue: "venue_a", Price: 0.5, Size: 1,
		Side: "buy", TS: fixedNow.Add(-time.Minute)}
	must(e.rdb.ZAdd(ctx, e.cache.TradesKey(markets[6]), redis.Z{Score: cache.TradeScore(&extra), Member: cache.RenderTrade(&extra)}).Err())

	notices, err := e.nc.SubscribeSync(e.names.NoticeSubject)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := ingest.DefaultAntiEntropyConfig()
	cfg.NoticeSubject, cfg.Settle = e.names.NoticeSubject, 100*time.Millisecond
	ae := mustAntiEntropy(t, cfg, ingest.AntiEntropyDeps{Store: e.st, Cache: e.cache, NC: e.nc, Metrics: ingest.NewAntiEntropyMetrics(reg)})
	st, err := ae.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.TradeLists != 3 || st.Repaired() != 3 {
		t.Errorf("repaired: got %+v, want 3 trade lists and nothing else", st)
	}
	if got := metrictest.Value(t, reg, "marketdata_ingest_antientropy_repaired_total", "kind", "trades"); got != 3 {
		t.Errorf("repaired_total{kind=trades}: got %v, want 3", got)
	}
	checkTradeLists(t, e, []string{markets[0], markets[1], markets[2], markets[4]})
	if got := gotTradeList(t, e, markets[6]); len(got) != 2 {
		t.Errorf("trade list of %s (one trade in Postgres, one more in Redis): got %q, want both kept", markets[6], got)
	}
	msg, err := notices.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("change notice of the repair: %v", err)
	}
	var n notice.Change
	if err := json.Unmarshal(msg.Data, &n); err != nil {
		t.Fatal(err)
	}
	if want := []string{markets[0], markets[1], markets[4]}; !slices.Equal(slices.Sorted(slices.Values(n.Trades)), want) {
		t.Errorf("notice trades: got %v, want %v", n.Trades, want)
	}

	again, err := ae.Pass(ctx)
	if err != nil || again.Repaired() != 0 {
		t.Errorf("second pass: %+v (%v), want nothing repaired", again, err)
	}
}
