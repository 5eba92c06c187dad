package stream

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/marketdata/marketdata/internal/notice"
)

// A notice that carries its markets' items is fanned out from those bytes:
// the price source is not read for them. Only a market the notice names
// without its item is read (the fallback), and an item that is not shown
// (not served, or no price) sends nothing.
func TestFanOutFromNoticeBytes(t *testing.T) {
	src := newFakePrices()
	ids := marketIDs(3)
	for _, id := range ids {
		src.set(id, 1)
	}
	h := startHub(t, src, quietConfig())
	a, b := h.dial(t), h.dial(t)
	a.subscribed(ids...)
	b.subscribed(ids[:2]...)
	src.readIDs()

	h.OnChange(carried(2, ids[0], ids[1]))
	want := map[string]int64{ids[0]: 2, ids[1]: 2}
	for _, c := range []*client{a, b} {
		got := map[string]int64{}
		for range 2 {
			m := c.next()
			got[m.MarketID] = m.Version
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("after a notice carrying version 2 of %v: got %v, want %v", ids[:2], got, want)
		}
	}
	if read := src.readIDs(); len(read) != 0 {
		t.Errorf("the hub read %v for a notice that carried their items; want no read", read)
	}

	// m002 is named without its item: it alone is read.
	src.set(ids[2], 3)
	n := carried(3, ids[0])
	n.Markets = append(n.Markets, ids[2])
	h.OnChange(n)
	got := map[string]int64{}
	for range 2 {
		m := a.next()
		got[m.MarketID] = m.Version
	}
	if want := map[string]int64{ids[0]: 3, ids[2]: 3}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if m := b.next(); m.MarketID != ids[0] || m.Version != 3 {
		t.Errorf("b got %+v, want %s version 3", m, ids[0])
	}
	if read := src.readIDs(); !reflect.DeepEqual(read, []string{ids[2]}) {
		t.Errorf("the hub read %v; want only %s, which the notice named without its item", read, ids[2])
	}

	// m001 leaves the served set: nothing is sent, nothing read, and a
	// newcomer is not given the old item.
	h.OnChange(notice.Change{Markets: []string{ids[1]}, Prices: []notice.Price{{ID: ids[1], Rev: 4}}})
	// The same bytes under a newer revision are no change either.
	same := carried(3, ids[0])
	same.Prices[0].Rev = 5
	h.OnChange(same)
	h.OnChange(carried(6, ids[2]))
	if m := a.next(); m.MarketID != ids[2] || m.Version != 6 {
		t.Errorf("a got %+v, want %s version 6 (nothing for %s, gone, or %s, unchanged)", m, ids[2], ids[1], ids[0])
	}
	if rev, body := h.newest(ids[1]); body != nil || rev != 4 {
		t.Errorf("the topic of %s, not served at revision 4, holds revision %d (body %v); want 4 and none", ids[1], rev, body != nil)
	}
	if read := src.readIDs(); len(read) != 0 {
		t.Errorf("the hub read %v; want no read", read)
	}
	b.quiet(100 * time.Millisecond)
}

// Notices that race (several goroutines, versions out of order, and the
// fallback reads and resyncs between them) never make a connection see a
// market go backwards or repeat a version, and every connection ends at
// each market's newest version.
func TestFanOutOrderPerMarket(t *testing.T) {
	const markets, versions, senders = 20, 200, 4
	src := newFakePrices()
	ids := marketIDs(markets)
	for _, id := range ids {
		src.set(id, 1)
	}
	cfg := quietConfig()
	cfg.Workers = 3
	h := startHub(t, src, cfg)
	clients := make([]*client, 4)
	for i := range clients {
		clients[i] = h.dial(t)
		clients[i].subscribed(ids...)
	}

	// Each reader checks its own connection while the notices flow.
	type result struct {
		last map[string]int64
		err  error
	}
	results := make([]result, len(clients))
	var readers sync.WaitGroup
	for i, c := range clients {
		readers.Go(func() {
			last := map[string]int64{}
			for _, id := range ids {
				last[id] = 1
			}
			for !allAtLeast(last, versions) {
				m := c.next()
				if m.Type != "price" {
					results[i].err = fmt.Errorf("%+v, want a price", m)
					return
				}
				if m.Version <= last[m.MarketID] {
					results[i].err = fmt.Errorf("%s: version %d after %d", m.MarketID, m.Version, last[m.MarketID])
					return
				}
				last[m.MarketID] = m.Version
			}
			results[i].last = last
		})
	}

	var senders_ sync.WaitGroup
	for s := range senders {
		senders_.Go(func() {
			for v := int64(2 + s); v <= versions; v += senders {
				// Most notices carry their items; every fifth names a market
				// without it, which is read (and may be older by then).
				n := carried(v, ids...)
				if v%5 == 0 {
					n.Prices = n.Prices[1:]
				}
				src.set(ids[0], v) // the fallback's current item, racing too
				h.OnChange(n)
				if v%37 == 0 {
					h.OnChange(notice.Change{Flush: true})
				}
			}
		})
	}
	senders_.Wait()
	// The last version of every market, in case its notice lost the race:
	// the fan-out keeps the newest either way.
	h.OnChange(carried(versions, ids...))
	readers.Wait()
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("client %d: %v", i, r.err)
		}
	}
}

