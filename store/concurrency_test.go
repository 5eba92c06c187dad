package store_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/marketdata/marketdata/store"
)

// The key space of the concurrency test: small, so that batches collide.
const (
	nEvents  = 5
	nMarkets = 20
	nOrphans = 2 // prices of markets that never arrive
	nTrades  = 10
)

func eventKey(i int) string  { return fmt.Sprintf("e%d", i) }
func marketKey(i int) string { return fmt.Sprintf("m%02d", i) }
func priceKey(i int) string {
	if i < nMarkets {
		return marketKey(i)
	}
	return fmt.Sprintf("orphan%d", i-nMarkets)
}

// Every update's content is a function of its key and version, so the final
// row is known even when two updates share a version. A market's event
// changes with its version: markets keep moving between events.
func concEvent(i int, v int64) store.Event { return newEvent(eventKey(i), v) }
func concMarket(i int, v int64) store.Market {
	return newMarket(marketKey(i), eventKey((i+int(v))%nEvents), v)
}
func concPrice(i int, v int64) store.Price { return newPrice(priceKey(i), v) }
func concTrade(i int) store.Trade {
	return newTrade(marketKey(i%nMarkets), fmt.Sprintf("t%d", i), t0.Add(time.Duration(i)*time.Millisecond))
}

// observed gathers what the workers saw: per document, the answer with the
// highest revision; per trade, how many batches applied it.
type observed struct {
	mu      sync.Mutex
	events  map[string]store.EventDoc
	markets map[string]store.MarketDoc
	trades  map[string]int
	// maximum version per key, computed from the updates sent
	maxEvent, maxMarket, maxPrice map[int]int64
}

func (o *observed) record(res *store.Result, ev, mk, pr map[int]int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, d := range res.Events {
		if d.Rev > o.events[d.ID].Rev {
			o.events[d.ID] = d
		}
	}
	for _, d := range res.Markets {
		if d.Rev > o.markets[d.ID].Rev {
			o.markets[d.ID] = d
		}
	}
	for k, ok := range res.Applied {
		if id, isTrade := strings.CutPrefix(k, "trade:"); ok && isTrade {
			o.trades[id]++
		}
	}
	mergeMax(o.maxEvent, ev)
	mergeMax(o.maxMarket, mk)
	mergeMax(o.maxPrice, pr)
}

func mergeMax(dst, src map[int]int64) {
	for k, v := range src {
		dst[k] = max(dst[k], v)
	}
}

func randomBatch(rng *rand.Rand) (b store.Batch, ev, mk, pr map[int]int64) {
	ev, mk, pr = map[int]int64{}, map[int]int64{}, map[int]int64{}
	version := func() int64 { return rng.Int64N(30) + 1 }
	for range rng.IntN(3) {
		i, v := rng.IntN(nEvents), version()
		b.Events = append(b.Events, concEvent(i, v))
		ev[i] = max(ev[i], v)
	}
	for range rng.IntN(6) {
		i, v := rng.IntN(nMarkets), version()
		b.Markets = append(b.Markets, concMarket(i, v))
		mk[i] = max(mk[i], v)
	}
	for range rng.IntN(6) {
		i, v := rng.IntN(nMarkets+nOrphans), version()
		b.Prices = append(b.Prices, concPrice(i, v))
		pr[i] = max(pr[i], v)
	}
	for range rng.IntN(3) {
		b.Trades = append(b.Trades, concTrade(rng.IntN(nTrades)))
	}
	if rng.IntN(10) == 0 {
		b.Touch = append(b.Touch, eventKey(rng.IntN(nEvents)))
	}
	return b, ev, mk, pr
}

