package cache_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/internal/redisx"
	"github.com/marketdata/marketdata/internal/testenv"
	"github.com/marketdata/marketdata/store"
)

// newStore returns a store on a migrated database of the test's own.
func newStore(t *testing.T) *store.Store {
	t.Helper()
	ctx := context.Background()
	dsn := testenv.Database(t)
	if _, err := store.Migrate(ctx, dsn); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	pool, err := store.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return store.New(pool)
}

// dump reads every key under prefix into a comparable form: strings as they
// are, hashes as sorted field=value lines, zsets as score member lines in
// rank order.
func dump(t *testing.T, rdb redis.UniversalClient, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, key := range scanKeys(t, rdb, prefix+"*") {
		if strings.HasSuffix(key, "{i}:ok") || strings.Contains(key, "{i}:cursor:") || strings.Contains(key, "{i}:lock:") ||
			strings.HasSuffix(key, "{n}:seq") {
			continue // the rebuild's completion marker, writers' and workers' bookkeeping: not documents
		}
		typ, err := rdb.Type(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		var val string
		switch typ {
		case "string":
			val, err = rdb.Get(ctx, key).Result()
		case "hash":
			var h map[string]string
			h, err = rdb.HGetAll(ctx, key).Result()
			var lines []string
			for f, v := range h {
				if f == "q" {
					continue // the change number of the write that stored it: bookkeeping, not content
				}
				lines = append(lines, f+"="+v)
			}
			slices.Sort(lines)
			val = strings.Join(lines, "\n")
		case "zset":
			var zs []redis.Z
			zs, err = rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
			var lines []string
			for _, z := range zs {
				lines = append(lines, fmt.Sprintf("%.0f %s", z.Score, z.Member))
			}
			val = strings.Join(lines, "\n")
		default:
			t.Fatalf("%s: unexpected type %s", key, typ)
		}
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(key, prefix)] = typ + ":" + val
	}
	return out
}

// scanKeys lists the keys matching pattern on one server or on every master
// of a cluster.
func scanKeys(t *testing.T, rdb redis.UniversalClient, pattern string) []string {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	switch r := rdb.(type) {
	case *redisx.Cluster:
		err = r.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, r)
	default:
		t.Fatalf("scan on %T", rdb)
	}
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

func checkDump(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: missing, want %s", k, w)
		} else if g != w {
			t.Errorf("%s:\n got %s\nwant %s", k, g, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: got %s, want no such key", k, g)
		}
	}
}

func rebuild(t *testing.T, st *store.Store, c *cache.Cache) cache.RebuildStats {
	t.Helper()
	ctx := context.Background()
	stats, err := c.Rebuild(ctx, st)
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	return stats
}

// rebuildBatches are three commits: events of every serving state, markets
// active, recently and long resolved or of an unknown event, prices with and
// without a market, trades with equal timestamps, then updates that move and
// resolve events and replay trades.
func rebuildBatches() []store.Batch {
	at := func(d time.Duration) time.Time { return testNow.Add(-d) }
	ev := func(id string, v int64, cat, status string, vs map[string]string) store.Event {
		e := activeEvent(id, cat, vs)
		e.Version, e.Status, e.Volume, e.UpdatedAt = v, status, 100.25*float64(v), at(time.Duration(v)*time.Minute+time.Microsecond)
		return *e
	}
	abc := map[string]string{"a": "A1", "b": "B1", "c": "C1"}
	ab := map[string]string{"a": "A2", "b": "B2"}
	merged := ev("E4", 1, "politics", store.StatusMerged, ab)
	merged.MergedInto = ptr("E1")
	mkt := func(m store.Market, v int64) store.Market {
		m.Version, m.UpdatedAt = v, at(time.Duration(v)*time.Second)
		return m
	}
	price := func(id string, v int64, bid float64) store.Price {
		return store.Price{MarketID: id, Version: v, TS: at(time.Duration(v) * time.Millisecond),
			Quotes: map[string]store.Quote{"venue_a": quote(ptr(bid), ptr(bid+0.05), nil, 12.5), "venue_b": quote(ptr(bid+0.01), nil, ptr(0.5), 0)}}
	}
	trade := func(id, market string, us int64) store.Trade {
		return store.Trade{MarketID: market, TradeID: id, Venue: "venue_a", Price: 0.37, Size: 2.5, Side: "sell",
			TS: at(time.Hour).Add(time.Duration(us) * time.Microsecond)}
	}
	b1 := store.Batch{
		Events: []store.Event{ev("E1", 1, "politics", store.StatusActive, abc), ev("E2", 1, "sports", store.StatusActive, ab),
			ev("E3", 1, "sports", store.StatusActive, map[string]string{"d": "D3"}), merged},
		Markets: []store.Market{mkt(activeMarket("m1", "E1"), 1), mkt(resolvedMarket("m2", "E1", time.Hour), 1),
			mkt(resolvedMarket("m3", "E1", testRetention+time.Hour), 1), mkt(activeMarket("m4", "E2"), 1),
			mkt(activeMarket("m5", "E9"), 1)},
		Prices: []store.Price{price("m1", 1, 0.3), price("m2", 1, 0.9), price("m3", 1, 0.1), price("m4", 1, 0.4),
			price("m5", 1, 0.5), price("m6", 1, 0.6)},
		Trades: []store.Trade{trade("t1", "m1", 1), trade("t2", "m1", 2), trade("t3", "m1", 2), trade("t10", "m1", 2),
			trade("t4", "m4", 5), trade("t5", "m7", 5)},
	}
	b2 := store.Batch{
		Events:  []store.Event{ev("E1", 2, "world", store.StatusActive, abc), ev("E2", 2, "sports", store.StatusResolved, ab)},
		Markets: []store.Market{mkt(resolvedMarket("m4", "E2", 2*time.Hour), 2)},
		Prices:  []store.Price{price("m1", 2, 0.35)},
		Trades:  []store.Trade{trade("t1", "m1", 1), trade("t6", "m1", 3)},
	}
	// E5's links all have metadata: it has a {i}:m entry.
	e5 := ev("E5", 1, "world", store.StatusActive, map[string]string{"a": "A5", "b": "B5", "c": "C5", "d": "D5"})
	for i := range e5.Matches {
		e5.Matches[i] = m(store.RelationIdentity, 0.25*float64(i+1), "rules")
	}
	b3 := store.Batch{
		Events:  []store.Event{e5},
		Markets: []store.Market{mkt(activeMarket("m8", "E5"), 1)},
		Prices:  []store.Price{price("m8", 3, 0.2), price("m1", 1, 0.99)}, // m1's is stale
	}
	return []store.Batch{b1, b2, b3}
}

