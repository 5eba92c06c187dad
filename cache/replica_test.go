package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/metrictest"
	"github.com/marketdata/marketdata/internal/notice"
	"github.com/marketdata/marketdata/store"
)

// newReplicaWorld is a readerWorld with the price replica on, polling the
// change number every 10 ms, and waits until the replica is whole.
func newReplicaWorld(t *testing.T) *readerWorld {
	t.Helper()
	w := newReaderWorldWith(t, true, 10*time.Millisecond)
	w.replicaReady()
	return w
}

// replicaReady moves the notice clock until the replica says it is whole:
// the start's gap (and any lost notice) is given up only once the test's
// clock has passed the notice wait.
func (w *readerWorld) replicaReady() {
	w.t.Helper()
	w.eventually("the replica to be whole", func() bool { return w.r.ReplicaReady() })
}

// eventually waits (10 s at most) until ok, moving the notice clock by the
// notice wait between looks, so that gaps time out as they would in time.
func (w *readerWorld) eventually(what string, ok func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			w.t.Fatalf("waited 10s for %s", what)
		}
		w.advance(readerWait)
		time.Sleep(20 * time.Millisecond)
	}
}

// heldWrite commits a price update of market and writes the cache, and
// returns the notice without delivering it (a notice in flight).
func (w *readerWorld) heldWrite(market string) (int64, notice.Change) {
	w.t.Helper()
	w.price[market]++
	v := w.price[market]
	ctx := context.Background()
	res, err := w.st.ApplyBatch(ctx, &store.Batch{Prices: []store.Price{{MarketID: market, Version: v,
		TS: testNow.Add(time.Duration(v) * time.Second), Quotes: map[string]store.Quote{"venue_a": quote(ptr(0.3), ptr(0.4), nil, 5)}}}})
	if err != nil {
		w.t.Fatal(err)
	}
	n, err := w.c.Apply(ctx, res)
	if err != nil {
		w.t.Fatal(err)
	}
	return v, n
}