// Concurrent batches over a small key space: no error reaches the caller,
// every row holds its highest version, and the answer with each document's
// highest revision is the document's final state.
func TestApplyBatchConcurrent(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const workers, batches = 8, 50
	o := &observed{
		events: map[string]store.EventDoc{}, markets: map[string]store.MarketDoc{}, trades: map[string]int{},
		maxEvent: map[int]int64{}, maxMarket: map[int]int64{}, maxPrice: map[int]int64{},
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := range batches {
				b, ev, mk, pr := randomBatch(rng)
				res, err := s.ApplyBatch(t.Context(), &b)
				if err != nil {
					t.Errorf("worker %d batch %d: %v", w, i, err)
					return
				}
				o.record(res, ev, mk, pr)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	for i, v := range o.maxEvent {
		if got, want := show(readEvent(t, pool, eventKey(i))), show(concEvent(i, v)); got != want {
			t.Errorf("event %s:\n got %s\nwant %s", eventKey(i), got, want)
		}
	}
	for i, v := range o.maxMarket {
		got, _ := readMarket(t, pool, marketKey(i))
		if got, want := show(got), show(concMarket(i, v)); got != want {
			t.Errorf("market %s:\n got %s\nwant %s", marketKey(i), got, want)
		}
	}
	for i, v := range o.maxPrice {
		got, _ := readPrice(t, pool, priceKey(i))
		if got, want := show(got), show(concPrice(i, v)); got != want {
			t.Errorf("price %s:\n got %s\nwant %s", priceKey(i), got, want)
		}
	}
	trades := readTrades(t, pool)
	if len(trades) != len(o.trades) {
		t.Errorf("trade rows: got %d, want %d", len(trades), len(o.trades))
	}
	for id, n := range o.trades {
		if n != 1 {
			t.Errorf("trade %s reported applied %d times, want once", id, n)
		}
	}

	// The highest revision handed out for a document is the stored one.
	rows, err := pool.Query(t.Context(), `SELECT doc, rev FROM doc_revs`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int64{}
	for rows.Next() {
		var doc string
		var rev int64
		if err := rows.Scan(&doc, &rev); err != nil {
			t.Fatal(err)
		}
		stored[doc] = rev
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := len(stored), len(o.events)+len(o.markets); got != want {
		t.Errorf("doc_revs rows: got %d, want %d (documents answered)", got, want)
	}
	for id, d := range o.events {
		if got := stored["e:"+id]; got != d.Rev {
			t.Errorf("doc_revs e:%s = %d, want the last Rev answered, %d", id, got, d.Rev)
		}
	}
	for id, d := range o.markets {
		if got := stored["m:"+id]; got != d.Rev {
			t.Errorf("doc_revs m:%s = %d, want the last Rev answered, %d", id, got, d.Rev)
		}
	}

	// A cache keeping the highest revision of each document ends up with the
	// store's final state.
	snap := openSnapshot(t, s)
	if err := snap.EventDocs(t.Context(), 3, func(d store.EventDoc) error {
		if got, want := show(o.events[d.ID]), show(d); got != want {
			t.Errorf("event document %s, last answered:\n got %s\nwant %s", d.ID, got, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := snap.MarketDocs(t.Context(), func(d store.MarketDoc) error {
		if got, want := show(priceView(o.markets[d.ID])), show(priceView(d)); got != want {
			t.Errorf("market document %s, last answered:\n got %s\nwant %s", d.ID, got, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A market moved by another batch while this batch waits for its locks: the
// batch must notice that the event it read is stale and redo its work, so
// that the event the market leaves gets a fresh document too.
func TestApplyBatchMarketMovedWhileWaiting(t *testing.T) {
	t.Parallel()
	s, pool := setup(t)
	// Locks are taken in id order: "a" (the new event) before "b" (the old one).
	apply(t, s, &store.Batch{
		Events:  []store.Event{newEvent("a", 1), newEvent("b", 1), newEvent("c", 1)},
		Markets: []store.Market{newMarket("m", "b", 1)},
	})

	// Hold e:a so that the batch moving m from b to a stops after reading b.
	blocker, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(t.Context()) //nolint:errcheck // only for a test that stops early (a no-op after the Commit below)
	if _, err := blocker.Exec(t.Context(), `SELECT 1 FROM doc_revs WHERE doc = 'e:a' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	toA := newMarket("m", "a", 3)
	done := make(chan *store.Result, 1)
	go func() {
		res, err := s.ApplyBatch(t.Context(), &store.Batch{Markets: []store.Market{toA}})
		if err != nil {
			t.Errorf("ApplyBatch moving m to a: %v", err)
		}
		done <- res
	}()
	waitForLockWaiter(t, pool)

	// Meanwhile m moves from b to c.
	apply(t, s, &store.Batch{Markets: []store.Market{newMarket("m", "c", 2)}})
	if err := blocker.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res == nil {
		return
	}
	a, c := newEvent("a", 1), newEvent("c", 1)
	want := []store.EventDoc{{ID: "a", Event: &a, Markets: []store.Market{toA}}, {ID: "c", Event: &c}}
	if got, want := eventDocs(res.Events), eventDocs(want); got != want {
		t.Errorf("Result.Events:\n got %s\nwant %s", got, want)
	}
	if m, _ := readMarket(t, pool, "m"); m == nil || m.EventID != "a" || m.Version != 3 {
		t.Errorf("market m: got %s, want version 3 in event a", show(m))
	}
}

// waitForLockWaiter waits until a session of the test's database waits for a lock.
func waitForLockWaiter(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(t.Context(), `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no session waits for the held lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