func TestRebuildMatchesIngestAndPrunes(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	c, rdb, prefix := newCache(t)

	for i, b := range rebuildBatches() {
		res, err := st.ApplyBatch(ctx, &b)
		if err != nil {
			t.Fatalf("batch %d: %v", i+1, err)
		}
		apply(t, c, res)
	}
	want := dump(t, rdb, prefix)
	// A sanity check that the fixture reaches every kind of key.
	for _, k := range []string{"{e:E1}", "{e:E4}", "{e:E9}", "{m:m1}", "{m:m6}", "{m:m1}:t", "{m:m7}:t",
		"{i}:g", "{i}:s", "{i}:k", "{i}:m", "{i}:f:world:venue_c:3", "{i}:f:*:venue_d:4"} {
		if _, ok := want[k]; !ok {
			t.Fatalf("fixture: no key %s in %v", k, slices.Sorted(maps.Keys(want)))
		}
	}

	t.Run("same state", func(t *testing.T) {
		stats := rebuild(t, st, c)
		if want := (cache.RebuildStats{Events: 6, Markets: 7, TradeLists: 3}); stats != want {
			t.Errorf("stats: got %+v, want %+v", stats, want)
		}
		checkDump(t, dump(t, rdb, prefix), want)
	})

	t.Run("junk and damage", func(t *testing.T) {
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(rdb.Set(ctx, prefix+"{e:junk}", "x", 0).Err())
		must(rdb.HSet(ctx, c.MarketKey("junk"), "g", "1", "s", "1").Err())
		must(rdb.ZAdd(ctx, c.TradesKey("junk"), redis.Z{Score: 1, Member: "{}"}).Err())
		must(rdb.ZAdd(ctx, c.SetKey("*:*:1"), redis.Z{Member: "junk"}).Err())
		must(rdb.ZAdd(ctx, c.SetKey("nocat:*:1"), redis.Z{Member: "junk"}).Err())
		must(rdb.HSet(ctx, prefix+"{i}:s", "junk", "{}").Err())
		must(rdb.HSet(ctx, prefix+"{i}:g", "junk", "99").Err())
		must(rdb.HSet(ctx, prefix+"{i}:k", "junk", "*:*:1 nocat:*:1").Err())
		must(rdb.HSet(ctx, prefix+"{i}:m", "junk", "1 identity", "E1", "1 identity").Err())
		// Damage that a forced rewrite at the same revision repairs.
		must(rdb.HSet(ctx, c.EventKey("E1"), "b", "garbage").Err())
		must(rdb.HDel(ctx, c.MarketKey("m1"), "s").Err())
		must(rdb.ZPopMax(ctx, c.TradesKey("m1")).Err())
		must(rdb.ZAdd(ctx, c.TradesKey("m1"), redis.Z{Score: 1, Member: "not a stored trade"}).Err())
		must(rdb.HSet(ctx, prefix+"{i}:s", "E5", "stale").Err())
		must(rdb.HSet(ctx, prefix+"{i}:m", "E5", "0 -").Err())

		stats := rebuild(t, st, c)
		if stats.Pruned < 5 {
			t.Errorf("pruned: got %d, want at least 5 (4 junk keys, listing entries)", stats.Pruned)
		}
		checkDump(t, dump(t, rdb, prefix), want)
	})

	t.Run("from empty", func(t *testing.T) {
		keys, err := rdb.Keys(ctx, prefix+"*").Result()
		if err != nil || len(keys) == 0 {
			t.Fatalf("keys: %d, %v", len(keys), err)
		}
		if err := rdb.Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
		stats := rebuild(t, st, c)
		if stats.Pruned != 0 {
			t.Errorf("pruned: got %d, want 0", stats.Pruned)
		}
		checkDump(t, dump(t, rdb, prefix), want)
	})
}