func allAtLeast(last map[string]int64, v int64) bool {
	for _, x := range last {
		if x < v {
			return false
		}
	}
	return true
}

// A gap (a notice lost, a flush, a queue that was full) makes every market
// subscribed on the node be read again, and each subscriber gets the
// newest version it had not been given.
func TestFanOutGapResync(t *testing.T) {
	src := newFakePrices()
	ids := marketIDs(30)
	for _, id := range ids {
		src.set(id, 1)
	}
	h := startHub(t, src, quietConfig())
	a, b := h.dial(t), h.dial(t)
	a.subscribed(ids...)
	b.subscribed(ids[10:]...)
	src.readIDs()

	// Versions 2 and 3 were committed; their notices never came.
	for _, id := range ids {
		src.set(id, 3)
	}
	b.quiet(100 * time.Millisecond) // nothing without a notice or a resync
	b = h.dial(t)
	b.subscribed(ids[10:]...) // snapshot: version 3
	src.readIDs()
	for _, id := range ids {
		src.set(id, 4)
	}
	h.OnChange(notice.Change{Flush: true})
	for _, tc := range []struct {
		c    *client
		want []string
	}{{a, ids}, {b, ids[10:]}} {
		got := map[string]int64{}
		for range tc.want {
			m := tc.c.next()
			got[m.MarketID] = m.Version
		}
		for _, id := range tc.want {
			if got[id] != 4 {
				t.Errorf("after the flush %s is at %d, want 4", id, got[id])
			}
		}
	}
	if read := src.readIDs(); !reflect.DeepEqual(read, ids) {
		t.Errorf("the resync read %v, want every subscribed market %v", read, ids)
	}

	// A queue that is full drops items: the hub resyncs at once.
	cfg := quietConfig()
	cfg.Workers, cfg.Queue = 1, 1
	src2 := newFakePrices()
	for _, id := range ids {
		src2.set(id, 1)
	}
	h2 := startHub(t, src2, cfg)
	c := h2.dial(t)
	c.subscribed(ids...)
	for _, id := range ids {
		src2.set(id, 9)
	}
	for v := int64(2); v <= 8; v++ {
		for _, id := range ids {
			h2.OnChange(carried(v, id)) // many more than a queue of 1 holds
		}
	}
	last := map[string]int64{}
	for !allAtLeast(last, 9) || len(last) < len(ids) {
		m := c.next()
		if m.Version <= last[m.MarketID] {
			t.Fatalf("%s: version %d after %d", m.MarketID, m.Version, last[m.MarketID])
		}
		last[m.MarketID] = m.Version
	}
	if dropped := counterValue(t, h2.m.dropped); dropped == 0 {
		t.Errorf("no notice dropped with a queue of 1; the test shows nothing")
	}
}

// The writer coalesces: the frames waiting for a connection go out
// together, many messages a write, in order and each whole.
func TestWriterCoalesces(t *testing.T) {
	src := newFakePrices()
	ids := marketIDs(200)
	for _, id := range ids {
		src.set(id, 1)
	}
	h := startHub(t, src, quietConfig())
	c := h.dial(t)
	before := h.writes.Load()
	// 1 ack and 200 snapshot prices wait together.
	got := c.subscribed(ids...)
	if len(got) != len(ids) {
		t.Fatalf("%d snapshot prices, want %d", len(got), len(ids))
	}
	const messages = 1 + 200
	writes := h.writes.Load() - before
	t.Logf("%d messages in %d writes", messages, writes)
	// 200 prices of ~260 bytes in writes of at most 4 KiB: ~14 writes.
	if writes > messages/8 {
		t.Errorf("%d messages took %d writes; want the frames waiting written together (≤ %d writes)", messages, writes, messages/8)
	}

	// Notices while the client does not read pile up behind one write at
	// most; when it reads, everything is there, in order, conflated.
	for v := int64(2); v <= 20; v++ {
		h.OnChange(carried(v, ids[:50]...))
	}
	last := map[string]int64{}
	n := 0
	for len(last) < 50 || !allAtLeast(last, 20) {
		m := c.next()
		n++
		if m.Version <= last[m.MarketID] {
			t.Fatalf("%s: version %d after %d", m.MarketID, m.Version, last[m.MarketID])
		}
		last[m.MarketID] = m.Version
	}
	ids50 := slices.Clone(ids[:50])
	for id := range last {
		if !slices.Contains(ids50, id) {
			t.Errorf("a price of %s, which no notice named", id)
		}
	}
	t.Logf("%d price messages for 19 versions of 50 markets; %d writes in all", n, h.writes.Load()-before)
}
