package cache_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/marketdata/marketdata/cache"
	"github.com/marketdata/marketdata/store"
)

// EnsureComplete's lock and marker, the workers' locks and cursors, and the
// anti-entropy reads, on miniredis. A rebuild that runs to the end needs a
// Postgres snapshot (store.Snapshot is a transaction), so it stays in the
// integration tests (rebuild_test.go, rebuild_race_test.go); here the source
// fails its snapshot, which is as far as a rebuild goes without the store.

// failingSource is a rebuild source whose snapshot fails; during runs while
// the rebuild waits for it.
type failingSource struct {
	snapshots int
	during    func()
}

var errSnapshot = errors.New("store: snapshot: the primary is down")

func (s *failingSource) Snapshot(context.Context) (*store.Snapshot, error) {
	s.snapshots++
	if s.during != nil {
		s.during()
	}
	return nil, errSnapshot
}

func (s *failingSource) TradesByID(context.Context, []string) ([]store.Trade, error) {
	return nil, errors.New("not reached: the snapshot failed")
}

func (s *failingSource) AdvanceRevisions(context.Context, int64) (int, error) {
	return 0, errors.New("not reached: the snapshot failed")
}

const rebuildLock = "md:{i}:rebuilding"

// TestEnsureCompleteSkipsCompleteListing: with the marker set nothing is
// rebuilt and the store is not read.
func TestEnsureCompleteSkipsCompleteListing(t *testing.T) {
	c, rdb, _ := miniCache(t)
	markComplete(t, rdb)
	src := &failingSource{}
	rebuilt, _, err := c.EnsureComplete(context.Background(), src)
	if rebuilt || err != nil || src.snapshots != 0 {
		t.Errorf("got rebuilt %v, %v after %d snapshots; want nothing done", rebuilt, err, src.snapshots)
	}
}

// TestEnsureCompleteLock: without the marker one caller takes the rebuild
// lock (10 minutes, so a worker that dies does not block rebuilds for ever)
// and reads the store; a caller that finds the lock taken does nothing; the
// lock is released when the rebuild ends, even when it failed, and a failed
// rebuild leaves the listing marked incomplete.
func TestEnsureCompleteLock(t *testing.T) {
	c, _, mr := miniCache(t)
	ctx := context.Background()
	applyEvent(t, c, 1, activeEvent("ev", "politics", map[string]string{"a": "A", "b": "B"}))
	other := &failingSource{}
	src := &failingSource{during: func() {
		if !mr.Exists(rebuildLock) {
			t.Errorf("the rebuild reads the store without holding %s", rebuildLock)
		}
		if ttl := mr.TTL(rebuildLock); ttl <= 9*time.Minute || ttl > 10*time.Minute {
			t.Errorf("lock TTL %v, want 10 minutes", ttl)
		}
		// Another worker meanwhile: it must not rebuild too.
		rebuilt, _, err := c.EnsureComplete(ctx, other)
		if rebuilt || err != nil {
			t.Errorf("second worker: rebuilt %v, %v; want nothing done", rebuilt, err)
		}
	}}
	rebuilt, _, err := c.EnsureComplete(ctx, src)
	if rebuilt || !errors.Is(err, errSnapshot) {
		t.Errorf("got rebuilt %v, %v; want the snapshot's error", rebuilt, err)
	}
	if src.snapshots != 1 || other.snapshots != 0 {
		t.Errorf("snapshots: %d by the lock holder, %d by the other; want 1 and 0", src.snapshots, other.snapshots)
	}
	if mr.Exists(rebuildLock) {
		t.Errorf("%s still held after the rebuild failed", rebuildLock)
	}
	if ok, err := c.ListingComplete(ctx); ok || err != nil {
		t.Errorf("ListingComplete after a failed rebuild: %v, %v; want false", ok, err)
	}
	// The lock is free again: the next try rebuilds.
	if _, _, err := c.EnsureComplete(ctx, src); !errors.Is(err, errSnapshot) || src.snapshots != 2 {
		t.Errorf("next try: %v after %d snapshots; want a second rebuild", err, src.snapshots)
	}
}

