package cache_test

import (
	"context"
	"strings"
	"testing"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/cache/cachetest"
	"github.com/marketdata/marketdata/store"
)

// lateSource is a store whose snapshot is taken, then an ingest batch commits
// and is cached, as if ingest ran while the rebuild read its snapshot.
type lateSource struct {
	*store.Store
	t     *testing.T
	c     *cache.Cache
	batch store.Batch
}

func (s *lateSource) Snapshot(ctx context.Context) (*store.Snapshot, error) {
	snap, err := s.Store.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	// The snapshot's view starts at its first query: take it now.
	if err := snap.EventDocs(ctx, 1, func(store.EventDoc) error { return nil }); err != nil {
		return nil, err
	}
	res, err := s.Store.ApplyBatch(ctx, &s.batch)
	if err != nil {
		return nil, err
	}
	apply(s.t, s.c, res)
	return snap, nil
}

// TestRebuildKeepsConcurrentIngest: what ingest commits and caches after the
// rebuild's snapshot survives the rebuild: new documents, listing entries and
// trades, and newer revisions of existing documents.
func TestRebuildKeepsConcurrentIngest(t *testing.T) {
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

	late := store.Batch{
		Events:  []store.Event{*activeEvent("E7", "late", map[string]string{"a": "A7", "b": "B7"})},
		Markets: []store.Market{activeMarket("m9", "E7")},
		Prices:  []store.Price{{MarketID: "m1", Version: 50, TS: testNow, Quotes: map[string]store.Quote{}}},
		Trades: []store.Trade{
			{MarketID: "m1", TradeID: "late1", Venue: "venue_a", Price: 0.5, Size: 1, Side: "buy", TS: testNow},
			{MarketID: "m9", TradeID: "late2", Venue: "venue_b", Price: 0.5, Size: 1, Side: "sell", TS: testNow},
		},
	}
	late.Events[0].Version, late.Markets[0].Version = 1, 1
	late.Events[0].UpdatedAt, late.Markets[0].UpdatedAt = testNow, testNow
	if _, err := c.Rebuild(ctx, &lateSource{Store: st, t: t, c: c, batch: late}); err != nil {
		t.Fatal(err)
	}
	got := dump(t, rdb, prefix)

	// The reference: the same state cached by ingest alone, rebuilt calmly.
	if _, err := c.Rebuild(ctx, st); err != nil {
		t.Fatal(err)
	}
	want := dump(t, rdb, prefix)
	for _, k := range []string{"{e:E7}", "{m:m9}", "{m:m9}:t", "{i}:f:late:*:1"} {
		if _, ok := got[k]; !ok {
			t.Errorf("%s: deleted by a rebuild that ran while ingest wrote it", k)
		}
	}
	checkDump(t, got, want)
	ms, err := c.Markets(ctx, []string{"m1"})
	if err != nil || ms[0].Body == nil || !strings.Contains(string(ms[0].Body), `"version":50`) {
		t.Errorf("m1 price item after the rebuild: got %s (%v), want version 50", ms[0].Body, err)
	}
}

// TestRebuildRevisionsAhead: after Postgres is restored from an older backup,
// Redis holds revisions above the store's. A rebuild repairs the documents
// anyway, and later ingest writes win again.
func TestRebuildRevisionsAhead(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	c, rdb, _ := newCache(t)
	batches := rebuildBatches()
	for i, b := range batches {
		res, err := st.ApplyBatch(ctx, &b)
		if err != nil {
			t.Fatalf("batch %d: %v", i+1, err)
		}
		apply(t, c, res)
	}
	good, err := cachetest.Event(ctx, rdb, c, "E1")
	if err != nil {
		t.Fatal(err)
	}
	// Revisions from a future the restored database never saw.
	if err := rdb.HSet(ctx, c.EventKey("E1"), "g", "999999999", "b", "garbage").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, c.MarketKey("m1"), "g", "999999999", "b", "garbage").Err(); err != nil {
		t.Fatal(err)
	}
	stats, err := c.Rebuild(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Renumbered == 0 {
		t.Errorf("renumbered: got 0, want every document")
	}
	got, err := cachetest.Event(ctx, rdb, c, "E1")
	if err != nil || string(got.Body) != string(good.Body) || got.Rev <= 999999999 {
		t.Errorf("E1 after rebuild: rev %d body %.80s (%v), want the stored document above 999999999", got.Rev, got.Body, err)
	}
	ms, err := c.Markets(ctx, []string{"m1"})
	if err != nil || string(ms[0].Body) == "garbage" {
		t.Errorf("m1 after rebuild: %s (%v), want the price item", ms[0].Body, err)
	}
	// Ingest's next write of E1 must land.
	e := batches[1].Events[0]
	e.Version, e.Title = e.Version+1, "after the restore"
	res, err := st.ApplyBatch(ctx, &store.Batch{Events: []store.Event{e}})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, c, res)
	got, err = cachetest.Event(ctx, rdb, c, "E1")
	if err != nil || !strings.Contains(string(got.Body), "after the restore") {
		t.Errorf("E1 after a later ingest write: %.120s (%v), want the new title", got.Body, err)
	}
}