// from reads market (having seen position pos) and returns the version and
// position shown, and the layer that answered.
func (w *readerWorld) from(market string, pos int64) (version, seq int64, layer string) {
	w.t.Helper()
	layers := []string{"replica", "memory", "redis", "store"}
	before := map[string]float64{}
	for _, l := range layers {
		before[l] = w.reads("prices", l)
	}
	ctx := context.Background()
	items, err := w.r.BeginPrices(ctx, []string{market}, pos).Finish(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, l := range layers {
		if w.reads("prices", l) > before[l] {
			layer = l
		}
	}
	if items[0].Shown() {
		version = decode[struct {
			Version int64 `json:"version"`
		}](w.t, items[0].Body).Version
	}
	return version, items[0].Seq, layer
}

// TestReplicaFollowsNotices: the replica is loaded from Redis at the start
// and answers with no round trip; a notice's items replace what it holds
// in place, newer revisions only.
func TestReplicaFollowsNotices(t *testing.T) {
	w := newReplicaWorld(t)
	if v, _, l := w.from("m1", 0); v != 1 || l != "replica" {
		t.Fatalf("m1 after the load: version %d from %s, want 1 from the replica", v, l)
	}
	redisBefore := w.reads("prices", "redis") + w.reads("prices", "memory")
	w.setPrice("m1", true)
	if v, _, l := w.from("m1", 0); v != 2 || l != "replica" {
		t.Fatalf("m1 after a notice: version %d from %s, want 2 from the replica", v, l)
	}
	if got := w.reads("prices", "redis") + w.reads("prices", "memory"); got != redisBefore {
		t.Errorf("reads from memory or Redis went from %v to %v: the notice's item should have been used", redisBefore, got)
	}
	// A late notice of an older revision changes nothing.
	_, old := w.heldWrite("m1")
	w.setPrice("m1", true)
	w.r.Notice(old)
	if v, _, _ := w.from("m1", 0); v != 4 {
		t.Errorf("after a late older notice: version %d, want 4", v)
	}
}

// TestReplicaOrder: a read that names a position the replica has not
// reached (a client's ETag from a node that applied a notice this node has
// not) waits for it, then reads Redis: it never shows an older item than
// the client saw. Without a position the replica answers at once.
func TestReplicaOrder(t *testing.T) {
	w := newReplicaWorld(t)
	v, n := w.heldWrite("m2")
	got, seq, layer := w.from("m2", n.Seq)
	if got != v || seq != n.Seq || layer != "redis" {
		t.Fatalf("read at position %d: version %d (position %d) from %s, want %d (%d) from Redis", n.Seq, got, seq, layer, v, n.Seq)
	}
	if got, _, layer := w.from("m2", 0); got != v-1 || layer != "replica" {
		t.Fatalf("read with no position while the notice is in flight: version %d from %s, want %d from the replica", got, layer, v-1)
	}
	w.r.Notice(n)
	if got, seq, layer := w.from("m2", n.Seq); got != v || seq != n.Seq || layer != "replica" {
		t.Fatalf("after the notice: version %d (position %d) from %s, want %d (%d) from the replica", got, seq, layer, v, n.Seq)
	}
}

// TestReplicaGapReloads: a write whose notice never comes (lost) is found
// by the background poll of the change number; once the notice wait
// passes, the replica loads again and shows it.
func TestReplicaGapReloads(t *testing.T) {
	w := newReplicaWorld(t)
	loads := metrictest.Value(t, w.reg, "marketdata_replica_loads_total")
	v, _ := w.heldWrite("m1") // the notice is lost
	w.eventually("the lost write to be shown", func() bool {
		got, _, layer := w.from("m1", 0)
		return got == v && layer == "replica"
	})
	if got := metrictest.Value(t, w.reg, "marketdata_replica_loads_total"); got <= loads {
		t.Errorf("replica loads: %v before the lost notice, %v after: want a reload", loads, got)
	}
}

// TestReplicaNoticeWithoutItems: a notice that names a market without its
// item (a writer that does not carry them) removes it from the replica:
// reads go to Redis, and the item comes back.
func TestReplicaNoticeWithoutItems(t *testing.T) {
	w := newReplicaWorld(t)
	v, n := w.heldWrite("m1")
	n.Prices = nil
	w.r.Notice(n)
	w.eventually("m1 back in the replica", func() bool {
		got, _, layer := w.from("m1", 0)
		if got != v {
			t.Fatalf("m1: version %d, want %d", got, v)
		}
		return layer == "replica"
	})
}

// TestReplicaFeedDown: cut from the notices, the node stops answering from
// the replica (reads go to Redis); once they flow again it loads again.
func TestReplicaFeedDown(t *testing.T) {
	w := newReplicaWorld(t)
	w.r.FeedDown()
	if w.r.ReplicaReady() {
		t.Fatal("replica still answers with the feed down")
	}
	v, _ := w.heldWrite("m1")
	time.Sleep(50 * time.Millisecond) // polls run: no load while the feed is down
	if w.r.ReplicaReady() {
		t.Fatal("replica loaded while the feed is down")
	}
	if got, _, layer := w.from("m1", 0); got != v || layer == "replica" {
		t.Fatalf("m1 with the feed down: version %d from %s, want %d not from the replica", got, layer, v)
	}
	w.r.FeedUp()
	w.replicaReady()
	if got, _, layer := w.from("m1", 0); got != v || layer != "replica" {
		t.Fatalf("m1 after the feed is back: version %d from %s, want %d from the replica", got, layer, v)
	}
}

// TestReplicaFlushClears: a flush (a rebuild, which may prune documents)
// empties the replica before it loads again, so an item Redis no longer
// holds is not answered from it; any other reload merges by revision.
func TestReplicaFlushClears(t *testing.T) {
	w := newReplicaWorld(t)
	if _, _, l := w.from("m2", 0); l != "replica" {
		t.Fatalf("m2 before the flush from %s, want the replica", l)
	}
	if err := w.rdb.Del(context.Background(), w.c.MarketKey("m2")).Err(); err != nil {
		t.Fatal(err)
	}
	w.r.Notice(notice.Change{Flush: true})
	w.replicaReady()
	if v, _, l := w.from("m2", 0); l == "replica" || v != w.price["m2"] {
		t.Fatalf("m2 after the flush: version %d from %s, want %d not from the replica", v, l, w.price["m2"])
	}
	if v, _, l := w.from("m1", 0); l != "replica" || v != w.price["m1"] {
		t.Fatalf("m1 after the flush: version %d from %s, want %d from the replica", v, l, w.price["m1"])
	}
}

// TestReplicaLateNotice: a notice that comes after its number was given up
// (a writer slowed by an overloaded Redis) is applied without a reload;
// until it comes, a read at a position at or above its number goes to
// Redis, so a client that saw that write elsewhere never sees older here.
func TestReplicaLateNotice(t *testing.T) {
	w := newReplicaWorld(t)
	loads := metrictest.Value(t, w.reg, "marketdata_replica_loads_total")
	v, n := w.heldWrite("m1")
	// The background poll sees the number; the test's clock passes the
	// notice wait: the number is given up (a jump), not yet reloaded.
	time.Sleep(50 * time.Millisecond)
	w.advance(readerWait)
	time.Sleep(50 * time.Millisecond)
	if got, _, layer := w.from("m1", n.Seq); got != v || layer == "replica" {
		t.Fatalf("read at the late write's position: version %d from %s, want %d not from the replica", got, layer, v)
	}
	w.r.Notice(n)
	if got, _, layer := w.from("m1", n.Seq); got != v || layer != "replica" {
		t.Fatalf("after the late notice: version %d from %s, want %d from the replica", got, layer, v)
	}
	time.Sleep(1200 * time.Millisecond) // past the late wait: nothing is overdue
	if got := metrictest.Value(t, w.reg, "marketdata_replica_loads_total"); got != loads {
		t.Errorf("replica loads went from %v to %v: a late notice should not reload it", loads, got)
	}
}