// TestEnsureCompleteWaitsForHolder: a lock another worker holds is left
// alone (not deleted, its TTL not touched), and nothing is read.
func TestEnsureCompleteWaitsForHolder(t *testing.T) {
	c, rdb, mr := miniCache(t)
	ctx := context.Background()
	if err := rdb.Set(ctx, rebuildLock, "1", 5*time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	src := &failingSource{}
	rebuilt, _, err := c.EnsureComplete(ctx, src)
	if rebuilt || err != nil || src.snapshots != 0 {
		t.Errorf("got rebuilt %v, %v after %d snapshots; want nothing done", rebuilt, err, src.snapshots)
	}
	if ttl := mr.TTL(rebuildLock); ttl != 5*time.Minute {
		t.Errorf("the holder's lock: TTL %v, want it untouched (5m)", ttl)
	}
	// Once the holder's lock expires, the next try rebuilds.
	mr.FastForward(5*time.Minute + time.Millisecond)
	if _, _, err := c.EnsureComplete(ctx, src); !errors.Is(err, errSnapshot) || src.snapshots != 1 {
		t.Errorf("after the lock expired: %v after %d snapshots; want a rebuild", err, src.snapshots)
	}
}

// TestEnsureCompleteRedisDown: without Redis, EnsureComplete reports the
// error and reads nothing.
func TestEnsureCompleteRedisDown(t *testing.T) {
	c, _, mr := miniCache(t)
	mr.Close()
	src := &failingSource{}
	rebuilt, _, err := c.EnsureComplete(context.Background(), src)
	if rebuilt || err == nil || src.snapshots != 0 {
		t.Errorf("got rebuilt %v, %v after %d snapshots; want an error and no rebuild", rebuilt, err, src.snapshots)
	}
}

// TestTryLock: one holder at a time; the holder takes its own lock back
// (its release may have been lost); a release frees only the releaser's
// lock; a lock expires after its TTL.
func TestTryLock(t *testing.T) {
	c, _, mr := miniCache(t)
	ctx := context.Background()
	const key = "md:{i}:lock:antientropy"
	a, b := cache.NewLockToken(), cache.NewLockToken()
	if a == b || len(a) != 24 {
		t.Fatalf("tokens %q and %q: want two distinct 12-byte hex tokens", a, b)
	}
	releaseA, ok, err := c.TryLock(ctx, "antientropy", a, time.Minute)
	if !ok || err != nil {
		t.Fatalf("first TryLock: %v, %v", ok, err)
	}
	if v, _ := mr.Get(key); v != a || mr.TTL(key) != time.Minute {
		t.Errorf("lock holds %q with TTL %v, want %q for 1m", v, mr.TTL(key), a)
	}
	if _, ok, err := c.TryLock(ctx, "antientropy", b, time.Minute); ok || err != nil {
		t.Errorf("second holder: %v, %v; want refused", ok, err)
	}
	if _, ok, err := c.TryLock(ctx, "other", b, time.Minute); !ok || err != nil {
		t.Errorf("another lock name: %v, %v; want taken", ok, err)
	}
	mr.FastForward(30 * time.Second)
	if _, ok, err := c.TryLock(ctx, "antientropy", a, time.Minute); !ok || err != nil || mr.TTL(key) != time.Minute {
		t.Errorf("holder again: %v, %v, TTL %v; want taken back with a fresh TTL", ok, err, mr.TTL(key))
	}
	releaseA()
	if mr.Exists(key) {
		t.Fatal("lock still held after its holder released it")
	}
	releaseB, ok, err := c.TryLock(ctx, "antientropy", b, time.Minute)
	if !ok || err != nil {
		t.Fatalf("after release: %v, %v; want taken", ok, err)
	}
	releaseA() // a stale release: b's lock stays
	if v, _ := mr.Get(key); v != b {
		t.Errorf("a stale release freed another holder's lock: %q", v)
	}
	releaseB()
	if _, ok, _ := c.TryLock(ctx, "antientropy", a, time.Second); !ok {
		t.Fatal("lock not free after b released it")
	}
	mr.FastForward(time.Second + time.Millisecond)
	if _, ok, err := c.TryLock(ctx, "antientropy", b, time.Minute); !ok || err != nil {
		t.Errorf("after the TTL: %v, %v; want the expired lock taken", ok, err)
	}
}

// TestCursor: a shared position reads "" until set, then what was set; it
// expires after a day without writes.
func TestCursor(t *testing.T) {
	c, _, mr := miniCache(t)
	ctx := context.Background()
	if v, err := c.Cursor(ctx, "antientropy"); v != "" || err != nil {
		t.Errorf("unset cursor: %q, %v", v, err)
	}
	if err := c.SetCursor(ctx, "antientropy", "ev-42"); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Cursor(ctx, "antientropy"); v != "ev-42" || err != nil {
		t.Errorf("cursor: %q, %v; want ev-42", v, err)
	}
	if ttl := mr.TTL("md:{i}:cursor:antientropy"); ttl != 24*time.Hour {
		t.Errorf("cursor TTL %v, want 24h", ttl)
	}
	mr.FastForward(24*time.Hour + time.Second)
	if v, err := c.Cursor(ctx, "antientropy"); v != "" || err != nil {
		t.Errorf("expired cursor: %q, %v; want none", v, err)
	}
}

// TestReadRevisions: anti-entropy reads the revisions Redis holds of event
// documents, listing entries and price items, 0 for what is missing; an
// unlisted event keeps its listing revision.
func TestReadRevisions(t *testing.T) {
	c, _, _ := miniCache(t)
	two := map[string]string{"a": "A", "b": "B"}
	resolved := activeEvent("ev-2", "politics", two)
	resolved.Status = store.StatusResolved
	apply(t, c, &store.Result{
		Events:  []store.EventDoc{{ID: "ev-1", Rev: 3, Event: activeEvent("ev-1", "politics", two)}, {ID: "ev-2", Rev: 4, Event: resolved}},
		Markets: []store.MarketDoc{{ID: "m-1", Rev: 5}},
	})
	r, err := c.ReadRevisions(context.Background(), []string{"ev-1", "ev-2", "ev-9"}, []string{"m-1", "m-9"})
	if err != nil {
		t.Fatal(err)
	}
	want := cache.Revisions{
		Events:  map[string]int64{"ev-1": 3, "ev-2": 4, "ev-9": 0},
		Listing: map[string]int64{"ev-1": 3, "ev-2": 4, "ev-9": 0},
		Markets: map[string]int64{"m-1": 5, "m-9": 0},
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
}

// TestReadTradeWindows: the window of a trade list is its length and the
// scores of its oldest and newest trades; a market without trades is left
// out.
func TestReadTradeWindows(t *testing.T) {
	c, _, _ := miniCache(t)
	base := testNow.Add(-time.Hour)
	var trades []store.Trade
	for i := range 3 {
		trades = append(trades, store.Trade{MarketID: "m-1", TradeID: string(rune('a' + i)), Venue: "venue_a",
			Price: 0.5, Size: 1, Side: "buy", TS: base.Add(time.Duration(i) * time.Second)})
	}
	apply(t, c, &store.Result{Trades: trades})
	w, err := c.ReadTradeWindows(context.Background(), []string{"m-1", "m-9"})
	if err != nil {
		t.Fatal(err)
	}
	want := cache.TradeWindow{N: 3, Oldest: cache.TradeScore(&trades[0]), Newest: cache.TradeScore(&trades[2])}
	if len(w) != 1 || w["m-1"] != want {
		t.Errorf("got %+v, want only m-1: %+v", w, want)
	}
}

// TestMissingTrades: a trade is missing when its list lacks it, unless the
// list is full and the trade is older than all of it (a write would trim it
// at once); a market without a list misses all of its trades.
func TestMissingTrades(t *testing.T) {
	c, rdb, _ := miniCache(t)
	ctx := context.Background()
	base := testNow.Add(-time.Hour)
	trade := func(m string, i int) store.Trade {
		return store.Trade{MarketID: m, TradeID: fmt.Sprintf("%s-%03d", m, i), Venue: "venue_a",
			Price: 0.5, Size: 1, Side: "buy", TS: base.Add(time.Duration(i) * time.Second)}
	}
	// m-1 holds its newest MaxTrades of MaxTrades+1 trades: full.
	var full []store.Trade
	for i := range cache.MaxTrades + 1 {
		full = append(full, trade("m-1", i))
	}
	// m-3 lost the middle one of its three trades.
	three := []store.Trade{trade("m-3", 1), trade("m-3", 2), trade("m-3", 3)}
	apply(t, c, &store.Result{Trades: append(slices.Clone(full), three...)})
	if err := rdb.ZRem(ctx, c.TradesKey("m-3"), cache.RenderTrade(&three[1])).Err(); err != nil {
		t.Fatal(err)
	}
	other := trade("m-2", 5)
	got, err := c.MissingTrades(ctx, append([]store.Trade{full[0], full[1], full[cache.MaxTrades], other}, three...))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]store.Trade{"m-2": {other}, "m-3": {three[1]}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}
