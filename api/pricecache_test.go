package api

import (
	"testing"
	"time"

	"github.com/marketdata/marketdata/cache"
)

// TestPriceCache: fresh items are served from the node; a drop (a change
// notice) forgets them at once; a read that began before a drop does not
// store its possibly older answer; items expire after the TTL.
func TestPriceCache(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newPriceCache(2*time.Second, 10, func() time.Time { return now })
	ids := []string{"a", "b"}
	hits := make([]cache.MarketEntry, 2)
	miss, drops := p.lookup(ids, hits)
	if len(miss) != 2 {
		t.Fatalf("empty cache: got misses %v, want both", miss)
	}
	p.store("a", cache.MarketEntry{Found: true, Served: true, Body: []byte("A1")}, drops[0], now)

	// b's read began before a notice dropped b: its answer is not kept.
	p.drop([]string{"b"})
	p.store("b", cache.MarketEntry{Found: true, Served: true, Body: []byte("B-old")}, drops[1], now)

	hits = make([]cache.MarketEntry, 2)
	miss, _ = p.lookup(ids, hits)
	if string(hits[0].Body) != "A1" || len(miss) != 1 || miss[0] != 1 {
		t.Fatalf("after store and drop: hits %q, misses %v; want a served from the node and b missed", hits[0].Body, miss)
	}

	p.drop([]string{"a"})
	if miss, _ = p.lookup(ids, make([]cache.MarketEntry, 2)); len(miss) != 2 {
		t.Errorf("after dropping a: misses %v, want both", miss)
	}

	_, drops = p.lookup([]string{"a"}, make([]cache.MarketEntry, 1))
	p.store("a", cache.MarketEntry{Found: true, Body: []byte("A2")}, drops[0], now)
	now = now.Add(2 * time.Second)
	if miss, _ = p.lookup([]string{"a"}, make([]cache.MarketEntry, 1)); len(miss) != 1 {
		t.Errorf("after the TTL: got a hit, want a miss")
	}
}
