package api

import (
	"strings"
	"sync"
	"time"

	"github.com/marketdata/marketdata/cache"
)

// priceCache keeps the price items snapshot pollers ask for in the node, so
// that a poll of 50 ids costs Redis only its limit check. Ingest's change
// notices drop the items a batch rewrote, at once; the TTL bounds how stale
// an item can be when a notice is lost. A read that began before a drop
// does not store its (possibly older) answer.
type priceCache struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.RWMutex
	entries map[string]priceEntry
	// drops counts the drops of each id since the node started; a read
	// stores its answer only if the count did not move while it ran.
	drops map[string]uint32
}

type priceEntry struct {
	item    cache.MarketEntry
	fetched time.Time
}

func newPriceCache(ttl time.Duration, max int, now func() time.Time) *priceCache {
	return &priceCache{ttl: ttl, max: max, now: now, entries: map[string]priceEntry{}, drops: map[string]uint32{}}
}

// lookup fills hits for the ids it holds fresh and returns the indexes of
// the others, with each one's drop count for a later store.
func (p *priceCache) lookup(ids []string, hits []cache.MarketEntry) (miss []int, drops []uint32) {
	now := p.now()
	p.mu.RLock()
	defer p.mu.RUnlock()
	for i, id := range ids {
		if e, ok := p.entries[id]; ok && now.Sub(e.fetched) < p.ttl {
			hits[i] = e.item
			continue
		}
		miss = append(miss, i)
		drops = append(drops, p.drops[id])
	}
	return miss, drops
}

// store keeps an item read from Redis, unless the id was dropped since the
// read began (drops is the count lookup returned).
func (p *priceCache) store(id string, item cache.MarketEntry, drops uint32, fetched time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drops[id] != drops {
		return
	}
	if len(p.entries) >= p.max {
		clear(p.entries) // a rare reset beats unbounded memory
	}
	if _, ok := p.entries[id]; !ok {
		// A new key of its own: id may be a slice of a whole query string
		// (parseIDs), which the map would otherwise keep alive.
		id = strings.Clone(id)
	}
	p.entries[id] = priceEntry{item: item, fetched: fetched}
}

// drop forgets the items of ids (a notice said they were rewritten).
func (p *priceCache) drop(ids []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		delete(p.entries, id)
		p.drops[id]++
	}
}

// flush forgets everything (after a NATS reconnect notices may be lost).
func (p *priceCache) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.entries {
		p.drops[id]++
	}
	clear(p.entries)
}
